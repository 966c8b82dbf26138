//! Lost runs come back (issue 14 §3, ADR 18): a killed tmux server leaves
//! `lost` runs (not failed) that resume the same CLI session in the same
//! workspace, through the API, labctl, the run page, and by themselves for
//! AFK runs (once).

use std::path::Path;

use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION};
use serde_json::{Value, json};

use crate::labctl::{labctl, ok};
use crate::on_both;
use crate::pages_input::{client, csrf_of, session, visit};
use crate::support::agent::{self, pid_alive};
use crate::support::{Backend, TestServer, id, wait};

/// Kills the test server's tmux server, as a crash or a reboot would.
fn kill_tmux_server(s: &TestServer) {
    agent::tmux(s.runner().tmux().socket(), &["kill-server"]);
}

/// The names of the runs' sessions on the test server's tmux server (none
/// when it is not running; the relay's is not a run's).
fn sessions(s: &TestServer) -> String {
    let out = std::process::Command::new("tmux")
        .arg("-S")
        .arg(s.runner().tmux().socket())
        .args(["list-sessions", "-F", "#{session_name}"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| *l != lab::run::relay::SESSION)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The fake agent's argv of run `id`, as strings.
async fn argv(s: &TestServer, id: i64) -> Vec<String> {
    agent::argv(&s.record(id, "argv").await)
        .into_iter()
        .map(|a| String::from_utf8(a).unwrap())
        .collect()
}

/// Forgets what the fake agent of run `id` recorded, so that the next
/// record is its next life's.
fn forget_records(s: &TestServer, id: i64) {
    let _ = std::fs::remove_dir_all(s.tmp().join("records").join(id.to_string()));
}

/// A working manual run, then its tmux server killed: the run is lost.
async fn lost_run(s: &TestServer) -> Value {
    let run = s.working_run("r").await;
    kill_tmux_server(s);
    s.wait_state(id(&run), "lost").await
}

fn error_of(v: &Value) -> String {
    v["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn a_killed_tmux_server_leaves_lost_runs_that_resume(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.working_run("r").await;
    let run_id = id(&run);
    let agent_pid = s.recorded_pid(run_id, "pid").await;
    let session_id = run["cli_session_id"].as_str().unwrap().to_owned();
    let cwd = s.record(run_id, "cwd").await;
    assert!(argv(&s, run_id).await.contains(&"--session-id".to_owned()));

    kill_tmux_server(&s);
    let lost = s.wait_state(run_id, "lost").await;
    assert!(
        lost["state_reason"].as_str().unwrap().contains("vanished"),
        "{lost}"
    );
    assert!(
        lost["ended_at"].is_null(),
        "a lost run has not ended: {lost}"
    );
    wait::until("the lost agent to end", wait::secs(5), async || {
        !pid_alive(agent_pid)
    })
    .await;
    // The list filter takes the new state; `lost` is in the API's enum.
    let listed = s.get("/api/v1/runs?state=lost").await.ok();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["id"], run_id);
    let doc = s.get("/api/v1/openapi.json").await.ok();
    assert!(
        doc["components"]["schemas"]["RunState"]["enum"]
            .as_array()
            .unwrap()
            .contains(&json!("lost")),
        "{}",
        doc["components"]["schemas"]["RunState"]
    );

    // Two resumes at once: one wins, the other is told why not.
    forget_records(&s, run_id);
    let path = format!("/api/v1/runs/{run_id}/resume");
    let (a, b2) = tokio::join!(s.post(&path, json!(null)), s.post(&path, json!(null)));
    let mut statuses = [a.status.as_u16(), b2.status.as_u16()];
    statuses.sort();
    assert_eq!(statuses, [200, 409], "{:?} {:?}", a.body, b2.body);
    let (won, refused) = if a.status == 200 { (a, b2) } else { (b2, a) };
    assert_eq!(won.body["state"], "running", "{}", won.body);
    assert_eq!(won.body["id"], run_id);
    assert_eq!(won.body["session"], run["session"], "the same session name");
    assert_eq!(won.body["workspace"], run["workspace"]);
    let why = error_of(&refused.body);
    assert!(
        why.contains("only a lost run can be resumed") || why.contains("another resume"),
        "{why}"
    );

    // The CLI resumes the same session, in the same workspace, told to go on.
    let args = argv(&s, run_id).await;
    let at = args.iter().position(|a| a == "--resume").expect("--resume");
    assert_eq!(args[at + 1], session_id, "{args:?}");
    assert!(!args.contains(&"--session-id".to_owned()), "{args:?}");
    assert_eq!(args.last().unwrap(), lab::run::RESUME_PROMPT);
    assert_eq!(s.record(run_id, "cwd").await, cwd);
    assert_eq!(sessions(&s), run["session"].as_str().unwrap());
    // A fresh run token: the agent reaches its run with it.
    let token = s.run_token(run_id).await;
    let mine = crate::support::api::Api::new(s.url.clone(), token)
        .get(&format!("/api/v1/runs/{run_id}"))
        .await
        .ok();
    assert_eq!(mine["state"], "running");
    // The same log, appended to: both lives are in it.
    // (The agent records its argv before it prints.)
    let log_path = run["log_path"].as_str().unwrap().to_owned();
    let first_line = format!("fake-agent: run {run_id},");
    wait::until("both lives in the log", wait::secs(10), async || {
        let log = std::fs::read_to_string(&log_path).unwrap();
        if log.matches(&first_line).count() == 2 {
            Ok(())
        } else {
            Err(log)
        }
    })
    .await;

    assert_eq!(
        s.runner().store().resumes(run_id).await.unwrap(),
        1,
        "one resume won"
    );
    // A running run is not resumed again.
    let again = s.post(&path, json!(null)).await.expect(409);
    assert!(error_of(&again).contains("is running"), "{again}");
    let missing = s.post("/api/v1/runs/999999/resume", json!(null)).await;
    assert_eq!(missing.status, 404, "{:?}", missing.body);
    s.stop().await;
}

/// What cannot be resumed is refused with why, and nothing changes: a run
/// whose workspace is gone, one that ended on its own.
async fn a_run_that_cannot_be_resumed_says_why(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = lost_run(&s).await;
    let run_id = id(&run);
    std::fs::remove_dir_all(run["workspace"].as_str().unwrap()).unwrap();
    let path = format!("/api/v1/runs/{run_id}/resume");
    let refused = s.post(&path, json!(null)).await.expect(409);
    assert!(error_of(&refused).contains("workspace"), "{refused}");
    assert_eq!(
        s.wait_state(run_id, "lost").await["state_reason"],
        run["state_reason"]
    );
    assert_eq!(sessions(&s), "", "no session was started");

    let done = s.start_run("r", "FAKE_EXIT=0").await;
    s.wait_state(id(&done), "exited").await;
    let refused = s
        .post(&format!("/api/v1/runs/{}/resume", id(&done)), json!(null))
        .await
        .expect(409);
    assert!(
        error_of(&refused).contains("is exited (it ended)"),
        "{refused}"
    );
    s.stop().await;
}

/// An AFK run that is lost is resumed by lab once, with its issue; lost a
/// second time, it fails, and its claim with it.
async fn an_afk_run_lost_is_resumed_once(b: Backend) {
    let s = TestServer::start(b).await;
    crate::afk::behave(&s, "sleep 300\n");
    crate::afk::afk_repo(&s, "r").await;
    let n = crate::afk::issue(&s, "r", "Survive a reboot").await;
    let run_id = wait::until("the AFK run", wait::secs(30).every_ms(100), async || {
        let runs = s.get("/api/v1/runs?kind=afk&state=running").await.ok();
        runs.as_array().unwrap().first().map(id)
    })
    .await;
    s.record(run_id, "child").await;
    forget_records(&s, run_id);
    kill_tmux_server(&s);
    // Lost, then resumed by the scheduler: the agent starts again with the
    // resume flags and its issue.
    let args = argv(&s, run_id).await;
    assert!(args.contains(&"--resume".to_owned()), "{args:?}");
    let env = agent::env(&s.record(run_id, "env").await);
    assert!(
        env.iter()
            .any(|(k, v)| k == "LAB_ISSUE" && *v == n.to_string()),
        "{env:?}"
    );
    let again = s.wait_state(run_id, "running").await;
    assert_eq!(again["kind"], "afk");
    let status = s.get("/api/v1/afk/status").await.ok();
    assert!(
        status["recent"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["outcome"].is_null()),
        "the claim is still open: {status}"
    );

    s.record(run_id, "child").await;
    kill_tmux_server(&s);
    let c = crate::afk::outcome(&s, "r", n, 30).await;
    assert_eq!(c["outcome"], "failed", "{c}");
    let run = s.get(&format!("/api/v1/runs/{run_id}")).await.ok();
    assert_eq!(run["state"], "failed");
    assert!(
        run["state_reason"].as_str().unwrap().contains("lost again"),
        "{run}"
    );
    s.stop().await;
}

/// `labctl ps` lists lost runs; `labctl resume` brings one back, and says
/// why not for a run that is not lost.
async fn labctl_resumes_a_lost_run(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = lost_run(&s).await;
    let run_id = id(&run).to_string();
    let ps = ok(&labctl(&s, &["ps"]));
    assert!(
        ps.lines()
            .any(|l| l.contains(&run_id) && l.contains("lost")),
        "{ps}"
    );
    let out = ok(&labctl(&s, &["resume", &run_id]));
    assert_eq!(out.trim(), format!("run {run_id} running"));
    let refused = labctl(&s, &["resume", &run_id]);
    assert_eq!(refused.status.code(), Some(4), "a conflict");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("only a lost run can be resumed"), "{said}");
    s.stop().await;
}

/// The run page shows a Resume button for a lost run only; its form needs
/// the CSRF token, and resumes the run.
async fn the_run_page_resumes_a_lost_run(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = lost_run(&s).await;
    let run_id = id(&run);
    let cookie = session(&s).await;
    let page = visit(&s, &cookie, Method::GET, &format!("/runs/{run_id}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!("action=\"/runs/{run_id}/resume\"")),
        "{page}"
    );
    let csrf = csrf_of(&page);
    let post = async |body: String| {
        client()
            .post(format!("{}/runs/{run_id}/resume", s.url))
            .header(COOKIE, &cookie)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap()
    };
    let forged = post("csrf=guess".into()).await;
    assert_eq!(forged.status(), 403);
    assert_eq!(
        s.get(&format!("/api/v1/runs/{run_id}")).await.ok()["state"],
        "lost"
    );
    let r = post(format!("csrf={csrf}")).await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()[LOCATION], format!("/runs/{run_id}").as_str());
    assert_eq!(
        s.get(&format!("/api/v1/runs/{run_id}")).await.ok()["state"],
        "running"
    );
    let page = visit(&s, &cookie, Method::GET, &format!("/runs/{run_id}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        !page.contains("/resume\""),
        "no Resume button on a live run"
    );
    // Resuming it again from a stale page is refused, as a page.
    let r = post(format!("csrf={csrf}")).await;
    assert_eq!(r.status(), 409);
    s.stop().await;
}

