//! The log writer: one control-mode client carries every run's output to
//! its log (no process per run), keeps every byte, survives lab's restart,
//! and comes back when it is killed.

use std::path::{Path, PathBuf};

use lab::run::tmux::CONTROL_SESSION;
use serde_json::Value;

use crate::on_both;
use crate::screen::scripted;
use crate::support::{Backend, TestServer, agent, id, wait};

fn log_of(run: &Value) -> PathBuf {
    PathBuf::from(run["log_path"].as_str().unwrap())
}

/// Processes whose parent is `pid`, by name.
fn children(pid: i64) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i64>().ok())
        .filter_map(|p| {
            let s = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let comm = s[s.find('(')? + 1..s.rfind(')')?].to_owned();
            let ppid: i64 = s[s.rfind(')')? + 2..].split(' ').nth(1)?.parse().ok()?;
            (ppid == pid).then_some(comm)
        })
        .collect()
}

fn server_pid(socket: &Path) -> i64 {
    agent::tmux(socket, &["display-message", "-p", "#{pid}"])
        .trim()
        .parse()
        .unwrap()
}

/// The log writer's pid (its pane's process).
fn writer_pid(socket: &Path) -> i64 {
    agent::tmux(
        socket,
        &[
            "display-message",
            "-p",
            "-t",
            &format!("={CONTROL_SESSION}:0.0"),
            "#{pane_pid}",
        ],
    )
    .trim()
    .parse()
    .unwrap()
}

/// Ticks `tick N` in the log, in order.
fn ticks(log: &Path) -> Vec<u64> {
    String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default())
        .lines()
        .filter_map(|l| {
            l.trim_start_matches('\r')
                .strip_prefix("tick ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

async fn every_byte_reaches_the_log_through_one_writer(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    // Bytes tmux's control mode escapes (ESC, backslash, controls), UTF-8,
    // and a line long enough to come in several pieces.
    let long = "x".repeat(20_000);
    let body = format!(
        "printf 'a\\\\b\\033[31mc\\001d\\342\\234\\273e\\n'\nprintf '%s\\n' {long}\necho > \"$FAKE_REC/printed\""
    );
    let mut runs: Vec<Value> = Vec::new();
    for i in 0..3 {
        runs.push(scripted(&s, &format!("bytes{i}"), &body).await);
    }
    let want_a = b"a\\b\x1b[31mc\x01d\xe2\x9c\xbbe\r\n".to_vec();
    for run in &runs {
        s.record(id(run), "printed").await;
        let log = log_of(run);
        let got = wait::until("the bytes in the log", wait::secs(10), async || {
            let got = std::fs::read(&log).unwrap_or_default();
            got.windows(long.len())
                .any(|w| w == long.as_bytes())
                .then_some(got)
        })
        .await;
        assert!(
            got.windows(want_a.len()).any(|w| w == want_a),
            "{:?}",
            String::from_utf8_lossy(&got)
        );
    }
    // No process of its own per run: the tmux server's children are the
    // writer and the runs' shims, no `cat`.
    let socket = s.runner().tmux.socket().to_path_buf();
    let kids = children(server_pid(&socket));
    assert!(!kids.iter().any(|k| k == "cat" || k == "sh"), "{kids:?}");
    assert_eq!(kids.iter().filter(|k| *k == "lab").count(), 4, "{kids:?}");
    s.stop().await;
}

async fn a_lab_restart_loses_no_byte(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.start_run("r", "FAKE_TICK_MS=20").await;
    let log = log_of(&run);
    wait::until("ticks", wait::secs(10), async || {
        (ticks(&log).len() > 5).then_some(())
    })
    .await;
    let s = s.restart().await;
    let before = ticks(&log).len();
    wait::until("more ticks", wait::secs(10), async || {
        (ticks(&log).len() > before + 20).then_some(())
    })
    .await;
    let t = ticks(&log);
    let want: Vec<u64> = (1..=t.len() as u64).collect();
    assert_eq!(t, want, "every tick once, in order");
    s.stop().await;
}

async fn a_killed_writer_comes_back(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.start_run("r", "FAKE_TICK_MS=50").await;
    let log = log_of(&run);
    wait::until("ticks", wait::secs(10), async || {
        (!ticks(&log).is_empty()).then_some(())
    })
    .await;
    let socket = s.runner().tmux.socket().to_path_buf();
    let old = writer_pid(&socket);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(old as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    // The next pass starts it again; the run's output reaches its log again.
    wait::until("a new writer", wait::secs(10), async || {
        s.runner().reconcile(false).await.unwrap();
        let now = writer_pid(&socket);
        (now != old && agent::pid_alive(now)).then_some(())
    })
    .await;
    let n = ticks(&log).len();
    wait::until("ticks after the new writer", wait::secs(10), async || {
        (ticks(&log).len() > n + 5).then_some(())
    })
    .await;

    // Its session killed: made anew, and the live run's window linked again.
    agent::tmux(
        &socket,
        &["kill-session", "-t", &format!("={CONTROL_SESSION}")],
    );
    s.runner().reconcile(false).await.unwrap();
    wait::until("the writer's session", wait::secs(10), async || {
        s.runner().reconcile(false).await.unwrap();
        let panes = s.runner().tmux.panes().await.unwrap();
        panes
            .iter()
            .any(|p| p.session == CONTROL_SESSION && p.window_index > 0)
            .then_some(())
    })
    .await;
    let n = ticks(&log).len();
    wait::until("ticks after the new session", wait::secs(10), async || {
        (ticks(&log).len() > n + 5).then_some(())
    })
    .await;
    // The run is as it was; stopping it ends its window everywhere.
    assert_eq!(
        s.get(&format!("/api/v1/runs/{}", id(&run))).await.ok()["state"],
        "running"
    );
    s.post(
        &format!("/api/v1/runs/{}/stop", id(&run)),
        serde_json::json!(null),
    )
    .await
    .ok();
    let panes = s.runner().tmux.panes().await.unwrap();
    assert!(
        panes.iter().all(|p| p.is_logger()),
        "only the writer's pane is left: {panes:?}"
    );
    s.stop().await;
}

on_both!(
    every_byte_reaches_the_log_through_one_writer,
    a_lab_restart_loses_no_byte,
    a_killed_writer_comes_back,
);
