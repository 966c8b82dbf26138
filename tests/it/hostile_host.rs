//! A hostile agent that goes after lab itself rather than out of its
//! sandbox (issue 23, ADR 24): it plants links and configs in its `.git` and
//! its CLI folder for lab to read or run outside the sandbox, and swaps
//! files while lab reads its workspace. Each attempt must change nothing
//! outside its run and bring none of lab's secrets back to it.

use serde_json::{Value, json};

use crate::afk::{afk_repo, behave, issue, outcome};
use crate::on_both;
use crate::support::{Backend, TestServer, agent, id, wait};

/// The admin token's text, which must never reach the agent or an answer.
fn token(s: &TestServer) -> String {
    std::fs::read_to_string(s.data_dir().join("token"))
        .unwrap()
        .trim()
        .to_owned()
}

/// Every comment on issue `n` of repo `r`, joined.
async fn comments(s: &TestServer, r: &str, n: i64) -> String {
    let i = s.get(&format!("/api/v1/repos/{r}/issues/{n}")).await.ok();
    i["comments"].to_string()
}

/// The agent commits its work, then makes its clone's `alternates` a link
/// to lab's admin token and opens its pull request: lab writes its own
/// `alternates` and brings the branch back in the run's jail, so the pull
/// request opens and nothing of the token comes back (on the way in,
/// git's error text used to quote each line of the linked file).
async fn alternates_linked_to_the_token_leak_nothing(b: Backend) {
    let s = TestServer::start(b).await;
    afk_repo(&s, "r").await;
    let data = s.data_dir().canonicalize().unwrap();
    behave(
        &s,
        &format!(
            r#"echo fixed > FIX.md && git add FIX.md
git -c user.name=a -c user.email=a@example.com commit -qm "Fix" || exit 8
rm -f .git/objects/info/alternates
ln -s {data}/token .git/objects/info/alternates
labctl pr create --title Fix --body done > "$FAKE_REC/../pr.txt" 2>&1 || exit 7
"#,
            data = data.display()
        ),
    );
    let n = issue(&s, "r", "Leak").await;
    let c = outcome(&s, "r", n, 60).await;
    let answer = std::fs::read_to_string(s.tmp().join("records/pr.txt")).unwrap();
    let t = token(&s);
    assert!(!answer.contains(&t), "{answer}");
    assert!(!comments(&s, "r", n).await.contains(&t));
    assert_eq!(c["outcome"], "pr-green", "{c}\n{answer}");
    // The link the agent made was replaced by lab's own text.
    let run = s.get(&format!("/api/v1/runs/{}", c["run_id"])).await.ok();
    let alt = std::path::Path::new(run["workspace"].as_str().unwrap())
        .join(".git/objects/info/alternates");
    assert!(!alt.symlink_metadata().unwrap().file_type().is_symlink());
    s.stop().await;
}

