//! Screen benchmarks (issue 13): replaying a 10 MB TUI log through the
//! terminal emulator, one screen render, and input → visible on the
//! rendered screen; each beside a baseline taken in the same invocation.
//!
//! cargo build --release && cargo run --release --example bench_screen [ROUNDS]
//!
//! Replay and render run in this process on lab's own `Emulator`; input
//! starts target/release/lab on a temp data dir (SQLite) with an agent that
//! sleeps (its terminal echoes what is typed), and prints a Markdown report.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lab::domain::ScreenFormat;
use lab::run::screen::Emulator;
use serde_json::json;

mod common;
use common::{git_repo, median, pct, script, serve};

/// A log like a TUI agent's: a status line redrawn in place with a spinner
/// and colours, text written at cursor positions, lines erased, output
/// that scrolls.
fn tui_log(size: usize) -> Vec<u8> {
    let spinner = ["✻", "✽", "✶", "✳", "✢", "·"];
    let mut out = Vec::with_capacity(size + 4096);
    let mut i = 0usize;
    while out.len() < size {
        let s = spinner[i % spinner.len()];
        out.extend_from_slice(
            format!(
                "\x1b[s\x1b[48;1H\x1b[2K\x1b[38;5;174m{s}\x1b[0m \x1b[1mThinking…\x1b[0m \
                 \x1b[2m({i}s · ↓ {} tokens · esc to interrupt)\x1b[0m\x1b[u",
                i * 7
            )
            .as_bytes(),
        );
        if i.is_multiple_of(5) {
            out.extend_from_slice(
                format!(
                    "\x1b[32m⏺\x1b[0m Update(src/file_{i}.rs)\r\n  ⎿  \x1b[38;2;120;200;120m+ let x = {i};\x1b[0m \
                     \x1b[38;2;200;120;120m- let x = {};\x1b[0m\r\n",
                    i.saturating_sub(1)
                )
                .as_bytes(),
            );
        }
        i += 1;
    }
    out
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn tmux(socket: &Path, args: &[&str]) -> String {
    let out = Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "tmux {args:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    lab::init_tls();
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    println!("## Screens (issue 13)\n");

    // Replay: the emulator against stripping escapes (what the run page and
    // `labctl logs` did before) over the same 10 MB, alternating, 5 each.
    let log = tui_log(10 * 1024 * 1024);
    let mb = log.len() as f64 / (1024.0 * 1024.0);
    let (mut replay, mut strip) = (vec![], vec![]);
    let mut emu = Emulator::new(50, 200);
    for _ in 0..5 {
        let t = Instant::now();
        let mut e = Emulator::new(50, 200);
        for chunk in log.chunks(1 << 20) {
            e.feed(chunk);
        }
        replay.push(ms(t.elapsed()));
        emu = e;
        let t = Instant::now();
        let s = strip_ansi_escapes::strip(&log);
        strip.push(ms(t.elapsed()));
        assert!(!s.is_empty());
    }
    let (r, s) = (median(&mut replay), median(&mut strip));
    println!("Replay of a {mb:.1} MB TUI log (median of 5):\n");
    println!("| what | ms | MB/s | ratio |\n|---|---|---|---|");
    println!(
        "| strip escapes (baseline) | {s:.1} | {:.0} | 1.00 |",
        mb / s * 1e3
    );
    println!(
        "| vt100 replay | {r:.1} | {:.0} | {:.2} |\n",
        mb / r * 1e3,
        r / s
    );

    // One render of the caught-up screen, against one `tmux capture-pane`
    // of a pane showing the same bytes (what reconcile's screen check costs).
    let t = tempfile::Builder::new()
        .prefix("lab-bench-")
        .tempdir()
        .unwrap();
    let sock = t.path().join("bare.sock");
    let tail = &log[log.len() - 256 * 1024..];
    std::fs::write(t.path().join("tail"), tail).unwrap();
    let cat = format!("cat {}; exec sleep 100000", t.path().join("tail").display());
    tmux(
        &sock,
        &[
            "new-session",
            "-d",
            "-s",
            "b",
            "-x",
            "200",
            "-y",
            "50",
            "sh",
            "-c",
            &cat,
        ],
    );
    std::thread::sleep(Duration::from_millis(500));
    let (mut text, mut html, mut html_hist, mut capture) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        let t0 = Instant::now();
        let shot = emu.shot(ScreenFormat::Text, 0);
        text.push(ms(t0.elapsed()) * 1e3);
        assert!(!shot.body.is_empty());
        let t0 = Instant::now();
        emu.shot(ScreenFormat::Html, 0);
        html.push(ms(t0.elapsed()) * 1e3);
        let t0 = Instant::now();
        emu.shot(ScreenFormat::Html, 500);
        html_hist.push(ms(t0.elapsed()) * 1e3);
        let t0 = Instant::now();
        tmux(&sock, &["capture-pane", "-p", "-t", "=b:"]);
        capture.push(ms(t0.elapsed()) * 1e3);
    }
    let _ = tmux(&sock, &["kill-server"]);
    let cap = median(&mut capture);
    println!("One screen, 50×200 (median of {rounds}, µs):\n");
    println!("| what | µs | p99 µs | ratio |\n|---|---|---|---|");
    println!(
        "| tmux capture-pane -p (baseline) | {cap:.0} | {:.0} | 1.00 |",
        pct(&mut capture, 0.99)
    );
    for (name, v) in [
        ("render text", &mut text),
        ("render html", &mut html),
        ("render html + 500 lines of history", &mut html_hist),
    ] {
        let m = median(v);
        println!("| {name} | {m:.0} | {:.0} | {:.3} |", pct(v, 0.99), m / cap);
    }
    println!();

    // Input → visible: lab's API (POST input, then GET screen until the
    // text shows) against tmux itself (send-keys, then capture-pane until
    // it shows), on the same run, alternating.
    let agent = t.path().join("agent");
    script(&agent, "#!/bin/sh\nexec sleep 100000\n");
    let repo = t.path().join("repo");
    git_repo(&repo);
    let (mut child, lab) = serve(t.path(), &agent).await;
    lab.send(
        reqwest::Method::POST,
        "/api/v1/repos",
        json!({"name": "bench", "path": repo}),
    )
    .await;
    let run = lab
        .send(
            reqwest::Method::POST,
            "/api/v1/runs",
            json!({"repo": "bench"}),
        )
        .await;
    let id = run["id"].as_i64().unwrap();
    let socket = Path::new(run["tmux_socket"].as_str().unwrap()).to_owned();
    let target = format!("={}:", run["session"].as_str().unwrap());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (mut api, mut bare) = (vec![], vec![]);
    let n = rounds.min(100);
    for i in 0..n {
        let word = format!("ping{i}x");
        let t0 = Instant::now();
        lab.send(
            reqwest::Method::POST,
            &format!("/api/v1/runs/{id}/input"),
            json!({"text": word, "keys": ["Enter"]}),
        )
        .await;
        loop {
            let (v, _) = lab
                .call(
                    reqwest::Method::GET,
                    &format!("/api/v1/runs/{id}/screen"),
                    None,
                )
                .await;
            if v["text"].as_str().unwrap().contains(&word) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        api.push(ms(t0.elapsed()));
        let word = format!("pong{i}x");
        let t0 = Instant::now();
        tmux(&socket, &["send-keys", "-t", &target, "-l", "--", &word]);
        tmux(&socket, &["send-keys", "-t", &target, "Enter"]);
        while !tmux(&socket, &["capture-pane", "-p", "-t", &target]).contains(&word) {
            std::thread::sleep(Duration::from_millis(2));
        }
        bare.push(ms(t0.elapsed()));
    }
    let _ = child.kill();
    let _ = child.wait();
    let (b, a) = (median(&mut bare), median(&mut api));
    println!("Input → visible on the screen ({n} rounds, ms):\n");
    println!("| what | median | p99 | ratio |\n|---|---|---|---|");
    println!(
        "| tmux send-keys + capture-pane (baseline) | {b:.2} | {:.2} | 1.00 |",
        pct(&mut bare, 0.99)
    );
    println!(
        "| POST /input + GET /screen | {a:.2} | {:.2} | {:.2} |",
        pct(&mut api, 0.99),
        a / b
    );
}
