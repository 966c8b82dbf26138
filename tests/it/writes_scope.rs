//! A run's scope (issue 28 §4): the `writes` globs it resolved with bound
//! what its pull request may hold. lab refuses to open a pull request, and
//! to check or push a round, while the branch changes a path outside them;
//! the agent is told the count and the globs and undoes it, or its rounds
//! run out and a person looks. The attacks on the check (a link in scope
//! pointing out, names made to mislead a terminal) are in `hostile_host.rs`.

use serde_json::json;

use crate::afk::{afk_repo, behave, issue, outcome};
use crate::afk_follow::STOP;
use crate::on_both;
use crate::support::{Backend, TestServer};

on_both!(
    a_pull_request_out_of_scope_is_refused_until_the_agent_undoes_it,
    a_round_out_of_scope_is_undone_before_its_check_runs,
    committed_out_of_scope_then_exited_says_scope,
);

/// The agent commits a path out of scope (its name made to move a
/// terminal's cursor) and exits without asking for a pull request, once
/// after a refused one and once without (issue 40 §5): each run ends
/// `needs-human` for its scope, its page's reason says `scope:` and names
/// the path escaped, and the issue hears the count and the globs only.
async fn committed_out_of_scope_then_exited_says_scope(b: Backend) {
    let s = TestServer::start(b).await;
    afk_repo(&s, "r").await;
    s.patch("/api/v1/repos/r", json!({"knobs": {"writes": ["src/**"]}}))
        .await
        .ok();
    for (n, ask) in [(1, true), (2, false)] {
        let pr = if ask {
            "labctl pr create --title Fix --body done && exit 9"
        } else {
            ""
        };
        behave(
            &s,
            &format!(
                r#"{COMMIT_AT}
commit_at src/ok.rs
commit_at "$(printf 'OUT\033[2Jside.txt')"
{pr}
exit 0
"#
            ),
        );
        let number = issue(&s, "r", &format!("Out of scope {n}")).await;
        let c = outcome(&s, "r", number, 60).await;
        assert_eq!(c["outcome"], "needs-human", "{c}");
        let detail = c["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("scope:") && detail.contains("1 path(s)") && !detail.contains("OUT"),
            "{detail}"
        );
        let run = s.get(&format!("/api/v1/runs/{}", c["run_id"])).await.ok();
        let reason = run["state_reason"].as_str().unwrap();
        assert!(
            reason.starts_with("scope: the branch changes 1 path(s)")
                && reason.contains("OUT\\u{1b}[2Jside.txt")
                && reason.ends_with("the agent exited with status 0"),
            "{reason}"
        );
        assert!(!reason.contains('\u{1b}'), "{reason}");
    }
    s.stop().await;
}

/// The fake agent's way to commit one file at a path.
pub(crate) const COMMIT_AT: &str = r#"
commit_at() {
  mkdir -p "$(dirname "$1")" && echo x > "$1" && git add -- "$1" \
    && git -c user.name=a -c user.email=a@example.com commit -qm "$1" || exit 8
}
"#;

/// The paths pull request 1 of repo `r` changes, as git in the repo says.
async fn pull_files(s: &TestServer) -> Vec<String> {
    let pr = s.get("/api/v1/repos/r/pulls/1").await.ok();
    let repo = s.get("/api/v1/repos/r").await.ok();
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo["path"].as_str().unwrap())
        .args(["diff", "--name-only"])
        .arg(format!("main...{}", pr["head"].as_str().unwrap()))
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The agent changes `src/ok.rs` and `OUTSIDE-scope.txt`: its pull request
/// is refused, the answer naming the count and the globs but not the path;
/// it removes the file in a new commit and the pull request opens, holding
/// only what is in scope.
async fn a_pull_request_out_of_scope_is_refused_until_the_agent_undoes_it(b: Backend) {
    let s = TestServer::start(b).await;
    afk_repo(&s, "r").await;
    s.patch("/api/v1/repos/r", json!({"knobs": {"writes": ["src/**"]}}))
        .await
        .ok();
    behave(
        &s,
        &format!(
            r#"{COMMIT_AT}
commit_at src/ok.rs
commit_at OUTSIDE-scope.txt
labctl pr create --title Fix --body done > "$FAKE_REC/../refused.txt" 2>&1 && exit 9
git rm -q OUTSIDE-scope.txt && git -c user.name=a -c user.email=a@example.com commit -qm undo
labctl pr create --title Fix --body done || exit 7
"#
        ),
    );
    let n = issue(&s, "r", "Stay in scope").await;
    let c = outcome(&s, "r", n, 60).await;
    let refused = std::fs::read_to_string(s.tmp().join("records/refused.txt")).unwrap();
    assert!(
        refused.contains("the branch changes 1 path(s) outside the run's scope (writes: src/**)")
            && refused.contains("lab pushes none of it"),
        "{refused}"
    );
    assert!(!refused.contains("OUTSIDE-scope"), "{refused}");
    assert_eq!(c["outcome"], "pr-green", "{c}");
    let pulls = s.get("/api/v1/repos/r/pulls").await.ok();
    assert_eq!(pulls.as_array().map(Vec::len), Some(1), "{pulls}");
    assert_eq!(pull_files(&s).await, ["src/ok.rs"]);
    s.stop().await;
}

/// After its pull request, the agent commits a path out of scope and ends
/// its turn: the check does not run; a round tells the agent (in its own
/// session) which paths, it undoes them, the check runs and passes.
async fn a_round_out_of_scope_is_undone_before_its_check_runs(b: Backend) {
    let s = TestServer::start(b).await;
    afk_repo(&s, "r").await;
    s.patch(
        "/api/v1/repos/r",
        json!({"knobs": {"writes": ["*.md"]},
               "check_command": "true"}),
    )
    .await
    .ok();
    behave(
        &s,
        &format!(
            r#"{STOP}{COMMIT_AT}
commit_at work.md
labctl pr create --title 'Do it' --body 'Resolves' || exit 7
commit_at out.txt
stop
read line
printf '%s\n' "$line" > "$FAKE_REC/../round2.txt"
git rm -q out.txt && git -c user.name=a -c user.email=a@example.com commit -qm undo
stop
while :; do sleep 1; done
"#
        ),
    );
    let n = issue(&s, "r", "Stay in scope after the pull request").await;
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    assert_eq!(
        (c["rounds"].as_i64(), c["checks"].as_str()),
        (Some(2), Some("passed")),
        "{c}"
    );
    let told = std::fs::read_to_string(s.tmp().join("records/round2.txt")).unwrap();
    assert!(
        told.starts_with("lab: your pull request needs another round (round 2 of 3).")
            && told.contains(
                "the branch changes 1 path(s) outside the run's scope (writes: *.md): out.txt"
            ),
        "{told}"
    );
    assert_eq!(pull_files(&s).await, ["work.md"]);
    s.stop().await;
}
