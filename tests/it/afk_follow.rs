//! The AFK loop after the pull request (issue 14): the repo's check command
//! round by round in the same session, the rounds' limit, budgets, memory
//! admission and usage limits; on the built-in tracker, with the fake agent.

use serde_json::json;

use crate::afk::{afk_repo, behave, issue, outcome};
use crate::on_both;
use crate::support::{Backend, TestServer, wait};

/// The fake agent's end of a turn, as Claude Code's `Stop` hook reports it.
pub(crate) const STOP: &str = r#"
stop() {
  printf '{"session_id":"s","transcript_path":"/tmp/t","cwd":"%s","hook_event_name":"Stop","stop_hook_active":false}' "$PWD" \
    | labctl hook claude-code
}
commit() {
  echo "$1" > "$1.md" && git add "$1.md" && git -c user.name=a -c user.email=a@example.com commit -qm "$1" || exit 8
}
"#;

/// Works, opens its pull request, ends its turn; then, told of a failing
/// check, fixes it (`FIXED`), commits and ends its turn again.
pub(crate) fn two_rounds(fix: bool) -> String {
    format!(
        "{STOP}\ncommit work\nlabctl pr create --title 'Do it' --body 'Resolves' || exit 7\nstop\n\
         read line\nprintf '%s\\n' \"$line\" > \"$FAKE_REC/../round2.txt\"\n\
         {}\ncommit second\nstop\nwhile :; do sleep 1; done\n",
        if fix {
            "touch FIXED && git add FIXED"
        } else {
            ":"
        }
    )
}

/// An agent that ends its session after each turn: it works and opens its
/// pull request; resumed (`--resume`), it keeps its argv as
/// `round2-argv`, fixes (`FIXED`) and commits.
pub(crate) const RESUMED_FIX: &str = r#"
commit() {
  echo "$1" > "$1.md" && git add "$1.md" && git -c user.name=a -c user.email=a@example.com commit -qm "$1" || exit 8
}
if grep -q -- --resume "$FAKE_REC/argv"; then
  cp "$FAKE_REC/argv" "$FAKE_REC/../round2-argv"
  touch FIXED && git add FIXED && commit second
else
  commit work
  labctl pr create --title 'Do it' --body 'Resolves' || exit 7
fi
"#;

