//! Run benchmarks (issue 3): spawn overhead against bare tmux, reconcile
//! cost at 1/100/500 live runs, idle CPU at 100 live runs, RSS at 500.
//!
//! cargo build --release && cargo run --release --example bench_runs [SPAWNS]
//!
//! Starts target/release/lab on a temp data dir (SQLite), with a minimal
//! agent (a shell script that sleeps), and prints a Markdown report.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;
use common::{Api as Lab, git_repo, median, script, serve};

/// utime+stime and cutime+cstime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = rest
        .split(' ')
        .skip(11)
        .take(4)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    (f[0] + f[1], f[2] + f[3])
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn tmux(socket: &Path, args: &[&str]) -> bool {
    Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

async fn wait_pass(lab: &Lab, runs: usize) -> Value {
    let before = lab
        .call(reqwest::Method::GET, "/api/v1/status", None)
        .await
        .0["reconcile_passes"]
        .as_u64()
        .unwrap();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let s = lab
            .call(reqwest::Method::GET, "/api/v1/status", None)
            .await
            .0;
        if s["reconcile_passes"].as_u64().unwrap() > before + 1 && s["last_pass"]["runs"] == runs {
            return s["last_pass"].clone();
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    lab::init_tls();
    let spawns: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(30);
    // `PACE_MS`: a pause after each pair of starts, as a person leaves
    // between two starts (0, the default: back to back).
    let pace = Duration::from_millis(
        std::env::var("PACE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    );
    let tmp = tempfile::Builder::new()
        .prefix("lab-bench-")
        .tempdir()
        .unwrap();
    let t = tmp.path();
    let agent = t.join("agent");
    script(&agent, "#!/bin/sh\nexec sleep 100000\n");
    let repo = t.join("repo");
    git_repo(&repo);
    let (mut child, lab) = serve(t, &agent).await;
    let pid = child.id();
    lab.call(
        reqwest::Method::POST,
        "/api/v1/repos",
        Some(json!({"name": "bench", "path": repo})),
    )
    .await;

    // Spawn overhead, alternating lab and bare tmux.
    let bare_sock = t.join("bare.sock");
    let (mut lab_ms, mut lab_no_ws, mut ws_ms, mut bare_ms) = (vec![], vec![], vec![], vec![]);
    let (mut tmux_ms, mut server_ms) = (vec![], vec![]);
    let (mut insert_ms, mut prepare_ms, mut record_ms) = (vec![], vec![], vec![]);
    for i in 0..spawns {
        let t0 = Instant::now();
        let (run, h) = lab
            .call(
                reqwest::Method::POST,
                "/api/v1/runs",
                Some(json!({"repo": "bench", "prompt": "hello"})),
            )
            .await;
        let total = t0.elapsed().as_secs_f64() * 1e3;
        assert_eq!(run["state"], "running");
        let timing = h.get("server-timing").unwrap().to_str().unwrap().to_owned();
        let dur = |name: &str| -> f64 {
            timing
                .split(", ")
                .find_map(|p| p.strip_prefix(&format!("{name};dur=")[..]))
                .unwrap()
                .parse()
                .unwrap()
        };
        let ws = dur("workspace");
        tmux_ms.push(dur("tmux"));
        insert_ms.push(dur("insert"));
        prepare_ms.push(dur("prepare"));
        record_ms.push(dur("record"));
        server_ms.push(dur("total"));
        lab_ms.push(total);
        ws_ms.push(ws);
        lab_no_ws.push(total - ws);
        let t0 = Instant::now();
        let agent_s = agent.to_string_lossy();
        assert!(tmux(
            &bare_sock,
            &[
                "new-session",
                "-d",
                "-s",
                &format!("bare{i}"),
                "--",
                &agent_s,
                "--model",
                "sonnet",
                "--effort",
                "high",
                "--",
                "hello"
            ]
        ));
        bare_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        tokio::time::sleep(pace).await;
    }
    let (l, lw, w, b) = (
        median(&mut lab_ms),
        median(&mut lab_no_ws),
        median(&mut ws_ms),
        median(&mut bare_ms),
    );
    println!(
        "## Spawn ({spawns} of each, alternated, {} ms between pairs)\n",
        pace.as_millis()
    );
    println!("| what | median |\n| --- | --- |");
    println!("| bare `tmux new-session -d` | {b:.2} ms |");
    println!(
        "| lab `POST /api/v1/runs`, total, with its workspace | {l:.2} ms ({:.2}× bare tmux) |",
        l / b
    );
    println!("| of which the git worktree | {w:.2} ms |");
    println!(
        "| lab without the worktree | {lw:.2} ms ({:.2}× bare tmux) |",
        lw / b
    );
    println!(
        "| (server side: launch total {:.2} ms, its tmux call {:.2} ms) | |",
        median(&mut server_ms),
        median(&mut tmux_ms)
    );
    println!(
        "| (server side: insert {:.2} ms, prepare {:.2} ms, record {:.2} ms) | |",
        median(&mut insert_ms),
        median(&mut prepare_ms),
        median(&mut record_ms)
    );
    tmux(&bare_sock, &["kill-server"]);

    // Reconcile cost and idle CPU and memory at growing run counts.
    println!("\n## Reconcile, CPU, memory\n");
    println!(
        "| live runs | tmux calls per pass | pass time | lab RSS |\n| --- | --- | --- | --- |"
    );
    let mut live = spawns;
    for target in [1usize, 100, 500] {
        if live > target {
            // Start over from fewer runs: stop the extra ones.
            let runs = lab
                .call(reqwest::Method::GET, "/api/v1/runs?state=running", None)
                .await
                .0;
            for r in runs.as_array().unwrap().iter().take(live - target) {
                lab.call(
                    reqwest::Method::POST,
                    &format!("/api/v1/runs/{}/stop", r["id"]),
                    None,
                )
                .await;
            }
            live = target;
        }
        while live < target {
            lab.call(
                reqwest::Method::POST,
                "/api/v1/runs",
                Some(json!({"repo": "bench"})),
            )
            .await;
            live += 1;
        }
        let pass = wait_pass(&lab, target).await;
        println!(
            "| {target} | {} | {:.1} ms | {:.1} MiB |",
            pass["tmux_calls"],
            pass["elapsed_ms"].as_f64().unwrap(),
            rss_kib(pid) as f64 / 1024.0
        );
        if target == 100 {
            let secs = 30;
            let (own0, kids0) = cpu_ticks(pid);
            tokio::time::sleep(Duration::from_secs(secs)).await;
            let (own1, kids1) = cpu_ticks(pid);
            let hz = 100.0;
            let own = (own1 - own0) as f64 / hz / secs as f64 * 100.0;
            let kids = (kids1 - kids0) as f64 / hz / secs as f64 * 100.0;
            println!(
                "\nidle CPU over {secs} s at 100 live runs: lab {own:.2}% of a core, its tmux calls {kids:.2}%, together {:.2}%\n",
                own + kids
            );
            println!(
                "| live runs | tmux calls per pass | pass time | lab RSS |\n| --- | --- | --- | --- |"
            );
        }
    }
    tmux(&t.join("data/tmux.sock"), &["kill-server"]);
    let _ = child.kill();
    let _ = child.wait();
}
