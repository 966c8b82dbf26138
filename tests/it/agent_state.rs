//! A run's agent state from its CLI's own hooks (ADR 13): the fake agent
//! runs the hooks lab put on its command line, with payloads in the CLIs'
//! formats, and `GET /runs/{id}` shows each state.

use serde_json::{Value, json};

use crate::on_both;
use crate::support::{Backend, TestServer, id};

/// Lets the fake agent of run `id` go on to its next step (`go-ask`,
/// `go-stop`), and waits until it has run that step's hooks.
async fn step(s: &TestServer, run: i64, go: &str, done: &str) {
    let rec = s.tmp().join("records").join(run.to_string());
    std::fs::write(rec.join(go), b"").unwrap();
    s.record(run, done).await;
}

fn agent(r: &Value) -> &Value {
    &r["agent_state"]
}

/// Claude Code's hooks: working (a prompt was submitted) → waiting, with
/// the question's text → working (the tool ran) → idle (the turn ended);
/// the run's own state follows, and `since` moves with each change.
async fn claude_hooks_drive_the_agent_state(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.start_run("r", "FAKE_HOOKS").await;
    let n = id(&run);
    s.record(n, "hooked-working").await;
    let working = s.get(&format!("/api/v1/runs/{n}")).await.ok();
    assert_eq!(agent(&working)["state"], "working", "{working}");
    assert!(agent(&working)["reason"].is_null(), "{working}");
    assert_eq!(working["state"], "running");

    step(&s, n, "go-ask", "hooked-waiting").await;
    let waiting = s.get(&format!("/api/v1/runs/{n}")).await.ok();
    assert_eq!(agent(&waiting)["state"], "waiting", "{waiting}");
    assert_eq!(
        agent(&waiting)["reason"],
        "Claude needs your permission to use Bash"
    );
    assert_eq!(waiting["state"], "waiting");
    assert_eq!(
        waiting["state_reason"],
        "Claude needs your permission to use Bash"
    );
    let since = |r: &Value| humantime::parse_rfc3339(agent(r)["since"].as_str().unwrap()).unwrap();
    assert!(since(&waiting) >= since(&working));
    // `labctl ps` shows it (the run's state, then its agent's), with the
    // question.
    let table = crate::labctl::ok(&crate::labctl::labctl(&s, &["ps"]));
    assert!(
        table.contains("AGENT")
            && table.lines().any(|l| l.matches("waiting").count() == 2
                && l.contains("Claude needs your permission to use Bash")),
        "{table}"
    );
    // So does the run's page.
    let cookie = crate::pages_input::session(&s).await;
    let page = crate::pages_input::visit(&s, &cookie, reqwest::Method::GET, &format!("/runs/{n}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(r#"<dd id="agent"><strong>waiting</strong>"#)
            && page.contains("Claude needs your permission to use Bash"),
        "{page}"
    );
    // The screen check, made to read the screen, sees no question on the
    // fake agent's screen, and leaves the hook's wait alone.
    s.after_a_look(n).await;
    let still = s.get(&format!("/api/v1/runs/{n}")).await.ok();
    assert_eq!(agent(&still), agent(&waiting), "{still}");

    step(&s, n, "go-stop", "hooked-idle").await;
    let idle = s.get(&format!("/api/v1/runs/{n}")).await.ok();
    assert_eq!(agent(&idle)["state"], "idle", "{idle}");
    assert!(agent(&idle)["reason"].is_null());
    assert_eq!(idle["state"], "running");
    assert!(idle["state_reason"].is_null());
    assert!(since(&idle) >= since(&waiting));
    let listed = s.get("/api/v1/runs").await.ok();
    assert_eq!(listed[0]["agent_state"], idle["agent_state"]);
    // An ended run's agent does nothing.
    let stopped = s
        .post(&format!("/api/v1/runs/{n}/stop"), json!({}))
        .await
        .ok();
    assert_eq!(stopped["state"], "stopped");
    assert!(stopped["agent_state"].is_null(), "{stopped}");
    s.stop().await;
}

/// Claude Code's `PermissionRequest` alone makes the agent wait (its
/// permission `Notification` comes seconds later, or not at all); a `Stop`
/// whose `background_tasks` still run leaves it working.
async fn a_permission_request_waits_and_background_work_is_no_idle(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.start_run("r", "FAKE_HOOKS").await;
    let n = id(&run);
    s.record(n, "hooked-working").await;
    let rec = s.tmp().join("records").join(n.to_string());
    std::fs::write(rec.join("no-notify"), b"").unwrap();
    std::fs::write(rec.join("background"), b"").unwrap();
    step(&s, n, "go-ask", "hooked-waiting").await;
    let waiting = s.get(&format!("/api/v1/runs/{n}")).await.ok();
    assert_eq!(agent(&waiting)["state"], "waiting", "{waiting}");
    assert_eq!(
        agent(&waiting)["reason"],
        "Claude needs your permission to use Bash"
    );
    step(&s, n, "go-stop", "hooked-idle").await;
    let after = s.get(&format!("/api/v1/runs/{n}")).await.ok();
    assert_eq!(agent(&after)["state"], "working", "{after}");
    assert_eq!(after["state"], "running");
    s.stop().await;
}

/// A slash command typed into a waiting run (`/help`) is the CLI's own: it
/// starts no turn, so the run stays waiting; a prompt makes it working.
async fn a_slash_command_is_no_prompt(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.start_run("r", "FAKE_HOOKS").await;
    let n = id(&run);
    s.record(n, "hooked-working").await;
    step(&s, n, "go-ask", "hooked-waiting").await;
    let path = format!("/api/v1/runs/{n}/input");
    let input = |text: &'static str| s.post(&path, json!({"text": text, "keys": ["Enter"]}));
    input("/help").await.ok();
    let after = s.get(&format!("/api/v1/runs/{n}")).await.ok();
    assert_eq!(agent(&after)["state"], "waiting", "{after}");
    input("yes, go on").await.ok();
    let after = s.get(&format!("/api/v1/runs/{n}")).await.ok();
    assert_eq!(agent(&after)["state"], "working", "{after}");
    s.stop().await;
}

/// Codex's `notify` program: the turn's end makes a working run idle.
async fn codex_notify_makes_the_agent_idle(b: Backend) {
    let s = TestServer::start(b).await;
    let repo = s.add_repo("r").await;
    s.patch(
        &format!("/api/v1/repos/{}", repo["id"]),
        json!({"provider": "codex"}),
    )
    .await
    .ok();
    let run = s.start_run("r", "FAKE_HOOKS").await;
    let n = id(&run);
    let argv = crate::support::agent::argv(&s.record(n, "argv").await);
    assert!(
        argv.iter()
            .any(|a| a.starts_with(b"notify=[") && a.ends_with(b"\"hook\",\"codex\"]")),
        "{argv:?}"
    );
    s.record(n, "hooked-working").await;
    let working = s.get(&format!("/api/v1/runs/{n}")).await.ok();
    assert_eq!(agent(&working)["state"], "working", "{working}");
    step(&s, n, "go-ask", "hooked-waiting").await;
    step(&s, n, "go-stop", "hooked-idle").await;
    let idle = s.get(&format!("/api/v1/runs/{n}")).await.ok();
    assert_eq!(agent(&idle)["state"], "idle", "{idle}");
    s.stop().await;
}

/// A fake Codex (`FAKE_RUN`) that writes its rollout under
/// `$HOME/.codex/sessions/YYYY/MM/DD/` in the 0.171.0 shapes (see
/// `tests/fixtures/codex-0.171.0-turns.jsonl`), each line stamped with the
/// time it is written: a turn starts, then each step waits for its go file
/// in the run's record folder (`go-complete`, `go-start`, `go-abort`). It
/// runs no notify hook, so every state here is the rollout's.
fn codex_turns_script(s: &TestServer, sid: &str) -> std::path::PathBuf {
    let script = s.tmp().join(format!("codex-turns-{sid}.sh"));
    let body = r#"d="$HOME/.codex/sessions/$(date -u +%Y/%m/%d)"
mkdir -p "$d"
f="$d/rollout-$(date -u +%Y-%m-%dT%H-%M-%S)-SID.jsonl"
now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
ev() { printf '{"timestamp":"%s","type":"event_msg","payload":%s}\n' "$(now)" "$1" >> "$f"; }
await() { while [ ! -e "$FAKE_REC/$1" ]; do sleep 0.05; done; }
printf '{"timestamp":"%s","type":"session_meta","payload":{"id":"SID","timestamp":"%s","cwd":"%s","originator":"codex_cli_rs","cli_version":"0.171.0","source":"cli"}}\n' "$(now)" "$(now)" "$(pwd)" > "$f"
ev '{"type":"task_started","turn_id":"t1","started_at":1796122800,"model_context_window":475000,"collaboration_mode_kind":"default"}'
echo x > "$FAKE_REC/rolled-1"
await go-complete
ev '{"type":"agent_message","message":"Done.","phase":"final_answer"}'
ev '{"type":"task_complete","turn_id":"t1","last_agent_message":"Done.","completed_at":1796122809,"duration_ms":9400}'
await go-start
ev '{"type":"task_started","turn_id":"t2","started_at":1796122890,"model_context_window":475000,"collaboration_mode_kind":"default"}'
ev '{"type":"user_message","message":"now run all the tests","images":[],"local_images":[],"text_elements":[]}'
await go-abort
ev '{"type":"turn_aborted","turn_id":"t2","reason":"interrupted","completed_at":1796122920,"duration_ms":30250}'
while :; do sleep 1; done
"#;
    std::fs::write(&script, body.replace("SID", sid)).unwrap();
    script
}

/// Waits until run `n`'s agent is `state` (with `reason`), and returns the
/// run.
async fn agent_becomes(s: &TestServer, n: i64, state: &str, reason: Option<&str>) -> Value {
    let what = format!("run {n}'s agent to be {state}");
    crate::support::wait::until(what, crate::support::wait::secs(15), async || {
        let r = s.get(&format!("/api/v1/runs/{n}")).await.ok();
        let a = agent(&r);
        if a["state"] == state && a["reason"].as_str() == reason {
            Ok(r)
        } else {
            Err(r["agent_state"].to_string())
        }
    })
    .await
}

/// Codex's rollout: the turn's end makes the run idle, a new turn (typed
/// into Codex itself, not through lab) working, an interruption idle with
/// why; no hook runs, so each state is read from the rollout file.
async fn codex_rollout_drives_the_agent_state(b: Backend) {
    let s = TestServer::start(b).await;
    crate::usage::codex_repo(&s, "c").await;
    let sid = "01a23190-0000-7000-8000-00000000c0de";
    let script = codex_turns_script(&s, sid);
    let run = s
        .start_run("c", &format!("FAKE_RUN={}", script.display()))
        .await;
    let n = id(&run);
    s.record(n, "rolled-1").await;
    let working = agent_becomes(&s, n, "working", None).await;
    let rec = s.tmp().join("records").join(n.to_string());
    let go = |step: &str| std::fs::write(rec.join(step), b"").unwrap();

    go("go-complete");
    let idle = agent_becomes(&s, n, "idle", None).await;
    assert_eq!(idle["state"], "running");
    assert_eq!(idle["cli_session_id"], sid);
    let since = |r: &Value| humantime::parse_rfc3339(agent(r)["since"].as_str().unwrap()).unwrap();
    assert!(since(&idle) >= since(&working));

    go("go-start");
    let again = agent_becomes(&s, n, "working", None).await;
    assert!(since(&again) >= since(&idle));

    go("go-abort");
    let aborted = agent_becomes(&s, n, "idle", Some("the turn was interrupted")).await;
    assert_eq!(aborted["state"], "running");
    assert!(aborted["state_reason"].is_null(), "{aborted}");
    // Nothing new in the rollout: the state stays (the screen check, made
    // to read the screen, sees no question and leaves it alone).
    s.after_a_look(n).await;
    let still = s.get(&format!("/api/v1/runs/{n}")).await.ok();
    assert_eq!(agent(&still), agent(&aborted), "{still}");
    s.stop().await;
}

/// Only a run's own token posts its hooks: another run's is a 403; a body
/// that is not the documented shape is a 400 that changes nothing; an
/// event lab does not know is accepted and ignored.
async fn hooks_are_the_run_s_own_and_checked(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let (a, other) = (id(&s.working_run("r").await), id(&s.working_run("r").await));
    let token = s.run_token(a).await;
    let before = s.get(&format!("/api/v1/runs/{other}")).await.ok();
    let own = crate::support::api::Api::new(s.url.clone(), token);
    let notification = json!({"payload": {"hook_event_name": "Notification",
        "message": "Allow?", "notification_type": "permission_prompt"}});
    let refused = own
        .post(&format!("/api/v1/runs/{other}/hook"), notification.clone())
        .await
        .expect(403);
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("report its agent's state")
    );
    let after = s.get(&format!("/api/v1/runs/{other}")).await.ok();
    assert_eq!(after["agent_state"], before["agent_state"]);
    assert_eq!(after["state"], "running");

    let path = format!("/api/v1/runs/{a}/hook");
    let mine = s.get(&format!("/api/v1/runs/{a}")).await.ok();
    let garbage = own
        .send(
            own.req(reqwest::Method::POST, &path)
                .header("content-type", "application/json")
                .body("{not json"),
        )
        .await
        .expect(400);
    assert!(garbage["error"]["message"].is_string(), "{garbage}");
    for bad in [
        json!({"payload": "Stop"}),
        json!({"payload": [1]}),
        json!({"event": {}}),
        json!({"payload": {}, "extra": 1}),
    ] {
        let e = own.post(&path, bad.clone()).await.expect(400);
        assert!(e["error"]["message"].is_string(), "{bad}: {e}");
    }
    let ignored = own
        .post(
            &path,
            json!({"payload": {"hook_event_name": "SomethingNew"}}),
        )
        .await
        .ok();
    assert_eq!(ignored["applied"], false);
    assert_eq!(
        s.get(&format!("/api/v1/runs/{a}")).await.ok()["agent_state"],
        mine["agent_state"],
        "nothing changed"
    );

    let applied = own.post(&path, notification).await.ok();
    assert_eq!(applied["applied"], true);
    assert_eq!(applied["agent_state"]["state"], "waiting");
    assert_eq!(applied["agent_state"]["reason"], "Allow?");
    s.stop().await;
}

on_both!(
    a_slash_command_is_no_prompt,
    claude_hooks_drive_the_agent_state,
    a_permission_request_waits_and_background_work_is_no_idle,
    codex_notify_makes_the_agent_idle,
    codex_rollout_drives_the_agent_state,
    hooks_are_the_run_s_own_and_checked,
);
