//! What lab costs beside bare tmux with many busy agents (issue 13):
//! N agents that redraw a status line ten times a second, run by lab and,
//! at the same time, by a bare tmux server; CPU time from /proc over a
//! window.
//!
//! cargo build --release && cargo run --release --example bench_busy [N] [SECONDS] [idle]
//!
//! Counted for lab: its own process (with the tmux clients it started and
//! reaped), its tmux server, and every other process lab put under that
//! server that is not the agent: the relay, which copies the output (ADR
//! 22), the exec shims, and the sandbox's bubblewrap. Counted for bare tmux: its server. The agents
//! themselves (the same perl loop on both sides) are not counted.
//! `idle` runs agents that print nothing after their first line.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

mod common;
use common::{git_repo, script, serve_env};

/// The agent: one process, no forks, a status line redrawn every 100 ms.
const BUSY: &str = r#"#!/bin/sh
exec perl -MTime::HiRes=sleep -e '$|=1; my @s=("✻","✽","✶","✳","✢","·"); print "agent up\r\n"; for (my $i=0;;$i++) { printf "\r\e[2K\e[38;5;174m%s\e[0m \e[1mWorking…\e[0m \e[2m(%ds · %d tokens · esc to interrupt)\e[0m", $s[$i%6], $i/10, $i*7; sleep 0.1 }'
"#;
const IDLE: &str = "#!/bin/sh\necho agent up\nexec sleep 100000\n";

/// utime+stime, cutime+cstime (clock ticks), parent pid and name of a
/// process.
fn stat(pid: u32) -> Option<(u64, u64, u32, String)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = s.find('(')?;
    let close = s.rfind(')')?;
    let comm = s[open + 1..close].to_owned();
    let f: Vec<&str> = s[close + 2..].split(' ').collect();
    let n = |i: usize| f[i].parse::<u64>().unwrap_or(0);
    Some((n(11) + n(12), n(13) + n(14), f[1].parse().ok()?, comm))
}

fn all_procs() -> HashMap<u32, (u64, u64, u32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| Some((p, stat(p)?)))
        .collect()
}

/// Processes under `root` (itself included), minus agents (`perl`,
/// `sleep`) and what runs under them.
fn tree(procs: &HashMap<u32, (u64, u64, u32, String)>, root: u32) -> Vec<u32> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        for (c, (_, _, ppid, comm)) in procs {
            if *ppid == p && comm != "perl" && comm != "sleep" {
                out.push(*c);
            }
        }
        i += 1;
    }
    out
}

