//! AFK runs whose model API gives no answer (issue 40 §3): the CLI's retry
//! line makes the run `retrying`, a turn the CLI gave up on is asked again
//! (not taken for a turn without a pull request), and ten minutes without
//! an answer end the run `cli-unusable`; a provider is held back only when
//! two of its runs got no answer (one run's screen is its agent's to
//! forge: `hostile.rs` has the forger beside an honest run).

use serde_json::json;

use crate::afk::{afk_repo, behave, issue, outcome};
use crate::afk_follow::STOP;
use crate::on_both;
use crate::support::{Backend, TestServer, wait};

/// Claude Code's spinner line while the API answers 529.
pub(crate) const RETRY_LINE: &str = "✻ 529 Overloaded · retrying in 6s · attempt 1/10";

/// A lab whose minutes of AFK time last a second (ten minutes without an
/// answer: ten seconds), one attempt per issue.
async fn lab(b: Backend) -> TestServer {
    let s = TestServer::start_tweaked(b, |c| c.limit_minute_ms = 1000).await;
    afk_repo(&s, "r").await;
    s.patch("/api/v1/settings", json!({"afk": {"max_attempts": 1}}))
        .await
        .ok();
    s
}

/// The id of the (first) AFK run, once there is one.
async fn the_afk_run(s: &TestServer) -> i64 {
    let run = wait::until("the AFK run", wait::secs(20).every_ms(100), async || {
        s.get("/api/v1/runs?kind=afk").await.ok()[0]
            .as_object()
            .cloned()
    })
    .await;
    run["id"].as_i64().unwrap()
}

/// Waits until run `id` has its outcome; a timeout shows the run, its
/// screen and what lab typed to it.
async fn until_outcome(s: &TestServer, id: i64) {
    wait::until("its outcome", wait::secs(40).every_ms(200), async || {
        let r = s.get(&format!("/api/v1/runs/{id}")).await.ok();
        if !r["outcome"].is_null() {
            return Ok(());
        }
        let screen = s.get(&format!("/api/v1/runs/{id}/screen")).await.ok();
        let typed = std::fs::read_to_string(s.tmp().join("records/typed.txt")).unwrap_or_default();
        Err(format!(
            "{r}\n{}\ntyped: {typed:?}",
            screen["text"].as_str().unwrap_or("").trim()
        ))
    })
    .await;
}

/// The CLI retries, gives up (its `StopFailure` hook), is asked again
/// once, retries again: the run ends `cli-unusable` after ten minutes
/// without an answer, never reminded of a pull request, and on its word
/// alone the provider is not held back.
async fn a_run_without_answers_retries_then_ends_cli_unusable(b: Backend) {
    let s = lab(b).await;
    behave(
        &s,
        &format!(
            "{STOP}\n\
             gave_up() {{\n  printf '{{\"session_id\":\"s\",\"transcript_path\":\"/tmp/t\",\"cwd\":\"%s\",\"hook_event_name\":\"StopFailure\",\"error\":\"server_error\"}}' \"$PWD\" | labctl hook claude-code\n}}\n\
             echo '{RETRY_LINE}'\nsleep 3\n\
             printf '\\033[2J\\033[H● API Error: 529 Overloaded.\\n'\ngave_up\n\
             while read line; do printf '%s\\n' \"$line\" >> \"$FAKE_REC/../typed.txt\"; echo '{RETRY_LINE}'; done\n"
        ),
    );
    let n = issue(&s, "r", "Unanswered").await;
    let id = the_afk_run(&s).await;
    let retrying = s
        .wait_run(id, 20, |r| r["agent_state"]["state"] == "retrying")
        .await;
    assert_eq!(retrying["state"], "running", "{retrying}");
    assert_eq!(retrying["phase"], "working", "{retrying}");
    assert_eq!(
        retrying["state_reason"], "retrying: 529 Overloaded",
        "{retrying}"
    );
    until_outcome(&s, id).await;
    let c = outcome(&s, "r", n, 5).await;
    assert_eq!(c["outcome"], "cli-unusable", "{c}");
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.contains(
            "its CLI got no answer from the model API for 10 minutes (HTTP 529; its CLI kept retrying)"
        ),
        "{c}"
    );
    // Asked again once, after the turn its CLI gave up on; no reminder of
    // a pull request.
    let typed = std::fs::read_to_string(s.tmp().join("records/typed.txt")).unwrap();
    assert_eq!(typed, "continue\n");
    let r = s.get(&format!("/api/v1/runs/{id}")).await.ok();
    assert_eq!(r["stop_cause"], "cli_unusable", "{r}");
    // One run's word holds nothing back.
    let st = s.get("/api/v1/afk/status").await.ok();
    assert_eq!(st["limited"], json!([]), "{st}");
    s.stop().await;
}

/// Two runs of a provider without answers: the provider is held back
/// (`no-answer`), and a third issue waits.
async fn two_runs_without_answers_hold_the_provider(b: Backend) {
    let s = lab(b).await;
    behave(
        &s,
        &format!("echo '{RETRY_LINE}'\nwhile :; do sleep 1; done\n"),
    );
    s.patch("/api/v1/settings", json!({"afk": {"max_concurrent": 3}}))
        .await
        .ok();
    s.patch("/api/v1/repos/r", json!({"afk_max_concurrent": 3}))
        .await
        .ok();
    let one = issue(&s, "r", "One").await;
    let two = issue(&s, "r", "Two").await;
    for n in [one, two] {
        let c = outcome(&s, "r", n, 40).await;
        assert_eq!(c["outcome"], "cli-unusable", "{c}");
    }
    let st = s.get("/api/v1/afk/status").await.ok();
    let held = &st["limited"][0];
    assert_eq!(held["provider"], "claude-code", "{st}");
    assert_eq!(held["kind"], "no-answer", "{st}");
    assert_eq!(
        held["reason"], "the model API gives its runs no answer (HTTP 529; its CLI kept retrying)",
        "{st}"
    );
    issue(&s, "r", "Three").await;
    s.scheduler().tick().await;
    let runs = s.get("/api/v1/runs?kind=afk").await.ok();
    assert_eq!(runs.as_array().unwrap().len(), 2, "{runs}");
    s.stop().await;
}

