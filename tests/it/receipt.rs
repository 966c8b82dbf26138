//! An AFK run's receipt (issue 28 §5): written by lab from what it did,
//! read through `GET /api/v1/runs/{id}/receipt` and on the pull request's
//! page.

use std::str::FromStr;

use serde_json::json;

use crate::afk::{afk_repo, behave, issue};
use crate::afk_follow::{green_in_round_2, two_rounds};
use crate::on_both;
use crate::support::{Backend, TestServer, id};

on_both!(
    a_receipt_tells_each_round_and_check_of_a_pull_request,
    a_resumed_round_keeps_the_receipt_in_order_and_counts_its_turns,
);

/// The receipt three ways (issue 40 §8): the API's body, what `labctl
/// receipt` prints (its `--json` is the body), and the pull request's page.
pub(crate) async fn read_back(s: &TestServer, run: i64) -> (serde_json::Value, String, String) {
    let body = s.get(&format!("/api/v1/runs/{run}/receipt")).await.ok();
    let typed: lab::http::receipt::ReceiptBody =
        serde_json::from_value(body.clone()).expect("the receipt decodes as its body type");
    let out = crate::labctl::ok(&crate::labctl::labctl(s, &["receipt", &run.to_string()]));
    let as_json = crate::labctl::ok(&crate::labctl::labctl(
        s,
        &["receipt", &run.to_string(), "--json"],
    ));
    assert_eq!(
        serde_json::from_str::<lab::http::receipt::ReceiptBody>(&as_json).unwrap(),
        typed
    );
    let number = typed
        .pull_request
        .as_ref()
        .and_then(|p| p.number)
        .expect("a pull request");
    let cookie = crate::pages_input::session(s).await;
    let page = crate::pages_input::visit(
        s,
        &cookie,
        reqwest::Method::GET,
        &format!("/repos/{}/pulls/{number}", typed.repo),
    )
    .await
    .text()
    .await
    .unwrap();
    (body, out, page)
}

/// An agent that ends its session after each round, writing Claude Code's
/// transcript as it goes: a prompt and an answer per round, the second
/// appended to the same file when lab resumes the session.
const RESUMED_WITH_TRANSCRIPT: &str = r#"
d="$HOME/.claude/projects/$(pwd | sed 's/[^a-zA-Z0-9]/-/g')"
mkdir -p "$d"
commit() {
  echo "$1" > "$1.md" && git add "$1.md" && git -c user.name=a -c user.email=a@example.com commit -qm "$1" || exit 8
}
if grep -q -- --resume "$FAKE_REC/argv"; then
  sid=$(tr '\0' '\n' < "$FAKE_REC/argv" | grep -A1 -x -- --resume | tail -n 1)
  cat "$FAKE_REC/../round2.jsonl" >> "$d/$sid.jsonl"
  touch FIXED && git add FIXED && commit second
else
  cat "$FAKE_REC/../round1.jsonl" > "$d/$FAKE_SESSION_ID.jsonl"
  commit work
  labctl pr create --title 'Do it' --body 'Resolves' || exit 7
fi
"#;

/// A red check resumes the ended session for round 2: the receipt keeps
/// round 1 at the run's first start (before its check and round 2), and
/// counts both rounds' turns; labctl and the page say the same, with the
/// plan and reviews lines.
async fn a_resumed_round_keeps_the_receipt_in_order_and_counts_its_turns(b: Backend) {
    let s = TestServer::start(b).await;
    std::fs::create_dir_all(s.tmp().join("records")).unwrap();
    for (round, msg) in [(1, "msg_A"), (2, "msg_B")] {
        std::fs::write(
            s.tmp().join(format!("records/round{round}.jsonl")),
            format!(
                "{}\n{}\n",
                crate::usage::prompt(&format!("round {round}")),
                crate::usage::assistant(msg, 10, 20, 0, 0)
            ),
        )
        .unwrap();
    }
    behave(&s, RESUMED_WITH_TRANSCRIPT);
    afk_repo(&s, "r").await;
    s.patch("/api/v1/repos/r", json!({"check_command": "test -f FIXED"}))
        .await
        .ok();
    let n = issue(&s, "r", "Fixed in a resumed round").await;
    let c = green_in_round_2(&s, n).await;
    let run = c["run_id"].as_i64().unwrap();
    crate::support::wait::until(
        "both rounds' turns counted",
        crate::support::wait::secs(20).every_ms(100),
        async || {
            let r = s.get(&format!("/api/v1/runs/{run}/receipt")).await.ok();
            (r["usage"]["turns"] == 2).then_some(()).ok_or(r)
        },
    )
    .await;
    let (body, out, page) = read_back(&s, run).await;
    let at = |v: &serde_json::Value| jiff::Timestamp::from_str(v["at"].as_str().unwrap()).unwrap();
    let (r1, r2, check1) = (&body["rounds"][0], &body["rounds"][1], &body["checks"][0]);
    assert_eq!(
        (r1["round"].as_i64(), r2["round"].as_i64()),
        (Some(1), Some(2)),
        "{body}"
    );
    assert!(at(r1) <= at(check1) && at(check1) <= at(r2), "{body}");
    assert!(out.contains("60 tokens"), "{out}");
    for said in [&out, &page] {
        assert!(said.contains("2 turn(s)"), "{said}");
        assert!(
            said.contains("none (the issue was not planned first)"),
            "{said}"
        );
    }
    assert!(
        out.lines()
            .any(|l| l.starts_with("reviews") && l.ends_with("none")),
        "{out}"
    );
    assert!(
        page.contains(&format!(
            "<li>round 1: issue, started {}</li>",
            r1["at"].as_str().unwrap()
        )),
        "{page}"
    );
    s.stop().await;
}