/// The argv of the resumed agent (`RESUMED_FIX`'s `round2-argv`).
pub(crate) fn round2_argv(s: &TestServer) -> Vec<String> {
    let argv = std::fs::read(s.tmp().join("records/round2-argv")).unwrap();
    argv.split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Waits for issue `n`'s run to end `pr-green`, its check passed in round 2.
pub(crate) async fn green_in_round_2(s: &TestServer, n: i64) -> serde_json::Value {
    let c = outcome(s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    assert_eq!(
        (c["rounds"].as_i64(), c["checks"].as_str()),
        (Some(2), Some("passed")),
        "{c}"
    );
    c
}

/// A red check sends the failure to the same session; the agent's second
/// round makes it green, and the run ends `pr-green`.
async fn a_red_check_is_fixed_in_a_second_round(b: Backend) {
    let s = TestServer::start(b).await;
    behave(&s, &two_rounds(true));
    afk_repo(&s, "r").await;
    s.patch("/api/v1/repos/r", json!({"check_command": "test -f FIXED"}))
        .await
        .ok();
    let n = issue(&s, "r", "Make the check pass").await;
    green_in_round_2(&s, n).await;
    let told = std::fs::read_to_string(s.tmp().join("records/round2.txt")).unwrap();
    assert!(
        told.starts_with("lab: your pull request needs another round (round 2 of 3).")
            && told.contains("Its check failed on ")
            && told.contains("(failed with exit status 1). The check command is: test -f FIXED"),
        "{told}"
    );
    // One session throughout: one run, its round 2.
    let runs = s.get("/api/v1/runs?kind=afk").await.ok();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(
        (runs[0]["round"].as_i64(), runs[0]["outcome"].as_str()),
        (Some(2), Some("pr-green"))
    );
    // The pull request's branch has the fix.
    let repo_path = s.get("/api/v1/repos/r").await.ok()["path"]
        .as_str()
        .unwrap()
        .to_owned();
    let files = std::process::Command::new("git")
        .args([
            "-C",
            &repo_path,
            "ls-tree",
            "--name-only",
            runs[0]["branch"].as_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&files.stdout).contains("FIXED"));
    // labctl and the run page say what the run was for and how it went.
    let ps = crate::labctl::ok(&crate::labctl::labctl(&s, &["ps", "--all"]));
    assert!(
        ps.contains("ISSUE") && ps.contains(&format!("#{n} r2 pr-green")),
        "{ps}"
    );
    let id = runs[0]["id"].to_string();
    let show = crate::labctl::ok(&crate::labctl::labctl(&s, &["show", &id]));
    assert!(
        show.contains(&format!("r#{n} Make the check pass"))
            && show.contains("round          2")
            && show.contains("phase          done"),
        "{show}"
    );
    let cookie = crate::pages_input::session(&s).await;
    let page = crate::pages_input::visit(&s, &cookie, reqwest::Method::GET, &format!("/runs/{id}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!(">#{n}</a> Make the check pass"))
            && page.contains(r#"<dd id="round">2</dd>"#)
            && page.contains(r#"<dd id="phase">done</dd>"#)
            && page.contains("<strong>pr-green</strong>"),
        "{page}"
    );
    // The pull request's page says what its check said.
    let pull = crate::pages_input::visit(&s, &cookie, reqwest::Method::GET, "/repos/r/pulls/1")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        pull.contains(
            r#"<dd id="checks"><strong>passed</strong> <span class="from">after 2 round(s)</span>"#
        ),
        "{pull}"
    );
    let ledger = s.get("/api/v1/afk/ledger").await.ok();
    assert_eq!(ledger["by_outcome"][0]["outcome"], "pr-green", "{ledger}");
    assert_eq!(ledger["by_outcome"][0]["rounds"], 2, "{ledger}");
    s.stop().await;
}

/// An agent that ends its session after opening its pull request: a red
/// check resumes that session (the CLI's `--resume` with the run's session
/// id) in the same workspace for the next round, with the failure as its
/// prompt.
async fn a_red_check_resumes_an_ended_session(b: Backend) {
    let s = TestServer::start(b).await;
    behave(&s, RESUMED_FIX);
    afk_repo(&s, "r").await;
    s.patch("/api/v1/repos/r", json!({"check_command": "test -f FIXED"}))
        .await
        .ok();
    let n = issue(&s, "r", "Fixed after the session ended").await;
    let c = green_in_round_2(&s, n).await;
    let run = s.get(&format!("/api/v1/runs/{}", c["run_id"])).await.ok();
    let session = run["cli_session_id"].as_str().unwrap().to_owned();
    let argv = round2_argv(&s);
    let at = argv.iter().position(|a| a == "--resume").expect("--resume");
    assert_eq!(argv[at + 1], session);
    let prompt = argv.iter().rev().find(|a| !a.is_empty()).unwrap();
    assert!(prompt.contains("(round 2 of 3)"), "{prompt}");
    // One run, resumed once, in its one workspace.
    assert_eq!(
        s.get("/api/v1/runs?kind=afk")
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    s.stop().await;
}

/// A check that stays red ends the run for a person once the rounds are
/// used up.
async fn rounds_stop_at_the_limit(b: Backend) {
    let s = TestServer::start(b).await;
    behave(&s, &two_rounds(false));
    afk_repo(&s, "r").await;
    s.patch("/api/v1/settings", json!({"afk": {"max_rounds": 2}}))
        .await
        .ok();
    s.patch(
        "/api/v1/repos/r",
        json!({"check_command": "echo 'test x ... FAILED'; exit 4"}),
    )
    .await
    .ok();
    let n = issue(&s, "r", "Never green").await;
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "needs-human", "{c}");
    assert_eq!(c["rounds"], 2, "{c}");
    assert!(
        c["detail"].as_str().unwrap().contains("after 2 round(s)"),
        "{c}"
    );
    let told = std::fs::read_to_string(s.tmp().join("records/round2.txt")).unwrap();
    assert!(told.contains("test x ... FAILED"), "{told}");
    let path = format!("/api/v1/repos/r/issues/{n}");
    wait::until(
        "lab:needs-human on the issue",
        wait::secs(10).every_ms(100),
        async || {
            let i = s.get(&path).await.ok();
            if i["labels"] == json!(["lab:needs-human"]) {
                Ok(())
            } else {
                Err(i)
            }
        },
    )
    .await;
    s.stop().await;
}

/// A run past its token budget is stopped: `over-budget`, not retried.
/// An agent whose transcript says it used 3000 tokens (1000 in, 2000 out),
/// and then waits.
pub(crate) fn spends_3000_tokens(s: &TestServer) {
    let lines = s.tmp().join("transcript.jsonl");
    std::fs::write(
        &lines,
        format!(
            "{}\n{}\n",
            crate::usage::prompt("go"),
            crate::usage::assistant("msg_A", 1000, 2000, 0, 0)
        ),
    )
    .unwrap();
    behave(
        s,
        &format!(
            "d=\"$HOME/.claude/projects/$(pwd | sed 's/[^a-zA-Z0-9]/-/g')\"\n\
             mkdir -p \"$d\" && cp {} \"$d/$FAKE_SESSION_ID.jsonl\"\n\
             while :; do sleep 1; done\n",
            lines.display()
        ),
    );
}

async fn a_token_budget_stops_a_run(b: Backend) {
    let s = TestServer::start(b).await;
    spends_3000_tokens(&s);
    afk_repo(&s, "r").await;
    s.patch("/api/v1/settings", json!({"afk": {"max_tokens": 100_000}}))
        .await
        .ok();
    // The repo's budget is lower, and wins.
    let r = s
        .patch("/api/v1/repos/r", json!({"afk_max_tokens": 2_500}))
        .await
        .ok();
    assert_eq!(r["afk_max_tokens"], 2_500);
    let n = issue(&s, "r", "Spend a lot").await;
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "over-budget", "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains("used 3000 tokens, more than its budget of 2500"),
        "{c}"
    );
    assert!(c["retry_at"].is_null(), "{c}");
    let run = s.get(&format!("/api/v1/runs/{}", c["run_id"])).await.ok();
    assert_eq!(
        (run["state"].as_str(), run["stop_cause"].as_str()),
        (Some("stopped"), Some("budget")),
        "{run}"
    );
    s.stop().await;
}

/// While the machine has less memory available than a run needs, AFK
/// launches wait, and the AFK status says why.
async fn memory_admission_holds_a_launch(b: Backend) {
    let s = TestServer::start(b).await;
    behave(&s, "while :; do sleep 1; done\n");
    afk_repo(&s, "r").await;
    s.post("/api/v1/afk/pause", json!(null)).await.ok();
    s.patch(
        "/api/v1/settings",
        json!({"afk": {"memory_per_run_mb": 1_048_576}}),
    )
    .await
    .ok();
    issue(&s, "r", "Needs memory").await;
    s.post("/api/v1/afk/resume", json!(null)).await.ok();
    s.scheduler().tick().await;
    let st = s.get("/api/v1/afk/status").await.ok();
    let why = st["admission"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("waiting for memory: ")
            && why.ends_with("an AFK run needs 1048576 MiB (afk.memory_per_run_mb)"),
        "{st}"
    );
    assert_eq!(st["limits"]["memory_per_run_mb"], 1_048_576);
    assert_eq!(s.get("/api/v1/runs?kind=afk").await.ok(), json!([]));
    s.patch("/api/v1/settings", json!({"afk": {"memory_per_run_mb": 0}}))
        .await
        .ok();
    s.scheduler().tick().await;
    let runs = s.get("/api/v1/runs?kind=afk").await.ok();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    assert!(s.get("/api/v1/afk/status").await.ok()["admission"].is_null());
    s.stop().await;
}

/// A usage limit on a run's screen makes that run wait until its reset;
/// then lab types `continue` into the same session, which goes on. One
/// run's screen is its agent's word: the provider is not held back for it,
/// and a second ready issue starts at once.
async fn a_usage_limit_pauses_its_run_until_its_reset(b: Backend) {
    let s = TestServer::start(b).await;
    behave(
        &s,
        "if [ \"$LAB_ISSUE\" != 1 ]; then sleep 30; exit 0; fi\n\
         echo 'working on it'\n\
         echo \"You've hit your session limit · resets in 4 seconds\"\n\
         read line\nprintf '%s\\n' \"$line\" > \"$FAKE_REC/../after-limit.txt\"\n\
         printf '\\033[2J\\033[Hback at work\\n'\n\
         echo done > D.md && git add D.md && git -c user.name=a -c user.email=a@example.com commit -qm done\n\
         labctl pr create --title 'Done' --body 'after the limit' || exit 7\n",
    );
    afk_repo(&s, "r").await;
    s.patch("/api/v1/repos/r", json!({"afk_max_concurrent": 2}))
        .await
        .ok();
    let n = issue(&s, "r", "Limited").await;
    wait::until(
        "the run to wait",
        wait::secs(30).every_ms(100),
        async || {
            let runs = s.get("/api/v1/runs?kind=afk").await.ok();
            runs.as_array()
                .unwrap()
                .iter()
                .find(|r| {
                    r["agent_state"]["reason"]
                        .as_str()
                        .is_some_and(|w| w.contains("usage limit"))
                })
                .cloned()
        },
    )
    .await;
    // The provider is not held: a second ready issue starts.
    issue(&s, "r", "Not held").await;
    wait::until("a second run", wait::secs(30).every_ms(100), async || {
        let runs = s.get("/api/v1/runs?kind=afk").await.ok();
        (runs.as_array().unwrap().len() == 2).then_some(())
    })
    .await;
    assert_eq!(s.get("/api/v1/afk/status").await.ok()["limited"], json!([]));
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    let typed = std::fs::read_to_string(s.tmp().join("records/after-limit.txt")).unwrap();
    assert_eq!(typed.trim(), "continue");
    s.stop().await;
}

/// The same limit seen by two runs of the provider is evidence no single
/// agent can forge: the provider is held back until the earlier reset, and
/// a third ready issue waits for it.
async fn two_runs_at_a_limit_hold_the_provider(b: Backend) {
    let s = TestServer::start(b).await;
    behave(
        &s,
        "echo \"You've hit your session limit · resets in 8 seconds\"\n\
         read line\n\
         sleep 60\n",
    );
    afk_repo(&s, "r").await;
    s.patch("/api/v1/settings", json!({"afk": {"max_concurrent": 3}}))
        .await
        .ok();
    s.patch("/api/v1/repos/r", json!({"afk_max_concurrent": 3}))
        .await
        .ok();
    issue(&s, "r", "One").await;
    issue(&s, "r", "Two").await;
    let st = wait::until(
        "claude-code limited",
        wait::secs(30).every_ms(100),
        async || {
            let st = s.get("/api/v1/afk/status").await.ok();
            if st["limited"].as_array().is_some_and(|l| !l.is_empty()) {
                Ok(st)
            } else {
                Err(st)
            }
        },
    )
    .await;
    let l = &st["limited"][0];
    assert_eq!(l["provider"], "claude-code", "{st}");
    assert_eq!(
        l["reason"], "You've hit your session limit · resets in 8 seconds",
        "{st}"
    );
    issue(&s, "r", "Three").await;
    s.scheduler().tick().await;
    assert_eq!(
        s.get("/api/v1/runs?kind=afk")
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        2,
        "a third run started while the provider was held"
    );
    s.stop().await;
}

/// A usage-limit line lab acted on is acted on once (issue 40 §4): still on
/// the screen after `continue`, it sets the run back to waiting neither at
/// the next looks nor after a restart of lab, and nothing more is typed.
async fn a_usage_limit_line_is_acted_on_once(b: Backend) {
    let s = TestServer::start(b).await;
    behave(
        &s,
        "echo \"You've hit your session limit · resets in 2 seconds\"\n\
         while read line; do printf '%s\\n' \"$line\" >> \"$FAKE_REC/../typed.txt\"; echo 'back at work'; done\n",
    );
    afk_repo(&s, "r").await;
    issue(&s, "r", "Limited once").await;
    let typed = s.tmp().join("records/typed.txt");
    wait::until("continue typed", wait::secs(30).every_ms(100), async || {
        std::fs::read_to_string(&typed)
            .ok()
            .filter(|t| t.contains("continue"))
    })
    .await;
    let run = s.get("/api/v1/runs?kind=afk").await.ok()[0].clone();
    let id = run["id"].as_i64().unwrap();
    let path = format!("/api/v1/runs/{id}");
    let not_waiting = async |s: &TestServer| {
        for _ in 0..2 {
            s.after_a_look(id).await;
            s.scheduler().tick().await;
        }
        let r = s.get(&path).await.ok();
        assert_eq!(r["state"], "running", "{r}");
        assert_ne!(r["agent_state"]["state"], "waiting", "{r}");
    };
    not_waiting(&s).await;
    // A restarted lab sees the same line on the same screen.
    let s = s.restart().await;
    not_waiting(&s).await;
    let screen = s.get(&format!("{path}/screen")).await.ok();
    assert!(
        screen["text"]
            .as_str()
            .unwrap()
            .contains("resets in 2 seconds"),
        "the old line is still on the screen: {screen}"
    );
    assert_eq!(std::fs::read_to_string(&typed).unwrap(), "continue\n");
    s.stop().await;
}

/// A work run that ends its turn without a pull request is reminded once;
/// a second such turn ends it `needs-human`, the slot freed long before its
/// time limit (issue 40 §2).
async fn a_turn_without_a_pull_request_is_nudged_once_then_ended(b: Backend) {
    let s = TestServer::start(b).await;
    behave(
        &s,
        &format!(
            "{STOP}\nstop\nread line\nprintf '%s\\n' \"$line\" > \"$FAKE_REC/../nudge.txt\"\n\
             stop\nwhile :; do sleep 1; done\n"
        ),
    );
    afk_repo(&s, "r").await;
    let n = issue(&s, "r", "Given up on").await;
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "needs-human", "{c}");
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(
            "It opened no pull request: its agent ended its turn twice without opening a pull \
             request (lab reminded it once); lab ended the run."
        ),
        "{c}"
    );
    let told = std::fs::read_to_string(s.tmp().join("records/nudge.txt")).unwrap();
    assert!(
        told.starts_with("lab: your turn ended without a pull request."),
        "{told}"
    );
    let run = s.get(&format!("/api/v1/runs/{}", c["run_id"])).await.ok();
    assert_eq!(run["stop_cause"], "no_pull_request", "{run}");
    assert_eq!(run["state"], "stopped", "{run}");
    // Not retried: a person looks.
    let i = s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok();
    assert_eq!(i["labels"], json!(["lab:needs-human"]), "{i}");
    s.stop().await;
}

on_both!(
    a_turn_without_a_pull_request_is_nudged_once_then_ended,
    a_usage_limit_line_is_acted_on_once,
    a_red_check_is_fixed_in_a_second_round,
    a_red_check_resumes_an_ended_session,
    rounds_stop_at_the_limit,
    a_token_budget_stops_a_run,
    memory_admission_holds_a_launch,
    a_usage_limit_pauses_its_run_until_its_reset,
    two_runs_at_a_limit_hold_the_provider,
);