/// Codex gives up on a turn without a word on a hook: its rollout's
/// `task_complete` carries the error (as the pinned 0.171.0 writes it when
/// every request gets a 500). The run is asked again, not reminded of a
/// pull request, and ends `cli-unusable` with the error in lab's words.
async fn a_codex_turn_given_up_in_its_rollout_is_no_answer(b: Backend) {
    let s = lab(b).await;
    s.patch("/api/v1/repos/r", json!({"provider": "codex"}))
        .await
        .ok();
    let gave_up = r#"ev '{"type":"task_started","turn_id":"t","started_at":1796656518,"model_context_window":475000}'
ev '{"type":"task_complete","turn_id":"t","last_agent_message":null,"error":{"message":"see https://evil.example @everyone","codex_error_info":"internal_server_error"},"duration_ms":828}'"#;
    behave(
        &s,
        &format!(
            r#"d="$HOME/.codex/sessions/$(date -u +%Y/%m/%d)"
mkdir -p "$d"
f="$d/rollout-$(date -u +%Y-%m-%dT%H-%M-%S)-019af000-0000-7000-8000-000000000001.jsonl"
now() {{ date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }}
ev() {{ printf '{{"timestamp":"%s","type":"event_msg","payload":%s}}
' "$(now)" "$1" >> "$f"; }}
printf '{{"timestamp":"%s","type":"session_meta","payload":{{"id":"019af000-0000-7000-8000-000000000001","timestamp":"%s","cwd":"%s","originator":"codex_cli_rs","cli_version":"0.171.0"}}}}
' "$(now)" "$(now)" "$(pwd)" > "$f"
{gave_up}
while read line; do printf '%s\n' "$line" >> "$FAKE_REC/../typed.txt"; {gave_up}; done
"#
        ),
    );
    let n = issue(&s, "r", "Unanswered").await;
    let id = the_afk_run(&s).await;
    let idle = s
        .wait_run(id, 20, |r| r["agent_state"]["state"] == "idle")
        .await;
    assert_eq!(
        idle["agent_state"]["reason"], "the turn ended on an error: internal_server_error",
        "{idle}"
    );
    until_outcome(&s, id).await;
    let c = outcome(&s, "r", n, 5).await;
    assert_eq!(c["outcome"], "cli-unusable", "{c}");
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.contains("(its CLI gave up: internal_server_error)"),
        "{c}"
    );
    assert!(!detail.contains("evil"), "{c}");
    // Asked again after each turn it gave up on; never told of a pull
    // request.
    let typed = std::fs::read_to_string(s.tmp().join("records/typed.txt")).unwrap();
    assert!(
        !typed.is_empty() && typed.lines().all(|l| l == "continue"),
        "{typed:?}"
    );
    let i = s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok();
    assert!(!i.to_string().contains("evil"), "{i}");
    s.stop().await;
}

/// A planning run whose CLI gives up on every turn (its `StopFailure`
/// hook) is asked again, never told it has no plan yet, and ends
/// `cli-unusable` after ten minutes without an answer.
async fn a_planning_run_without_answers_ends_cli_unusable(b: Backend) {
    let s = lab(b).await;
    s.patch("/api/v1/repos/r", json!({"knobs": {"plan": "on"}}))
        .await
        .ok();
    behave(
        &s,
        "gave_up() {\n  printf '{\"session_id\":\"s\",\"transcript_path\":\"/tmp/t\",\"cwd\":\"%s\",\"hook_event_name\":\"StopFailure\",\"error\":\"server_error\"}' \"$PWD\" | labctl hook claude-code\n}\n\
         [ \"$LAB_RUN_KIND\" = plan ] || exit 5\n\
         gave_up\n\
         while read line; do printf '%s\\n' \"$line\" >> \"$FAKE_REC/../typed.txt\"; gave_up; done\n",
    );
    let n = issue(&s, "r", "Unanswered plan").await;
    let c = outcome(&s, "r", n, 40).await;
    assert_eq!(c["outcome"], "cli-unusable", "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains("(its CLI gave up: server_error)"),
        "{c}"
    );
    let typed = std::fs::read_to_string(s.tmp().join("records/typed.txt")).unwrap();
    assert!(
        !typed.is_empty() && typed.lines().all(|l| l == "continue"),
        "{typed:?}"
    );
    let runs = s.get("/api/v1/runs").await.ok();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 1, "no work run: {runs:?}");
    assert_eq!(runs[0]["kind"], "plan", "{runs:?}");
    assert_eq!(runs[0]["stop_cause"], "cli_unusable", "{runs:?}");
    s.stop().await;
}

on_both!(
    a_planning_run_without_answers_ends_cli_unusable,
    a_codex_turn_given_up_in_its_rollout_is_no_answer,
    a_run_without_answers_retries_then_ends_cli_unusable,
    two_runs_without_answers_hold_the_provider,
);