/// The agent makes its clone a partial clone whose promisor remote's
/// `uploadpack` is a command, and points its branch at a missing object:
/// whatever of lab reads the branch (opening the pull request, the diff, the
/// Changes tab, removal) must never run it on the host.
async fn a_partial_clone_s_command_never_runs_on_the_host(b: Backend) {
    let s = TestServer::start(b).await;
    afk_repo(&s, "r").await;
    let marker = s.tmp().join("host-ran-it");
    let missing = "a".repeat(40);
    behave(
        &s,
        &format!(
            r#"echo fixed > FIX.md && git add FIX.md
git -c user.name=a -c user.email=a@example.com commit -qm "Fix" || exit 8
git config extensions.partialClone x
git config remote.x.promisor true
git config remote.x.url /nonexistent
git config remote.x.uploadpack 'touch {marker}; false'
printf '{missing}\n' > .git/refs/heads/$(git symbolic-ref --short HEAD)
labctl pr create --title Fix --body done > "$FAKE_REC/../pr.txt" 2>&1
sleep 30
"#,
            marker = marker.display()
        ),
    );
    let n = issue(&s, "r", "Run it").await;
    let run = wait::until("the AFK run", wait::secs(30), async || {
        let runs = s.get("/api/v1/runs?kind=afk").await.ok();
        runs.as_array().unwrap().first().cloned()
    })
    .await;
    let rid = id(&run);
    wait::until("the pull request's answer", wait::secs(30), async || {
        std::fs::read_to_string(s.tmp().join("records/pr.txt"))
            .ok()
            .filter(|t| !t.is_empty())
    })
    .await;
    let answer = std::fs::read_to_string(s.tmp().join("records/pr.txt")).unwrap();
    assert!(answer.contains("error"), "{answer}");
    // Every reader of the branch, while the run lives and after.
    s.get(&format!("/api/v1/runs/{rid}/diff")).await;
    s.raw_head(&format!("/runs/{rid}/changes")).await;
    s.post(&format!("/api/v1/runs/{rid}/stop"), json!({})).await;
    s.wait_run(rid, 20, |r| r["state"] != "running").await;
    s.get(&format!("/api/v1/runs/{rid}/diff")).await;
    s.delete(&format!("/api/v1/runs/{rid}")).await;
    assert!(!marker.exists(), "the agent's command ran on the host");
    let _ = n;
    s.stop().await;
}

