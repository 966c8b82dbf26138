//! Things a run does once, however its callers behave: a start or a stop
//! whose client hangs up still finishes, and a run opens one pull request however
//! often, and however much at once, it asks.

use std::time::Duration;

use serde_json::{Value, json};

use crate::on_both;
use crate::support::{Backend, TestServer, id, wait};

/// The operator's client gives up while the stop waits out an agent that
/// ignores SIGTERM. The stop still finishes: the run is stopped, its
/// processes are gone, and it is not left "being stopped" for ever.
async fn a_stop_finishes_when_its_client_hangs_up(b: Backend) {
    // Unsandboxed: in a sandbox, the agent's process namespace ends with
    // its first process, so no stop waits out a deaf process there.
    let s = TestServer::start_unsandboxed(b).await;
    s.add_repo("r").await;
    // The agent may write only its records (and its workspace).
    let ready = s.tmp().join("records/deaf.ready");
    let script = s.tmp().join("deaf.sh");
    std::fs::write(
        &script,
        "trap '' TERM HUP\necho $$ > \"$FAKE_REC/../deaf.ready\"\nwhile :; do sleep 1; done\n",
    )
    .unwrap();
    let run = s
        .start_run("r", &format!("FAKE_RUN={}", script.display()))
        .await;
    let inner: i64 = wait::until("the deaf agent's pid", wait::secs(60), async || {
        std::fs::read_to_string(&ready).ok()?.trim().parse().ok()
    })
    .await;
    let deaf = crate::support::agent::host_pid(run["pid"].as_i64().unwrap(), inner)
        .expect("the deaf process, seen from the host");
    let gave_up = s
        .req(
            reqwest::Method::POST,
            &format!("/api/v1/runs/{}/stop", id(&run)),
        )
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(
        gave_up.as_ref().is_err_and(reqwest::Error::is_timeout),
        "the stop should outlast the client's patience: {gave_up:?}"
    );
    let stopped = s.wait_run(id(&run), 15, |r| r["state"] != "running").await;
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    assert!(
        !crate::support::agent::pid_alive(deaf),
        "the process that ignored SIGTERM survived"
    );
    s.stop().await;
}

/// A server whose every launch takes a while (1.5 s once its run is
/// recorded): lab runs no hook of the repo's, so the pause is lab's own.
async fn slow_launches(b: Backend) -> TestServer {
    TestServer::start_tweaked(b, |c| c.launch_pause_ms = 1500).await
}

/// Sends `path` a POST and gives up after 300 ms, well inside a slow launch.
async fn hang_up(s: &TestServer, path: &str, body: Value) {
    let gave_up = s
        .req(reqwest::Method::POST, path)
        .json(&body)
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(
        gave_up.as_ref().is_err_and(reqwest::Error::is_timeout),
        "{path} should outlast the client's patience: {gave_up:?}"
    );
}

/// The operator's client gives up while a manual run is being set up: the
/// run still starts, it is not failed half-made.
async fn a_start_finishes_when_its_client_hangs_up(b: Backend) {
    let s = slow_launches(b).await;
    s.add_repo("r").await;
    hang_up(&s, "/api/v1/runs", json!({"repo": "r", "prompt": "stay"})).await;
    let id = wait::until("the run recorded", wait::secs(60), async || {
        let runs = s.get("/api/v1/runs").await.ok();
        runs.as_array().unwrap().first().map(id)
    })
    .await;
    let run = s.wait_run(id, 15, |r| r["state"] != "starting").await;
    assert_eq!(run["state"], "running", "{run}");
    s.record(id, "child").await;
    s.stop().await;
}

/// The operator's `afk start` gives up between the claim and its run: the
/// claim still names the run that works on the issue, so the issue is
/// neither blocked for nothing nor given to a second run later.
async fn an_afk_start_whose_client_hangs_up_still_names_its_run(b: Backend) {
    let s = slow_launches(b).await;
    std::fs::write(s.tmp().join("afk.sh"), "while :; do sleep 1; done\n").unwrap();
    s.add_repo("r").await;
    s.post(
        "/api/v1/repos/r/issues",
        json!({"title": "Now", "body": "", "labels": ["ready-for-agent"]}),
    )
    .await
    .expect(201);
    hang_up(&s, "/api/v1/repos/r/afk/start", json!(null)).await;
    let named = "the claim to name its run";
    let claim = wait::until(named, wait::secs(15).every_ms(100), async || {
        let st = s.get("/api/v1/afk/status").await.ok();
        let first = st["recent"].as_array().unwrap().first();
        first.filter(|c| !c["run_id"].is_null()).cloned().ok_or(st)
    })
    .await;
    assert_eq!(claim["active"], true, "{claim}");
    let run = s
        .wait_run(claim["run_id"].as_i64().unwrap(), 15, |r| {
            r["state"] != "starting"
        })
        .await;
    assert_eq!(run["state"], "running", "{run}");
    assert_eq!(run["kind"], "afk", "{run}");
    s.stop().await;
}

/// Eight requests for one run's pull request at the same moment: one opens
/// it, the other seven are told the run is already opening one or has one.
async fn pull_requests_asked_at_once_open_one(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.working_run("r").await;
    crate::support::git::commit_in_run(&run);
    let path = format!("/api/v1/runs/{}/pull", id(&run));
    let ask = |n: usize| {
        s.send(
            s.req(reqwest::Method::POST, &path)
                .json(&json!({"title": format!("Try {n}"), "body": ""})),
        )
    };
    let answers = futures_util::future::join_all((0..8).map(ask)).await;
    let created: Vec<&Value> = answers
        .iter()
        .filter(|r| r.status == 201)
        .map(|r| &r.body)
        .collect();
    assert_eq!(created.len(), 1, "{answers:?}");
    for r in answers.iter().filter(|r| r.status != 201) {
        assert_eq!(r.status, 409, "{r:?}");
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("pull request"),
            "{r:?}"
        );
    }
    let pulls = s.get("/api/v1/repos/r/pulls").await.ok();
    assert_eq!(pulls.as_array().unwrap().len(), 1, "{pulls}");
    assert_eq!(pulls[0]["url"], created[0]["url"]);
    s.stop().await;
}

/// A manual run opens one pull request: asking again is a conflict that
/// names the first, and records nothing.
async fn a_manual_run_opens_one_pull_request(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.working_run("r").await;
    crate::support::git::commit_in_run(&run);
    let path = format!("/api/v1/runs/{}/pull", id(&run));
    let pr = s
        .post(&path, json!({"title": "One", "body": "the first"}))
        .await
        .expect(201);
    assert_eq!(pr["head"], run["branch"], "{pr}");
    let e = s
        .post(&path, json!({"title": "Two", "body": "the second"}))
        .await
        .expect(409);
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("already opened") && msg.contains(pr["url"].as_str().unwrap()),
        "{e}"
    );
    let pulls = s.get("/api/v1/repos/r/pulls").await.ok();
    assert_eq!(pulls.as_array().unwrap().len(), 1, "{pulls}");
    s.stop().await;
}

on_both!(
    a_stop_finishes_when_its_client_hangs_up,
    a_start_finishes_when_its_client_hangs_up,
    an_afk_start_whose_client_hangs_up_still_names_its_run,
    pull_requests_asked_at_once_open_one,
    a_manual_run_opens_one_pull_request,
);
