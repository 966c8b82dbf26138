//! An AFK run whose agent CLI cannot work (issue 25): not signed in, or
//! exiting as soon as it starts. The run ends at once (`cli-unusable`);
//! only lab's own check of the CLI (its sign-in check, in a run's
//! conditions) holds the provider's AFK runs back, until a check passes.
//!
//! The fake agent answers `claude auth status` signed in unless the
//! credentials lab gives it say "signed-out".

use serde_json::{Value, json};

use super::afk::{afk_repo, behave, issue, outcome};
use crate::on_both;
use crate::support::{Backend, TestServer, wait};

/// What the fake agent shows when Claude Code is not signed in.
const NOT_SIGNED_IN: &str =
    "printf '\\033[2J\\033[H'\necho '  Not logged in · Please run /login'\nsleep 600\n";

const RESOLVES: &str = r#"
echo "fixed" > FIX.md
git add FIX.md
git -c user.name=agent -c user.email=agent@example.com commit -qm "Fix issue $LAB_ISSUE" || exit 8
labctl pr create --title "Fix issue $LAB_ISSUE" --body "Resolves #$LAB_ISSUE" || exit 7
"#;

/// The operator's Claude Code credentials, signed in or out.
fn credentials(s: &TestServer, signed_in: bool) {
    let dir = s.tmp().join("home/.claude");
    std::fs::create_dir_all(&dir).unwrap();
    let body = if signed_in {
        json!({"claudeAiOauth": {"accessToken": "x"}})
    } else {
        json!({"signed-out": true})
    };
    std::fs::write(dir.join(".credentials.json"), body.to_string()).unwrap();
}

fn afk_runs(v: &Value, number: i64) -> usize {
    v["recent"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["issue"] == number)
        .count()
}

/// Not signed in: the run ends within seconds, the issue says why and keeps
/// its ready label, lab's own check confirms it and holds Claude Code's AFK
/// runs back with the fix; once the CLI is signed in and checked again, the
/// issue is taken again.
async fn a_cli_not_signed_in_ends_the_run_and_holds_the_provider(b: Backend) {
    let s = TestServer::start(b).await;
    credentials(&s, false);
    behave(&s, NOT_SIGNED_IN);
    afk_repo(&s, "r").await;
    let n = issue(&s, "r", "Needs an agent").await;
    let c = outcome(&s, "r", n, 30).await;
    assert_eq!(c["outcome"], "cli-unusable", "{c}");
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.contains("Claude Code cannot work here: not logged in"),
        "{detail}"
    );
    let st = s.get("/api/v1/afk/status").await.ok();
    let held = &st["limited"][0];
    assert_eq!(held["provider"], "claude-code", "{st}");
    assert_eq!(held["kind"], "cli", "{st}");
    assert_eq!(held["reason"], "not logged in", "{st}");
    assert!(held["fix"].as_str().unwrap().contains("/login"), "{st}");
    // The issue is told, keeps its ready label, and is not taken again
    // while the CLI cannot work.
    let i = wait::until("the issue told", wait::secs(10).every_ms(100), async || {
        let i = s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok();
        (!i["comments"].as_array().unwrap().is_empty())
            .then_some(i.clone())
            .ok_or(i)
    })
    .await;
    let said = i["comments"][0]["body"].as_str().unwrap();
    assert!(
        said.contains("could not work on this issue") && said.contains("not logged in"),
        "{said}"
    );
    assert_eq!(i["labels"], json!(["ready-for-agent"]), "{i}");
    // Held: the scheduler looks again and starts nothing.
    s.after_ticks(3).await;
    let st = s.get("/api/v1/afk/status").await.ok();
    assert_eq!(afk_runs(&st, n), 1, "{st}");
    let problem = st["repos"][0]["problem"].as_str().unwrap_or("");
    assert!(problem.contains("cannot work here (not logged in)"), "{st}");
    // labctl says it, and its check says the CLI still cannot work.
    let out = crate::labctl::ok(&crate::labctl::labctl(&s, &["afk", "status"]));
    assert!(
        out.contains("claude-code cannot work here: not logged in"),
        "{out}"
    );
    let still = crate::labctl::labctl(&s, &["afk", "check", "claude-code"]);
    assert_eq!(still.status.code(), Some(1), "{still:?}");
    // So does the AFK page, with its button.
    let cookie = crate::pages_input::session(&s).await;
    let page = crate::pages_input::visit(&s, &cookie, reqwest::Method::GET, "/afk")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("claude-code cannot work here: <strong>not logged in</strong>")
            && page.contains("/afk/providers/claude-code/check"),
        "{page}"
    );

    // Signed in, checked again: the issue is taken again, and resolved.
    credentials(&s, true);
    behave(&s, RESOLVES);
    let ok = crate::labctl::ok(&crate::labctl::labctl(&s, &["afk", "check", "claude-code"]));
    assert!(ok.contains("its CLI works here"), "{ok}");
    assert_eq!(s.get("/api/v1/afk/status").await.ok()["limited"], json!([]));
    let done = wait::until(
        "the second attempt",
        wait::secs(40).every_ms(200),
        async || {
            let st = s.get("/api/v1/afk/status").await.ok();
            st["recent"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["issue"] == n && c["attempt"] == 2 && !c["outcome"].is_null())
                .cloned()
                .ok_or(st)
        },
    )
    .await;
    assert_eq!(done["outcome"], "pr-green", "{done}");
    let ledger = s.get("/api/v1/afk/ledger").await.ok();
    assert!(
        ledger["by_outcome"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["outcome"] == "cli-unusable"),
        "{ledger}"
    );
    s.stop().await;
}

/// One run's screen is that run's word: a run that prints Claude's
/// "Not logged in" while the CLI is signed in ends, and holds nothing back.
async fn one_run_s_screen_holds_no_other_run_back(b: Backend) {
    let s = TestServer::start(b).await;
    credentials(&s, true);
    behave(&s, NOT_SIGNED_IN);
    afk_repo(&s, "r").await;
    let n = issue(&s, "r", "Print a login screen").await;
    let c = outcome(&s, "r", n, 30).await;
    assert_eq!(c["outcome"], "cli-unusable", "{c}");
    let st = s.get("/api/v1/afk/status").await.ok();
    assert_eq!(st["limited"], json!([]), "{st}");
    let check = s
        .post("/api/v1/afk/providers/claude-code/check", Value::Null)
        .await
        .ok();
    assert_eq!(
        check,
        json!({"provider": "claude-code", "works": true, "reason": null})
    );
    let unknown = s
        .post("/api/v1/afk/providers/nope/check", Value::Null)
        .await;
    assert_eq!(unknown.status, 404, "{:?}", unknown.body);
    s.stop().await;
}

/// A CLI that exits as soon as it starts: lab checks it, and when the check
/// confirms, the ending is the CLI's (`cli-unusable`), not the issue's.
async fn a_cli_exiting_at_once_is_checked(b: Backend) {
    let s = TestServer::start(b).await;
    credentials(&s, false);
    behave(&s, "exit 1\n");
    afk_repo(&s, "r").await;
    let n = issue(&s, "r", "Anything").await;
    let c = outcome(&s, "r", n, 30).await;
    assert_eq!(c["outcome"], "cli-unusable", "{c}");
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.contains("exited") && detail.contains("not logged in"),
        "{detail}"
    );
    s.stop().await;
}

on_both!(
    a_cli_not_signed_in_ends_the_run_and_holds_the_provider,
    one_run_s_screen_holds_no_other_run_back,
    a_cli_exiting_at_once_is_checked,
);
