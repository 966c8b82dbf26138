//! A real `lab serve` killed with -9 in the middle of an AFK launch, then
//! started again: the claim names the run it had started, so the issue is
//! accounted for (the run failed, the issue told) instead of sitting on a
//! claim that names no run, to be given to a second run later.

use serde_json::{Value, json};

use crate::on_both;
use crate::support::api::Api;
use crate::support::process::LabHome;
use crate::support::{Backend, git, wait};

/// Reads `path` until `pred` holds (at most 20 s).
async fn wait_for(api: &Api, path: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    wait::until(what, wait::secs(20).every_ms(100), async || {
        let v = api.get(path).await.ok();
        if pred(&v) { Ok(v) } else { Err(v) }
    })
    .await
}

async fn a_crash_mid_launch_leaves_the_claim_naming_its_run(b: Backend) {
    let home = LabHome::new(&b).await;
    // Every launch pauses 5 s once its run is recorded (lab runs no hook of
    // the repo's that could make it slow).
    let mut lab = home.start(&[("LAB_LAUNCH_PAUSE_MS", "5000")]).await;
    let path = git::init_repo(home.tmp.path(), "r");
    lab.post("/api/v1/repos", json!({"name": "r", "path": path}))
        .await
        .ok();
    lab.post(
        "/api/v1/repos/r/issues",
        json!({"title": "Crash", "labels": ["ready-for-agent"]}),
    )
    .await
    .ok();
    let start = lab
        .req(reqwest::Method::POST, "/api/v1/repos/r/afk/start")
        .send();
    let start = tokio::spawn(start);
    let run = wait_for(&lab, "/api/v1/runs?kind=afk", "an AFK run recorded", |v| {
        !v.as_array().unwrap().is_empty()
    })
    .await[0]
        .clone();
    assert_eq!(run["state"], "starting", "{run}");
    // The claim names its run (written right after the run, before the
    // launch's pause): lab dies in the pause.
    wait_for(
        &lab,
        "/api/v1/afk/status",
        "the claim naming its run",
        |v| v["recent"][0]["run_id"] == run["id"],
    )
    .await;
    lab.kill9();
    let _ = start.await;

    let lab = home.start(&[]).await;
    let status = lab.get("/api/v1/afk/status").await.ok();
    let claim = &status["recent"][0];
    assert_eq!(claim["issue"], 1, "{status}");
    assert_eq!(
        claim["run_id"], run["id"],
        "the claim names its run: {status}"
    );
    // The run never started: reconcile fails it, and the issue is told.
    let failed = lab
        .wait_run(run["id"].as_i64().unwrap(), 10, |r| r["state"] == "failed")
        .await;
    assert!(failed["pid"].is_null(), "{failed}");
    let status = wait_for(&lab, "/api/v1/afk/status", "the claim's outcome", |v| {
        // The live count and the claims are two reads of one answer: wait
        // for both to have seen the outcome.
        !v["recent"][0]["outcome"].is_null() && v["live"] == 0
    })
    .await;
    assert_eq!(status["recent"][0]["outcome"], "failed", "{status}");
    assert_eq!(status["live"], 0, "{status}");
    let runs = lab.get("/api/v1/runs?kind=afk").await.ok();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    drop(lab);
}

on_both!(a_crash_mid_launch_leaves_the_claim_naming_its_run);
