//! A hostile agent: an AFK run whose agent tries every way out of its run
//! that a prompt-injected agent could try (lab's secrets and database, lab's
//! tmux server and output relay, another run's screen, keys, workspace and
//! branch, the registered repo's refs). Every attempt must fail, while the same agent
//! still does its work: edit, commit on its branch, read its issue and open
//! its pull request with its run token.

use serde_json::Value;

use crate::afk::{afk_repo, behave, issue, outcome};
use crate::on_both;
use crate::support::{Backend, TestServer, id};

/// Each attempt is a shell command; the script records which ones worked.
fn script(s: &TestServer, other: &Value, repo_path: &str) -> String {
    let data = s.data_dir().canonicalize().unwrap();
    let d = data.display();
    let sock = s.runner().tmux().socket().display().to_string();
    let relay = s.runner().relay().socket().display().to_string();
    let other_session = other["session"].as_str().unwrap();
    let other_ws = other["workspace"].as_str().unwrap();
    let other_branch = other["branch"].as_str().unwrap();
    let other_id = id(other);
    let lab_pid = std::process::id();
    let node = s.runner().node().to_owned();
    let attempts = [
        ("read the admin token", format!("cat {d}/token")),
        (
            "read the database",
            format!("head -c 16 {d}/lab.db | grep -q SQLite"),
        ),
        (
            "write the database",
            format!("test -s {d}/lab.db && echo x >> {d}/lab.db"),
        ),
        (
            "find the database URL",
            "env | grep -q DATABASE_URL".to_owned(),
        ),
        (
            "list lab's tmux sessions",
            format!("tmux -S {sock} list-sessions"),
        ),
        (
            "capture another run's screen",
            format!("tmux -S {sock} capture-pane -p -t ={other_session}:"),
        ),
        (
            "type into another run",
            format!("tmux -S {sock} send-keys -t ={other_session}: 'echo injected' Enter"),
        ),
        (
            "read lab's tmux environment",
            format!("tmux -S {sock} show-environment -g"),
        ),
        ("see the output relay's socket", format!("test -e {relay}")),
        (
            "reach lab's tmux through TMUX",
            "tmux list-sessions".to_owned(),
        ),
        (
            "read lab's environment",
            format!("cat /proc/{lab_pid}/environ"),
        ),
        ("see lab's processes", format!("test -e /proc/{lab_pid}")),
        ("read another workspace", format!("ls {other_ws}/README.md")),
        ("write another workspace", format!("touch {other_ws}/pwned")),
        (
            "read another run's log",
            format!("cat {d}/runs/{other_id}/output.log"),
        ),
        (
            "list lab's workspaces",
            format!("ls {d}/workspaces | grep -q {other_id}"),
        ),
        (
            "move the repo's main",
            format!("git -C {repo_path} update-ref refs/heads/main HEAD"),
        ),
        (
            "move another run's branch",
            format!("git -C {repo_path} update-ref refs/heads/{other_branch} HEAD"),
        ),
        (
            "push to the repo's main",
            "git -c user.name=a -c user.email=a@example.com commit -q --allow-empty -m probe \
             && git push -q origin HEAD:refs/heads/main"
                .to_owned(),
        ),
        (
            // Issue 29: a node's credential is a signature under the fleet
            // key, which a run never sees; a guess is refused.
            "call lab as another lab node",
            format!(
                "curl -sf -H 'x-lab-node: n' -H \"x-lab-node-at: $(date +%s)000\" \
                 -H 'x-lab-node-signature: {}' \"$LAB_URL/api/v1/runs/{other_id}/screen\"",
                "ab".repeat(32)
            ),
        ),
        (
            "pass its run token off as a node's credential",
            format!(
                "curl -sf -H 'x-lab-node: n' -H \"x-lab-node-at: $(date +%s)000\" \
                 -H \"x-lab-node-signature: $LAB_TOKEN\" \"$LAB_URL/api/v1/runs/{other_id}/screen\""
            ),
        ),
        (
            // Draining a node (or forgetting one) would stop every other
            // run's launches: the operator's, never a run's.
            "drain its lab node",
            format!(
                "curl -sf -X POST -H \"Authorization: Bearer $LAB_TOKEN\" \
                 \"$LAB_URL/api/v1/nodes/{node}/drain\""
            ),
        ),
        (
            "write the operator's home",
            format!("touch {}/home/.profile-pwned", s.tmp().display()),
        ),
    ];
    let mut sh = String::from(
        "out=\"$FAKE_REC/../hostile.txt\"\n: > \"$out\"\n\
         try() { if sh -c \"$2\" >/dev/null 2>&1; then echo \"ESCAPED: $1\" >> \"$out\"; \
         else echo \"refused: $1\" >> \"$out\"; fi; }\n",
    );
    for (what, cmd) in attempts {
        let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
        sh.push_str(&format!("try {} {}\n", quote(what), quote(&cmd)));
    }
    // And the work, which must all succeed. Moving its own clone's main is
    // its business: it reaches nothing outside.
    sh.push_str(
        r#"git update-ref refs/heads/main HEAD || exit 10
# curl reaches lab from here (so the node-credential attempts above were
# refused by lab, not by a missing curl).
curl -sf -H "Authorization: Bearer $LAB_TOKEN" "$LAB_URL/api/v1/runs/$LAB_RUN_ID" >/dev/null || exit 11
labctl issue view "$LAB_ISSUE" > "$FAKE_REC/../issue-seen.txt" 2>&1 || exit 9
echo "fixed" > FIX.md
git add FIX.md
git -c user.name=agent -c user.email=agent@example.com commit -qm "Fix issue $LAB_ISSUE" || exit 8
labctl pr create --title "Fix issue $LAB_ISSUE" --body "Resolves #$LAB_ISSUE" || exit 7
echo "done" >> "$out"
"#,
    );
    sh
}

