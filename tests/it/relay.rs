//! The relay (ADR 22): one process copies every run's output to its pane
//! and log. A relay that dies hands each run back to its shim, and lab
//! starts another for the runs after; a lab that dies leaves the relay
//! copying, every byte.

use std::path::Path;

use serde_json::{Value, json};

use crate::on_both;
use crate::support::process::LabHome;
use crate::support::{Backend, TestServer, agent, git, id, wait};

/// The relay's pid on the tmux server at `socket`.
fn relay_pid(socket: &Path) -> i64 {
    let target = format!("={}:", lab::run::relay::SESSION);
    agent::tmux(socket, &["list-panes", "-t", &target, "-F", "#{pane_pid}"])
        .trim()
        .parse()
        .expect("a relay pane")
}

/// Whether process `pid` holds `file` open.
fn holds(pid: i64, file: &str) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .any(|p| p == Path::new(file))
        })
        .unwrap_or(false)
}

/// The numbers of the fake agent's `tick N` lines in a log, in order.
fn ticks(log: &str) -> Vec<u64> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.trim_end_matches('\r').strip_prefix("tick "))
        .filter_map(|rest| rest.split(' ').next()?.parse().ok())
        .collect()
}

/// Waits until the log's last tick is past `n`; returns the ticks.
async fn ticks_past(log: &str, n: u64) -> Vec<u64> {
    wait::until(format!("tick {n} in {log}"), wait::secs(20), async || {
        let t = ticks(log);
        (t.last().copied().unwrap_or(0) > n).then_some(t)
    })
    .await
}

fn log_of(run: &Value) -> String {
    run["log_path"].as_str().unwrap().to_owned()
}

async fn a_killed_relay_hands_each_run_back_to_its_shim(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let a = s.start_run("r", "FAKE_TICK_MS=20").await;
    let socket = Path::new(a["tmux_socket"].as_str().unwrap()).to_path_buf();
    let first = relay_pid(&socket);
    let log_a = log_of(&a);
    ticks_past(&log_a, 5).await;
    assert!(holds(first, &log_a), "the relay copies run {}", id(&a));

    // The relay dies (as a crash would): the run goes on, its shim copying.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(first as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let at_kill = ticks(&log_a).last().copied().unwrap();
    let after = ticks_past(&log_a, at_kill + 10).await;
    assert!(after.windows(2).all(|w| w[0] < w[1]), "in order: {after:?}");
    let now = s.get(&format!("/api/v1/runs/{}", id(&a))).await.ok();
    assert_eq!(now["state"], "running", "{now}");

    // The next run gets a new relay; the first stays with its shim.
    let b2 = s.start_run("r", "FAKE_TICK_MS=20").await;
    let second = relay_pid(&socket);
    assert_ne!(second, first, "a new relay");
    let log_b = log_of(&b2);
    ticks_past(&log_b, 5).await;
    assert!(
        holds(second, &log_b),
        "the new relay copies run {}",
        id(&b2)
    );
    assert!(!holds(second, &log_a), "run {} stays with its shim", id(&a));
    // Each ends as any run does, with its output whole to the end.
    for run in [&a, &b2] {
        let stopped = s
            .post(&format!("/api/v1/runs/{}/stop", id(run)), json!(null))
            .await
            .ok();
        assert_eq!(stopped["state"], "stopped", "{stopped}");
    }
    let t = ticks(&log_b);
    assert_eq!(t, (1..=t.len() as u64).collect::<Vec<_>>(), "every tick");
    // The relay stays for the next runs, and is no run: nothing reports it.
    let status = s.get("/api/v1/status").await.ok();
    assert_eq!(status["stray_sessions"], json!([]), "{status}");
    assert_eq!(status["relay"]["running"], true, "{status}");
    assert_eq!(status["relay"]["enabled"], true, "{status}");
    assert!(agent::pid_alive(second));
}