/// While lab reads a live run's diff, the agent swaps a folder for a link
/// to lab's admin token and back, again and again: in the run's jail the
/// token is not there to read, so no diff ever holds it.
async fn a_live_diff_never_holds_what_a_swapped_link_names(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let data = s.data_dir().canonicalize().unwrap();
    let script = s.tmp().join("swap.sh");
    agent::write_script(
        &script,
        &format!(
            r#"ln -s {data}/token leak
mkdir -p d && echo x > d/token
ln -s {data} lnk
python3 - <<'PY'
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
swap = lambda: libc.renameat2(-100, b"d", -100, b"lnk", 2)
end = time.time() + 8
while time.time() < end:
    swap()
PY
rm -rf real lnk d
"#,
            data = data.display()
        ),
    );
    let run = s
        .start_run("r", &format!("FAKE_RUN={}", script.display()))
        .await;
    let rid = id(&run);
    let t = token(&s);
    for _ in 0..60 {
        let d = s.get(&format!("/api/v1/runs/{rid}/diff")).await;
        let text = format!("{:?}", d.ok());
        assert!(!text.contains(&t), "the token reached a diff");
    }
    // Once the agent is done, the link itself shows, as a link: its
    // target's name, not its content.
    s.wait_run(rid, 30, |r| r["state"] != "running").await;
    let d = s.get(&format!("/api/v1/runs/{rid}/diff")).await.ok();
    let leak = d["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "leak")
        .cloned()
        .unwrap_or(Value::Null);
    assert!(
        leak["patch"].as_str().unwrap_or("").contains("/token"),
        "{leak} {d}"
    );
    s.stop().await;
}

/// A run writes hooks into its CLI's settings: they stay in its own CLI
/// folder. The next run and the operator's own CLI config never see them.
/// (A link planted where lab writes a config is replaced, never written
/// through: `run::agent_config`'s tests.)
async fn a_run_s_cli_config_is_its_own(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let operator = s.tmp().join("home");
    let host_file = s.tmp().join("host-file");
    std::fs::write(&host_file, "keep me").unwrap();
    let script = s.tmp().join("plant.sh");
    agent::write_script(
        &script,
        &format!(
            r#"cat > "$CLAUDE_CONFIG_DIR/settings.json" <<'EOF'
{{"hooks":{{"SessionStart":[{{"hooks":[{{"type":"command","command":"touch /tmp/pwned"}}]}}]}}}}
EOF
echo "$CLAUDE_CONFIG_DIR" > "$FAKE_REC/cli-dir"
echo "$HOME" > "$FAKE_REC/home"
rm -f "$CLAUDE_CONFIG_DIR/.claude.json"
ln -s {host} "$CLAUDE_CONFIG_DIR/.claude.json"
touch {operator}/.claude/settings.json 2>/dev/null && echo wrote > "$FAKE_REC/operator"
"#,
            host = host_file.display(),
            operator = operator.display()
        ),
    );
    std::fs::create_dir_all(operator.join(".claude")).unwrap();
    let a = s
        .start_run("r", &format!("FAKE_RUN={} FAKE_EXIT=0", script.display()))
        .await;
    let a_dir = String::from_utf8(s.record(id(&a), "cli-dir").await).unwrap();
    s.wait_run(id(&a), 20, |r| r["state"] != "running").await;
    // A second run: its own folder, without the first one's hooks.
    let b_run = s.working_run("r").await;
    let env = agent::env(&s.record(id(&b_run), "env").await);
    let get = |k: &str| {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let b_dir = get("CLAUDE_CONFIG_DIR");
    assert_ne!(b_dir.trim(), a_dir.trim());
    assert!(b_dir.starts_with(&s.data_dir().to_string_lossy().into_owned()));
    assert!(!std::path::Path::new(&b_dir).join("settings.json").exists());
    assert_ne!(get("HOME"), operator.to_string_lossy());
    // Nothing reached the operator's own config.
    assert!(!operator.join(".claude/settings.json").exists());
    assert!(
        !s.tmp()
            .join("records")
            .join(id(&a).to_string())
            .join("operator")
            .exists()
    );
    assert_eq!(std::fs::read_to_string(&host_file).unwrap(), "keep me");
    s.stop().await;
}

/// A run prints Claude Code's usage-limit text with a reset hours away and
/// posts `StopFailure` `rate_limit` with its own token: it alone waits.
/// Another issue of the same provider starts at once, and the printing
/// run's time limit keeps counting (it ends timed out; a minute of it lasts
/// 15 s here).
async fn a_printed_limit_stops_only_its_own_run(b: Backend) {
    let s = TestServer::start_tweaked(b, |c| c.limit_minute_ms = 15_000).await;
    behave(
        &s,
        r#"if [ "$LAB_ISSUE" != 1 ]; then sleep 120; exit 0; fi
echo "You've hit your session limit · resets 11pm"
printf '%s' '{"session_id":"x","hook_event_name":"StopFailure","error":"rate_limit"}' | labctl hook claude-code
sleep 300
"#,
    );
    afk_repo(&s, "r").await;
    s.patch(
        "/api/v1/repos/r",
        json!({"afk_max_concurrent": 2, "afk_run_timeout_minutes": 1}),
    )
    .await
    .ok();
    let n = issue(&s, "r", "Forge a limit").await;
    let first = wait::until(
        "the run to wait",
        wait::secs(30).every_ms(100),
        async || {
            let runs = s.get("/api/v1/runs?kind=afk").await.ok();
            runs.as_array()
                .unwrap()
                .iter()
                .find(|r| r["agent_state"]["state"] != "working" && !r["agent_state"].is_null())
                .cloned()
        },
    )
    .await;
    issue(&s, "r", "Another").await;
    wait::until("a second run", wait::secs(30).every_ms(100), async || {
        let runs = s.get("/api/v1/runs?kind=afk").await.ok();
        (runs.as_array().unwrap().len() == 2).then_some(())
    })
    .await;
    assert_eq!(s.get("/api/v1/afk/status").await.ok()["limited"], json!([]));
    let c = outcome(&s, "r", n, 120).await;
    assert_eq!(c["outcome"], "timed-out", "{c}\n{first}");
    s.stop().await;
}

/// The agent commits, has its branch brought into the repo (its pull
/// request), then moves its clone's `main` onto its branch so that the run
/// looks as if it changed nothing: removing the run keeps the branch in the
/// repo, since lab deletes only a branch with no commit of its own there.
async fn a_run_posing_as_unchanged_keeps_its_work(b: Backend) {
    let s = TestServer::start(b).await;
    let repo = s.add_repo("r").await;
    let run = s.working_run("r").await;
    crate::support::git::commit_in_run(&run);
    s.post(
        &format!("/api/v1/runs/{}/pull", crate::support::id(&run)),
        serde_json::json!({"title": "Work", "body": ""}),
    )
    .await
    .expect(201);
    let ws = std::path::Path::new(run["workspace"].as_str().unwrap());
    crate::support::git::git(ws, &["branch", "-f", "main", "HEAD"]);
    let rid = crate::support::id(&run);
    s.post(&format!("/api/v1/runs/{rid}/stop"), serde_json::Value::Null)
        .await
        .ok();
    assert_eq!(s.delete(&format!("/api/v1/runs/{rid}")).await.status, 204);
    let kept = crate::support::git::git(
        std::path::Path::new(repo["path"].as_str().unwrap()),
        &["branch", "--list", run["branch"].as_str().unwrap()],
    );
    assert!(!kept.is_empty(), "the agent's work was deleted");
    s.stop().await;
}

on_both!(
    a_run_posing_as_unchanged_keeps_its_work,
    a_printed_limit_stops_only_its_own_run,
    alternates_linked_to_the_token_leak_nothing,
    a_partial_clone_s_command_never_runs_on_the_host,
    a_live_diff_never_holds_what_a_swapped_link_names,
    a_run_s_cli_config_is_its_own,
    a_link_in_scope_cannot_carry_a_write_out_of_it,
);

/// A run limited to `src/**` commits a link in scope that points out of it
/// (`src/readme-link` → `../README.md`) and a file whose name is a terminal
/// escape, and asks for its pull request again and again: each time it is
/// refused with the count and the globs only; past `afk.max_rounds`
/// refusals the run ends `needs-human` (`stop_cause` `scope`). The paths are
/// named, escaped, on lab's own record of the run; its issue and its token
/// never see them, and nothing was proposed.
async fn a_link_in_scope_cannot_carry_a_write_out_of_it(b: Backend) {
    let s = TestServer::start(b).await;
    afk_repo(&s, "r").await;
    s.patch("/api/v1/repos/r", json!({"knobs": {"writes": ["src/**"]}}))
        .await
        .ok();
    behave(
        &s,
        r#"mkdir -p src && ln -s ../README.md src/readme-link
touch "owned-$(printf '')]0;title$(printf '').txt"
git add -A && git -c user.name=a -c user.email=a@example.com commit -qm "Fix" || exit 8
while :; do
  labctl pr create --title Fix --body done >> "$FAKE_REC/../refused.txt" 2>&1 && exit 9
  sleep 0.3
done
"#,
    );
    let n = issue(&s, "r", "Escape the scope").await;
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "needs-human", "{c}");
    let run = s.get(&format!("/api/v1/runs/{}", c["run_id"])).await.ok();
    assert_eq!(run["stop_cause"], "scope", "{run}");
    let reason = run["state_reason"].as_str().unwrap();
    assert!(
        reason.contains("the branch changes 2 path(s) outside the run's scope (writes: src/**)")
            && reason.contains("src/readme-link")
            && reason.contains(r"owned-\u{1b}]0;title\u{7}.txt"),
        "{reason}"
    );
    let refused = std::fs::read_to_string(s.tmp().join("records/refused.txt")).unwrap();
    assert!(
        refused.matches("outside the run's scope").count() > 3,
        "{refused}"
    );
    let said = comments(&s, "r", n).await;
    for answer in [&refused, &said, &c.to_string()] {
        assert!(
            !answer.contains("readme-link")
                && !answer.contains("owned")
                && !answer.contains('\u{1b}'),
            "{answer}"
        );
    }
    assert!(
        said.contains("outside the run's scope (writes: src/**)"),
        "{said}"
    );
    let pulls = s.get("/api/v1/repos/r/pulls").await.ok();
    assert_eq!(pulls.as_array().map(Vec::len), Some(0), "{pulls}");
    s.stop().await;
}