/// lab restarts after its tmux server went (a machine restart): the start-up
/// pass finds the run lost, and it resumes.
async fn a_restart_without_tmux_finds_runs_lost(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.working_run("r").await;
    let run_id = id(&run);
    let s = s.restart_without_tmux().await;
    // The pass before lab serves has already judged it.
    let lost = s.get(&format!("/api/v1/runs/{run_id}")).await.ok();
    assert_eq!(lost["state"], "lost", "{lost}");
    assert!(
        lost["state_reason"]
            .as_str()
            .unwrap()
            .contains("was gone when lab started"),
        "{lost}"
    );
    assert!(Path::new(run["workspace"].as_str().unwrap()).is_dir());
    forget_records(&s, run_id);
    let back = s
        .post(&format!("/api/v1/runs/{run_id}/resume"), json!(null))
        .await
        .ok();
    assert_eq!(back["state"], "running");
    assert!(argv(&s, run_id).await.contains(&"--resume".to_owned()));
    s.stop().await;
}

/// A Codex run resumes the session of its rollout (`codex resume <options>
/// -- <id> <prompt>`); one whose rollout lab never found has no session id to
/// resume, and fails as before.
async fn codex_runs_resume_their_rollout_s_session(b: Backend) {
    let s = TestServer::start(b).await;
    crate::usage::codex_repo(&s, "c").await;
    let sid = "019ad5c2-7f3e-7a10-b6c4-5e2f9d8a1b38";
    let script = crate::usage::codex_rollout_script(&s, sid, None);
    let run = s
        .start_run("c", &format!("FAKE_RUN={}", script.display()))
        .await;
    let run_id = id(&run);
    s.wait_run(run_id, 20, |r| r["cli_session_id"] == sid).await;
    // A second run, whose agent writes no rollout.
    let bare = s.working_run("c").await;
    forget_records(&s, run_id);
    kill_tmux_server(&s);
    s.wait_state(run_id, "lost").await;
    let failed = s.wait_state(id(&bare), "failed").await;
    assert!(
        failed["state_reason"]
            .as_str()
            .unwrap()
            .contains("vanished"),
        "{failed}"
    );
    let back = s
        .post(&format!("/api/v1/runs/{run_id}/resume"), json!(null))
        .await
        .ok();
    assert_eq!(back["state"], "running", "{back}");
    let args = argv(&s, run_id).await;
    assert_eq!(args[0], "resume", "{args:?}");
    let dashes = args.iter().position(|a| a == "--").expect("--");
    assert_eq!(
        args[dashes + 1..],
        [sid.to_owned(), lab::run::RESUME_PROMPT.to_owned()],
        "{args:?}"
    );
    assert!(args.contains(&"-m".to_owned()), "the run's model: {args:?}");
    s.stop().await;
}