fn git(repo: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

async fn a_hostile_agent_reaches_only_its_own_run(b: Backend) {
    let s = TestServer::start(b).await;
    let repo = afk_repo(&s, "r").await;
    let repo_path = repo["path"].as_str().unwrap().to_owned();
    let main_before = git(&repo_path, &["rev-parse", "refs/heads/main"]);
    // Another run of the same repo, live: the one the agent goes after.
    let other = s.working_run("r").await;
    behave(&s, &script(&s, &other, &repo_path));
    let n = issue(&s, "r", "Do the work").await;
    let c = outcome(&s, "r", n, 60).await;
    let report = std::fs::read_to_string(s.tmp().join("records/hostile.txt")).unwrap();
    let escaped: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("ESCAPED"))
        .collect();
    assert!(escaped.is_empty(), "the agent got out:\n{report}");
    // (The relay's socket is there, outside the sandbox.)
    assert!(s.runner().relay().socket().exists());
    let nodes = s.get("/api/v1/nodes").await.ok();
    assert_eq!(nodes[0]["state"], "up", "a run drained its node: {nodes}");
    assert_eq!(
        report.lines().filter(|l| l.starts_with("refused")).count(),
        23
    );
    assert!(
        report.ends_with("done\n"),
        "its own work failed:\n{report}\n{c}"
    );
    assert_eq!(c["outcome"], "pr-green", "{c}");
    // Its work arrived; nothing else moved.
    let seen = std::fs::read_to_string(s.tmp().join("records/issue-seen.txt")).unwrap();
    assert!(seen.contains("Do the work"), "{seen}");
    assert_eq!(
        git(&repo_path, &["rev-parse", "refs/heads/main"]),
        main_before
    );
    let other_branch = other["branch"].as_str().unwrap();
    assert_eq!(
        git(&repo_path, &["branch", "--list", other_branch]),
        "",
        "another run's branch was made in the repo"
    );
    let other_ws = std::path::Path::new(other["workspace"].as_str().unwrap());
    assert!(!other_ws.join("pwned").exists());
    let screen = crate::support::agent::tmux(
        s.runner().tmux().socket(),
        &[
            "capture-pane",
            "-p",
            "-t",
            &format!("={}:", other["session"].as_str().unwrap()),
        ],
    );
    assert!(!screen.contains("injected"), "{screen}");
    let run = s.get(&format!("/api/v1/runs/{}", c["run_id"])).await.ok();
    let log = git(
        &repo_path,
        &["log", "--format=%s", run["branch"].as_str().unwrap()],
    );
    assert!(log.contains(&format!("Fix issue {n}")), "{log}");
    s.stop().await;
}

/// An agent that draws its CLI's retry line (issue 40 §3) forges only its
/// own run's state: that run ends `cli-unusable`, its provider is not held
/// back, and the honest run beside it opens its pull request.
async fn a_forged_retry_line_ends_only_its_own_run(b: Backend) {
    let s = TestServer::start_tweaked(b, |c| c.limit_minute_ms = 1000).await;
    afk_repo(&s, "r").await;
    s.patch(
        "/api/v1/settings",
        serde_json::json!({"afk": {"max_attempts": 1, "max_concurrent": 2}}),
    )
    .await
    .ok();
    s.patch(
        "/api/v1/repos/r",
        serde_json::json!({"afk_max_concurrent": 2}),
    )
    .await
    .ok();
    behave(
        &s,
        &format!(
            "if [ \"$LAB_ISSUE\" = 1 ]; then echo '{}'; while :; do sleep 1; done; fi\n\
             sleep 3\necho fixed > FIX.md && git add FIX.md\n\
             git -c user.name=a -c user.email=a@example.com commit -qm fix || exit 8\n\
             labctl pr create --title Fix --body \"Resolves #$LAB_ISSUE\" || exit 7\n",
            crate::afk_no_answer::RETRY_LINE
        ),
    );
    let forger = issue(&s, "r", "Forge").await;
    assert_eq!(forger, 1);
    let honest = issue(&s, "r", "Honest").await;
    let c = outcome(&s, "r", forger, 40).await;
    assert_eq!(c["outcome"], "cli-unusable", "{c}");
    let st = s.get("/api/v1/afk/status").await.ok();
    assert_eq!(st["limited"], serde_json::json!([]), "{st}");
    let c = outcome(&s, "r", honest, 40).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    s.stop().await;
}

on_both!(
    a_hostile_agent_reaches_only_its_own_run,
    a_forged_retry_line_ends_only_its_own_run
);