fn server_pid(socket: &Path) -> u32 {
    let out = Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(["display-message", "-p", "#{pid}"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// CPU ticks of these processes now (their own, plus their reaped
/// children's for `with_reaped`).
fn ticks(procs: &HashMap<u32, (u64, u64, u32, String)>, pids: &[u32], with_reaped: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|p| procs.get(p))
        .map(|(own, _, _, _)| own)
        .sum::<u64>()
        + with_reaped
            .iter()
            .filter_map(|p| procs.get(p))
            .map(|(_, reaped, _, _)| reaped)
            .sum::<u64>()
}

/// One lab serving `n` runs of `agent` under `t`; its pid and tmux socket.
async fn lab_with(
    t: &Path,
    agent: &Path,
    n: usize,
    env: &[(&str, &str)],
) -> (std::process::Child, std::path::PathBuf) {
    std::fs::create_dir_all(t).unwrap();
    let repo = t.join("repo");
    git_repo(&repo);
    let (child, lab) = serve_env(t, agent, env).await;
    lab.send(
        reqwest::Method::POST,
        "/api/v1/repos",
        json!({"name": "bench", "path": repo}),
    )
    .await;
    let mut socket = None;
    for _ in 0..n {
        let run = lab
            .send(
                reqwest::Method::POST,
                "/api/v1/runs",
                json!({"repo": "bench"}),
            )
            .await;
        assert_eq!(run["state"], "running", "{run}");
        socket = run["tmux_socket"].as_str().map(std::path::PathBuf::from);
    }
    (child, socket.expect("at least one run"))
}

type Procs = HashMap<u32, (u64, u64, u32, String)>;

/// Whether a process is lab's relay (`lab __relay`).
fn is_relay(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(b"__relay"))
}

/// A lab's CPU ticks: its process (with reaped children), its tmux server
/// (with reaped children), its relay, everything else under that server
/// but agents (shims, bubblewrap).
fn lab_ticks(procs: &Procs, lab: u32, server: u32) -> [u64; 4] {
    let (relay, extra): (Vec<u32>, Vec<u32>) = tree(procs, server)
        .into_iter()
        .filter(|p| *p != server)
        .partition(|p| is_relay(*p));
    [
        ticks(procs, &[lab], &[lab]),
        ticks(procs, &[server], &[]),
        ticks(procs, &relay, &[]),
        ticks(procs, &extra, &[]),
    ]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    lab::init_tls();
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let secs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(60);
    let idle = args.next().as_deref() == Some("idle");
    let tmp = tempfile::Builder::new()
        .prefix("lab-bench-")
        .tempdir()
        .unwrap();
    let t = tmp.path();
    let agent = t.join("agent");
    script(&agent, if idle { IDLE } else { BUSY });
    // lab and bare tmux: the same agents, at once.
    // BENCH_LAB_ENV: `NAME=value` pairs, comma-separated, for lab (a log
    // filter, a pass interval) when looking at what it does.
    let extra = std::env::var("BENCH_LAB_ENV").unwrap_or_default();
    let env: Vec<(&str, &str)> = extra
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let (mut lab, lab_sock) = lab_with(&t.join("lab"), &agent, n, &env).await;
    let bare_sock = t.join("bare.sock");
    // BENCH_BARE_LIKE_LAB=1: the bare server gets lab's tmux options (what
    // lab adds beyond its server's configuration).
    let like_lab = std::env::var("BENCH_BARE_LIKE_LAB").is_ok_and(|v| v == "1");
    let bare_conf = t.join("bare.conf");
    std::fs::write(
        &bare_conf,
        if like_lab {
            "set-option -g automatic-rename off\n"
        } else {
            ""
        },
    )
    .unwrap();
    for i in 0..n {
        let ok = Command::new("tmux")
            .arg("-S")
            .arg(&bare_sock)
            .arg("-f")
            .arg(&bare_conf)
            .args([
                "new-session",
                "-d",
                "-s",
                &format!("b{i}"),
                "-x",
                "200",
                "-y",
                "50",
            ])
            .arg(&agent)
            .stdin(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
    // Settle: every agent up, first passes done.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (ls, bs) = (server_pid(&lab_sock), server_pid(&bare_sock));
    let lp = lab.id();
    let measure = |p: &Procs| (lab_ticks(p, lp, ls), ticks(p, &[bs], &[]));
    let before = measure(&all_procs());
    let began = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let after = measure(&all_procs());
    let wall = began.elapsed().as_secs_f64();
    let hz = 100.0; // USER_HZ
    let pct = |a: u64, b: u64| (a.saturating_sub(b)) as f64 / hz / wall * 100.0;
    let bare = pct(after.1, before.1);
    let kind = if idle { "idle" } else { "busy" };
    let bare_is = if like_lab {
        "bare tmux with lab's tmux options"
    } else {
        "bare tmux as installed"
    };
    println!("{n} {kind} agents on each ({bare_is}), {wall:.0} s window, % of one core:\n");
    println!("| what | lab | bare tmux (baseline) |\n|---|---|---|");
    let l: Vec<f64> = (0..4).map(|i| pct(after.0[i], before.0[i])).collect();
    println!(
        "| lab's process (with reaped tmux clients) | {:.2} | – |",
        l[0]
    );
    println!("| tmux server | {:.2} | {bare:.2} |", l[1]);
    println!(
        "| the relay (it copies the output, ADR 22) | {:.2} | – |",
        l[2]
    );
    println!("| exec shims, sandboxes | {:.2} | – |", l[3]);
    let total: f64 = l.iter().sum();
    println!("| all | {total:.2} | {bare:.2} |");
    println!(
        "| **lab's overhead over bare tmux** | **{:.2}** | – |",
        total - bare
    );
    for sock in [&bare_sock, &lab_sock] {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(sock)
            .arg("kill-server")
            .status();
    }
    let _ = lab.kill();
    let _ = lab.wait();
}
