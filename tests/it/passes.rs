//! The reconcile loop's passes over live runs: what a pass costs in tmux
//! calls, a loop that sleeps while nothing changes, and the screen check
//! that finds a waiting agent.

use serde_json::{Value, json};
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
        // A pass after new output also reads the changed screens: one more
        // call, whatever their number; then only the pane listing.
        wait::until(
            format_args!("a pass with no new output at {target} runs"),
            wait::secs(20),
            async || {
                let first = s.runner().reconcile(false).await.unwrap();
                assert!(first.tmux_calls <= 2, "at {target} runs: {first:?}");
                (first.tmux_calls == 1).then_some(())
            },
        )
        .await;
        let report = s.runner().reconcile(false).await.unwrap();
        if report.checked != target {
            // Which run ended, and why (a fake agent that should stay).
            let runs = s.get("/api/v1/runs").await.ok();
            let ended: Vec<&Value> = runs
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["state"] != "running")
                .collect();
            panic!(
                "at {target} runs a pass checked {}: {ended:?}",
                report.checked
            );
        }
        assert_eq!(report.tmux_calls, 1, "at {target} runs: {report:?}");
        assert!(report.exited.is_empty() && report.lost.is_empty());
    }
    s.stop().await;
}

/// Waits until the reconcile loop went one AFK tick (a second here) without
/// a pass or a tmux client, with no pass under way at its end (one begun
/// before the tick is counted only when it ends), its last pass having
/// left nothing to look at again soon: the agents' first output is read
/// and nothing is left. What then happens or not is what a test checks.
async fn settled(s: &TestServer) -> Value {
    s.patch("/api/v1/settings", json!({"afk": {"tick_seconds": 1}}))
        .await
        .ok();
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap();
    for _ in 0..30 {
        let before = s.get("/api/v1/status").await.ok();
        s.after_ticks(1).await;
        let after = s.get("/api/v1/status").await.ok();
        let quiet = n(&after, "reconcile_passes") == n(&before, "reconcile_passes")
            && n(&after, "tmux_calls") == n(&before, "tmux_calls")
            && after["last_pass"]["soon"] == false;
        if quiet && !s.runner().pass_in_flight() {
            // Nothing began or ended since `after` was read either.
            let again = s.get("/api/v1/status").await.ok();
            if n(&again, "reconcile_passes") == n(&after, "reconcile_passes")
                && n(&again, "tmux_calls") == n(&after, "tmux_calls")
            {
                return again;
            }
        }
    }
    panic!("the reconcile loop never settled");
}

/// While nothing changes, the loop sleeps (ADR 30): no pass, no tmux client
/// while time goes by (witnessed by the AFK loop's ticks, a second apart
/// here). A session killed by hand wakes it at once: its pane's process
/// ended, and the pidfd says so.
async fn the_loop_sleeps_while_nothing_changes(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let mut runs = Vec::new();
    for _ in 0..3 {
        let r = s.start_run("r", "stay").await;
        s.record(id(&r), "child").await;
        runs.push(r);
    }
    let before = settled(&s).await;
    assert_eq!(before["last_pass"]["runs"], 3, "{before}");
    s.after_ticks(3).await;
    let after = s.get("/api/v1/status").await.ok();
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap();
    // At most the 10 s read of the runs may fall in those 3 s; it starts
    // no tmux client.
    assert!(
        n(&after, "reconcile_passes") <= n(&before, "reconcile_passes") + 1,
        "the loop sleeps: {before} → {after}"
    );
    assert_eq!(
        n(&after, "tmux_calls"),
        n(&before, "tmux_calls"),
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
        killed.elapsed() < lab::run::FULL_EVERY / 2,
        "woken by the pane's end, not the 10 s read: {:?}",
        killed.elapsed()
    );
    for r in &runs[1..] {
        let now = s.get(&format!("/api/v1/runs/{}", id(r))).await.ok();
        assert_eq!(now["state"], "running", "{now}");
    }
    s.stop().await;
}

/// Every `FULL_EVERY` the loop reads the runs again, and lists the panes
/// only when the runs changed (or every `PANES_EVERY`): the read of a quiet
/// run starts no tmux client, and a change written behind this process's
/// back (another node, or by hand) still brings a full pass within about
/// 10 s.
async fn the_runs_are_read_again_and_the_panes_listed_only_on_a_change(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let r = s.start_run("r", "stay").await;
    let run = id(&r);
    s.record(run, "child").await;
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap();
    let before = settled(&s).await;
    // The next pass is the 10 s read of the runs: they are unchanged, so it
    // lists no panes.
    let after = wait::until(
        "the runs read again",
        wait::secs(20).every_ms(100),
        async || {
            let st = s.get("/api/v1/status").await.ok();
            (n(&st, "reconcile_passes") > n(&before, "reconcile_passes")).then_some(st)
        },
    )
    .await;
    assert_eq!(
        n(&after, "tmux_calls"),
        n(&before, "tmux_calls"),
        "no tmux client for unchanged runs: {before} → {after}"
    );
    assert_eq!(after["last_pass"]["full"], false, "{after}");

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

/// A screen is read again once its agent's output pauses, when it was last
/// read while the output still flowed: no log write announces a pause, so
/// the pass that read it comes back soon, not at the next 10 s read of the
/// runs. Once the loop is quiet, nothing is left to read. (Before, a quiet
/// loop still owed that read, and made it 10 s later, a tmux client where
/// nothing had changed.)
async fn a_screen_read_mid_output_is_read_again_at_its_pause(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let script = s.tmp().join("later.sh");
    agent::write_script(
        &script,
        "echo first\nsleep 1.5\necho later\necho later > \"$FAKE_REC/later\"\nsleep 100000\n",
    );
    let r = s
        .start_run("r", &format!("FAKE_RUN={}", script.display()))
        .await;
    s.record(id(&r), "later").await;
    let st = settled(&s).await;
    assert_eq!(st["last_pass"]["soon"], false, "{st}");
    // Nothing is left to read: a pass lists the panes, and reads nothing.
    let pass = s.runner().reconcile(false).await.unwrap();
    assert_eq!(pass.tmux_calls, 1, "{pass:?} after {st}");
    s.stop().await;
}

on_both!(
    a_screen_read_mid_output_is_read_again_at_its_pause,
    reconcile_costs_a_constant_number_of_tmux_calls,
    the_loop_sleeps_while_nothing_changes,
    the_runs_are_read_again_and_the_panes_listed_only_on_a_change,
    a_waiting_agent_shows_as_waiting,
);