/// Red, a check round, green: the receipt names both rounds and what
/// started them, both checks with their command, status and output, the
/// knobs and values with where each came from, the scope checked on the
/// branch, the attempt and the outcome. A manual run has none; a run's own
/// token cannot read it.
async fn a_receipt_tells_each_round_and_check_of_a_pull_request(b: Backend) {
    let s = TestServer::start(b).await;
    behave(&s, &two_rounds(true));
    afk_repo(&s, "r").await;
    s.patch(
        "/api/v1/repos/r",
        json!({"check_command": "echo checking; test -f FIXED",
               "knobs": {"writes": ["*.md", "FIXED"]}}),
    )
    .await
    .ok();
    let n = issue(&s, "r", "Make the check pass").await;
    let c = green_in_round_2(&s, n).await;
    let run = c["run_id"].as_i64().unwrap();
    let r = s.get(&format!("/api/v1/runs/{run}/receipt")).await.ok();
    assert_eq!(r["run_id"], run, "{r}");
    assert_eq!(r["issue"]["number"], n, "{r}");
    assert_eq!(r["pull_request"]["number"], 1, "{r}");
    let causes: Vec<(i64, &str)> = r["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["round"].as_i64().unwrap(), x["cause"].as_str().unwrap()))
        .collect();
    assert_eq!(causes, [(1, "issue"), (2, "check")], "{r}");
    let checks: Vec<(i64, Option<i64>)> = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["round"].as_i64().unwrap(), x["status"].as_i64()))
        .collect();
    assert_eq!(checks, [(1, Some(1)), (2, Some(0))], "{r}");
    assert_eq!(r["checks"][0]["command"], "echo checking; test -f FIXED");
    assert!(
        r["checks"][0]["output_tail"]
            .as_str()
            .unwrap()
            .contains("checking"),
        "{r}"
    );
    assert!(r["checks"][0]["duration_ms"].as_i64().unwrap() >= 0);
    assert_eq!(
        r["scope"],
        json!({"writes": ["*.md", "FIXED"], "state": "in-scope", "outside": null})
    );
    assert!(
        r["knobs"]
            .as_array()
            .unwrap()
            .contains(&json!({"key": "writes", "value": ["*.md", "FIXED"], "source": "repo"})),
        "{r}"
    );
    assert!(r["model"]["source"].is_string(), "{r}");
    assert_eq!(r["attempt"], 1);
    assert_eq!(r["outcome"], "pr-green");
    assert_eq!(r["phase"], "done");
    // labctl shows it, and its --json is the API's body.
    let out = crate::labctl::ok(&crate::labctl::labctl(&s, &["receipt", &run.to_string()]));
    assert!(
        out.contains("ROUND  CAUSE  AT")
            && out.lines().any(|l| l.starts_with("2      check"))
            && out.contains("echo checking; test -f FIXED")
            && out.contains("in-scope (*.md, FIXED)"),
        "{out}"
    );
    let as_json = crate::labctl::ok(&crate::labctl::labctl(
        &s,
        &["receipt", &run.to_string(), "--json"],
    ));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&as_json).unwrap(),
        r
    );
    // The pull request's page shows it.
    let cookie = crate::pages_input::session(&s).await;
    let page = crate::pages_input::visit(&s, &cookie, reqwest::Method::GET, "/repos/r/pulls/1")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(r#"<div id="receipt""#)
            && page.contains("<li>round 2: check, started ")
            && page.contains("knob writes")
            && page.contains("in-scope (*.md, FIXED)"),
        "{page}"
    );
    // A manual run has none; a live run's token does not reach a receipt;
    // an unknown run is a 404.
    s.add_repo("m").await;
    let manual = s.start_run("m", "hello").await;
    let e = s
        .get(&format!("/api/v1/runs/{}/receipt", id(&manual)))
        .await
        .expect(409);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is a manual run"),
        "{e}"
    );
    let token = s.run_token(id(&manual)).await;
    let denied = s
        .send(
            reqwest::Client::new()
                .get(format!("{}/api/v1/runs/{run}/receipt", s.url))
                .bearer_auth(&token),
        )
        .await;
    assert_eq!(denied.status, 403, "{}", denied.body);
    s.get("/api/v1/runs/9999/receipt").await.expect(404);
    s.stop().await;
}
