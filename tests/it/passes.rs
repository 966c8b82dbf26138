//! The reconcile loop's passes over live runs: what a pass costs in tmux
//! calls, quiet passes while nothing changes, and the screen check that
//! finds a waiting agent.

use serde_json::Value;
use sqlx::Connection;

use crate::on_both;
use crate::support::agent;
use crate::support::{Backend, TestServer, id, wait};

/// One pass costs the same number of tmux calls at 1, 50 and 200 live runs.
async fn reconcile_costs_a_constant_number_of_tmux_calls(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let mut live = 0;
    for target in [1, 50, 200] {
        let mut last = 0;
        while live < target {
            let r = s.start_run("r", "stay").await;
            assert_eq!(r["state"], "running", "{r}");
            last = id(&r);
            live += 1;
        }
        // The newest agent has printed all it prints at start.
        s.record(last, "child").await;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        // A pass after new output also reads the changed screens: one more
        // call, whatever their number.
        let first = s.runner().reconcile(false).await.unwrap();
        assert!(first.tmux_calls <= 2, "at {target} runs: {first:?}");
        let report = s.runner().reconcile(false).await.unwrap();
        assert_eq!(report.checked, target);
        assert_eq!(report.tmux_calls, 1, "at {target} runs: {report:?}");
        assert!(report.exited.is_empty() && report.lost.is_empty());
    }
    s.stop().await;
}

/// While nothing changes, the loop's passes are quiet (ADR 21): no tmux
/// client, no read of the runs. A session killed by hand is still seen at
/// the next pass, long before the next full one.
async fn passes_are_quiet_while_nothing_changes(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let mut runs = Vec::new();
    for _ in 0..3 {
        let r = s.start_run("r", "stay").await;
        s.record(id(&r), "child").await;
        runs.push(r);
    }
    // (A screen whose first lines came after the last full pass is read by
    // a quiet one: one tmux call, once.)
    let before = wait::until(
        "a quiet pass with no tmux call",
        wait::secs(10),
        async || {
            let st = s.get("/api/v1/status").await.ok();
            (st["last_pass"]["full"] == false && st["last_pass"]["tmux_calls"] == 0).then_some(st)
        },
    )
    .await;
    assert_eq!(before["last_pass"]["runs"], 3, "{before}");
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let after = s.get("/api/v1/status").await.ok();
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap();
    assert!(
        n(&after, "reconcile_passes") >= n(&before, "reconcile_passes") + 4,
        "the loop goes on: {before} → {after}"
    );
    // Not a list-panes a pass: at most one full pass in that second (and a
    // screen read, should a late line of an agent's come).
    assert!(
        n(&after, "tmux_calls") <= n(&before, "tmux_calls") + 2,
        "{before} → {after}"
    );

    // lab's server does not name windows after their processes (tmux would
    // look each busy pane's process up twice a second; ADR 16).
    let rename = agent::tmux(
        s.runner().tmux().socket(),
        &["show-options", "-gwv", "automatic-rename"],
    );
    assert_eq!(rename.trim(), "off");

    let killed = std::time::Instant::now();
    let session = format!("={}", runs[0]["session"].as_str().unwrap());
    agent::tmux(
        s.runner().tmux().socket(),
        &["kill-session", "-t", &session],
    );
    s.wait_state(id(&runs[0]), "lost").await;
    assert!(
        killed.elapsed() < std::time::Duration::from_secs(5),
        "seen by a quiet pass, not the next full one: {:?}",
        killed.elapsed()
    );
    for r in &runs[1..] {
        let now = s.get(&format!("/api/v1/runs/{}", id(r))).await.ok();
        assert_eq!(now["state"], "running", "{now}");
    }
    s.stop().await;
}

/// Every `FULL_EVERY` the loop reads the runs again, and lists the panes
/// only when the runs changed (or every `PANES_EVERY`): 11 s of a quiet run
/// start no tmux client, and a change written behind this process's back
/// (another node, or by hand) still brings a full pass within about 10 s.
async fn the_runs_are_read_again_and_the_panes_listed_only_on_a_change(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let r = s.start_run("r", "stay").await;
    let run = id(&r);
    s.record(run, "child").await;
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap();
    wait::until("a quiet pass", wait::secs(10), async || {
        let st = s.get("/api/v1/status").await.ok();
        (st["last_pass"]["full"] == false && st["last_pass"]["tmux_calls"] == 0).then_some(())
    })
    .await;
    // (A late line of the agent's is read by one more pass: let it come,
    // until a second goes by without a tmux client.)
    let mut before = s.get("/api/v1/status").await.ok();
    for _ in 0..10 {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let now = s.get("/api/v1/status").await.ok();
        let still = n(&now, "tmux_calls") == n(&before, "tmux_calls");
        before = now;
        if still {
            break;
        }
    }
    tokio::time::sleep(lab::run::FULL_EVERY + std::time::Duration::from_millis(1500)).await;
    let after = s.get("/api/v1/status").await.ok();
    assert_eq!(
        n(&after, "tmux_calls"),
        n(&before, "tmux_calls"),
        "no tmux client past FULL_EVERY with the runs unchanged: {before} → {after}"
    );
    assert!(n(&after, "reconcile_passes") > n(&before, "reconcile_passes") + 50);

    // Another writer changes the run.
    let sql = "UPDATE runs SET state_reason = 'changed elsewhere' WHERE id = $1";
    match &s.database_url {
        Some(url) => {
            let mut c = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::query(sql).bind(run).execute(&mut c).await.unwrap();
        }
        None => {
            let file = s.data_dir().join("lab.db");
            let url = format!("sqlite://{}", file.display());
            let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::query(sql).bind(run).execute(&mut c).await.unwrap();
        }
    }
    let changed = std::time::Instant::now();
    wait::until("a full pass after the change", wait::secs(15), async || {
        let st = s.get("/api/v1/status").await.ok();
        (n(&st, "tmux_calls") > n(&after, "tmux_calls")).then_some(())
    })
    .await;
    assert!(
        changed.elapsed() <= lab::run::FULL_EVERY + std::time::Duration::from_secs(2),
        "{:?}",
        changed.elapsed()
    );
    let now = s.get(&format!("/api/v1/runs/{run}")).await.ok();
    assert_eq!(now["state"], "running", "{now}");
    s.stop().await;
}

/// A run whose agent waits for a person says so, with the reason, within a
/// pass; and goes back to running when the agent moves on.
async fn a_waiting_agent_shows_as_waiting(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.start_run("r", "FAKE_ASK_MS=2000").await;
    let waiting = s.wait_run(id(&run), 10, |r| r["state"] == "waiting").await;
    assert!(
        waiting["state_reason"]
            .as_str()
            .unwrap()
            .contains("not logged in"),
        "{waiting}"
    );
    let listed = s.get("/api/v1/runs?state=waiting").await.ok();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let back = s.wait_run(id(&run), 10, |r| r["state"] == "running").await;
    assert!(back["state_reason"].is_null(), "{back}");
    s.stop().await;
}

on_both!(
    reconcile_costs_a_constant_number_of_tmux_calls,
    passes_are_quiet_while_nothing_changes,
    the_runs_are_read_again_and_the_panes_listed_only_on_a_change,
    a_waiting_agent_shows_as_waiting,
);