async fn output_while_lab_is_down_is_all_in_the_log(b: Backend) {
    let home = LabHome::new(&b).await;
    let mut lab = home.start(&[]).await;
    let path = git::init_repo(home.tmp.path(), "r");
    lab.post("/api/v1/repos", json!({"name": "r", "path": path}))
        .await
        .ok();
    let run = lab
        .post(
            "/api/v1/runs",
            json!({"repo": "r", "prompt": "FAKE_TICK_MS=20"}),
        )
        .await
        .ok();
    let log = log_of(&run);
    ticks_past(&log, 5).await;
    let relay = relay_pid(&home.socket());

    lab.kill9();
    let down = ticks(&log).last().copied().unwrap();
    // While lab is down the relay copies on.
    let during = ticks_past(&log, down + 20).await;
    assert!(agent::pid_alive(relay));

    let lab2 = home.start(&[]).await;
    let again = lab2.get(&format!("/api/v1/runs/{}", id(&run))).await.ok();
    assert_eq!(again["state"], "running", "{again}");
    // The next run is handed to the same relay: lab found it running.
    let next = lab2
        .post(
            "/api/v1/runs",
            json!({"repo": "r", "prompt": "FAKE_TICK_MS=20"}),
        )
        .await
        .ok();
    ticks_past(&log_of(&next), 3).await;
    assert_eq!(relay_pid(&home.socket()), relay, "the same relay");
    assert!(holds(relay, &log_of(&next)));
    // Every tick, before, during and after lab's absence, once and in order.
    let all = ticks_past(&log, during.last().copied().unwrap_or(0) + 5).await;
    assert!(all.len() > during.len());
    assert_eq!(all, (1..=all.len() as u64).collect::<Vec<_>>());
}

on_both!(
    a_killed_relay_hands_each_run_back_to_its_shim,
    output_while_lab_is_down_is_all_in_the_log,
);

async fn without_the_relay_each_shim_copies_its_own(b: Backend) {
    let s = TestServer::start_tweaked(b, |c| c.no_relay = true).await;
    s.add_repo("r").await;
    let run = s.start_run("r", "FAKE_TICK_MS=20").await;
    let log = log_of(&run);
    ticks_past(&log, 5).await;
    let socket = Path::new(run["tmux_socket"].as_str().unwrap());
    let sessions = agent::tmux(socket, &["list-sessions", "-F", "#{session_name}"]);
    assert_eq!(
        sessions.trim(),
        run["session"].as_str().unwrap(),
        "no relay"
    );
    let status = s.get("/api/v1/status").await.ok();
    let socket = s.runner().relay().socket().to_string_lossy().into_owned();
    assert_eq!(
        status["relay"],
        json!({"enabled": false, "running": false, "socket": socket}),
        "{status}"
    );
    let shim = run["pid"].as_i64().unwrap();
    assert!(holds(shim, &log), "the shim writes its log itself");
    let stopped = s
        .post(&format!("/api/v1/runs/{}/stop", id(&run)), json!(null))
        .await
        .ok();
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    let t = ticks(&log);
    assert_eq!(t, (1..=t.len() as u64).collect::<Vec<_>>(), "every tick");
}

on_both!(without_the_relay_each_shim_copies_its_own);

async fn a_relay_that_does_not_answer_is_replaced(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let a = s.start_run("r", "FAKE_TICK_MS=20").await;
    let socket = Path::new(a["tmux_socket"].as_str().unwrap()).to_path_buf();
    ticks_past(&log_of(&a), 3).await;
    // In the relay's place, one that holds its lock and its socket but
    // answers nothing (stuck, or of another version). (A stopped relay
    // cannot be made: tmux continues a pane's stopped process.)
    agent::tmux(
        &socket,
        &[
            "kill-session",
            "-t",
            &format!("={}", lab::run::relay::SESSION),
        ],
    );
    let relay = s.runner().relay().socket().to_path_buf();
    let lock = relay.with_extension("relay-lock");
    let mute = format!(
        "use Fcntl qw(:flock); use Socket; open(my $l, '>>', '{}') or die; flock($l, LOCK_EX) or die; \
         socket(my $s, PF_UNIX, SOCK_STREAM, 0) or die; unlink '{}'; bind($s, pack_sockaddr_un('{}')) or die; \
         listen($s, 5) or die; sleep 1000",
        lock.display(),
        relay.display(),
        relay.display()
    );
    agent::tmux(
        &socket,
        &[
            "new-session",
            "-d",
            "-s",
            lab::run::relay::SESSION,
            "--",
            "perl",
            "-e",
            &mute,
        ],
    );
    wait::until("the mute relay listening", wait::secs(10), async || {
        (s.runner().relay().running() && relay.exists()).then_some(())
    })
    .await;
    let mute_pid = relay_pid(&socket);
    // The next launch finds it mute, replaces it, and is handed to the new
    // relay (after waiting out its answer, 5 s).
    let b2 = s.start_run("r", "FAKE_TICK_MS=20").await;
    assert_eq!(b2["state"], "running", "{b2}");
    let fresh = relay_pid(&socket);
    assert_ne!(fresh, mute_pid);
    assert!(!agent::pid_alive(mute_pid), "the mute one is gone");
    ticks_past(&log_of(&b2), 3).await;
    assert!(
        holds(fresh, &log_of(&b2)),
        "the new relay copies run {}",
        id(&b2)
    );
    let status = s.get("/api/v1/status").await.ok();
    assert_eq!(status["relay"]["running"], true, "{status}");
}

on_both!(a_relay_that_does_not_answer_is_replaced);