/// The store's transitions are conditional: a run is marked lost only from
/// the state reconcile saw, and resumed only from `lost`, once.
async fn lost_and_resume_are_conditional_updates(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.working_run("r").await;
    let run_id = id(&run);
    let store = &s.runner().store();
    use lab::domain::RunState;
    assert!(
        !store
            .begin_resume(run_id, "h1", lab::domain::RunState::Lost)
            .await
            .unwrap(),
        "not lost"
    );
    assert!(
        !store
            .mark_lost(run_id, RunState::Waiting, "x")
            .await
            .unwrap(),
        "not in the state seen"
    );
    assert_eq!(store.run(run_id).await.unwrap().state, RunState::Running);
    s.post(&format!("/api/v1/runs/{run_id}/stop"), json!(null))
        .await
        .ok();
    assert!(
        !store
            .mark_lost(run_id, RunState::Running, "x")
            .await
            .unwrap(),
        "an ended run is not lost"
    );
    assert_eq!(store.run(run_id).await.unwrap().state, RunState::Stopped);
    assert_eq!(store.resumes(run_id).await.unwrap(), 0);
    s.stop().await;
}

/// A lost run whose repo was removed from lab cannot be resumed.
async fn a_lost_run_of_a_removed_repo_is_not_resumed(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = lost_run(&s).await;
    s.delete("/api/v1/repos/r").await.expect(204);
    let refused = s
        .post(&format!("/api/v1/runs/{}/resume", id(&run)), json!(null))
        .await
        .expect(409);
    assert!(error_of(&refused).contains("repo was removed"), "{refused}");
    s.stop().await;
}

on_both!(
    a_killed_tmux_server_leaves_lost_runs_that_resume,
    a_run_that_cannot_be_resumed_says_why,
    an_afk_run_lost_is_resumed_once,
    labctl_resumes_a_lost_run,
    the_run_page_resumes_a_lost_run,
    a_restart_without_tmux_finds_runs_lost,
    codex_runs_resume_their_rollout_s_session,
    a_lost_run_of_a_removed_repo_is_not_resumed,
    lost_and_resume_are_conditional_updates,
);
