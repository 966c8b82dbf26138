//! The fleet's forwarding (issue 29 §5): a run's screen and input asked of
//! the node that owns it (the baseline) and of another node, which forwards
//! them signed, alternating, in one invocation.
//!
//! cargo build --release && LAB_TEST_DATABASE_URL=postgres://… \
//!   cargo run --release --example bench_fleet [ROUNDS]
//!
//! Two release `lab serve` nodes on one fresh PostgreSQL database, each its
//! own data dir, port and tmux server; one run on the first node, whose
//! agent sleeps (its terminal echoes what is typed). Prints a Markdown table.

use std::time::{Duration, Instant};

use serde_json::json;

mod common;
use common::{Api, fresh_pg, git_repo, median, pct, script, serve_env};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One call's time, checked to succeed.
async fn timed(api: &Api, m: reqwest::Method, path: &str, body: Option<serde_json::Value>) -> f64 {
    let t0 = Instant::now();
    let _ = api.call(m, path, body).await;
    ms(t0.elapsed())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    lab::init_tls();
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500);
    let admin = std::env::var("LAB_TEST_DATABASE_URL")
        .expect("LAB_TEST_DATABASE_URL: a PostgreSQL server the nodes share");
    let db = fresh_pg(&admin).await;
    let t = tempfile::tempdir().unwrap();
    let agent = t.path().join("agent");
    script(&agent, "#!/bin/sh\nexec sleep 100000\n");
    let repo = t.path().join("repo");
    git_repo(&repo);
    let env = [("LAB_DATABASE_URL", db.as_str())];
    let (da, db_dir) = (t.path().join("a"), t.path().join("b"));
    std::fs::create_dir_all(&da).unwrap();
    std::fs::create_dir_all(&db_dir).unwrap();
    let (mut ca, a) = serve_env(&da, &agent, &env).await;
    let (mut cb, b) = serve_env(&db_dir, &agent, &env).await;
    a.send(
        reqwest::Method::POST,
        "/api/v1/repos",
        json!({"name": "bench", "path": repo}),
    )
    .await;
    let run = a
        .send(
            reqwest::Method::POST,
            "/api/v1/runs",
            json!({"repo": "bench"}),
        )
        .await;
    let id = run["id"].as_i64().unwrap();
    // Both nodes beat and know each other before the first round.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let screen = format!("/api/v1/runs/{id}/screen");
    let input = format!("/api/v1/runs/{id}/input");
    let (_, h) = b.call(reqwest::Method::GET, &screen, None).await;
    assert!(
        h.get("x-lab-served-by").is_some(),
        "the second node forwards the run's screen"
    );
    let (mut s_own, mut s_fwd, mut i_own, mut i_fwd) = (vec![], vec![], vec![], vec![]);
    for i in 0..rounds {
        s_own.push(timed(&a, reqwest::Method::GET, &screen, None).await);
        s_fwd.push(timed(&b, reqwest::Method::GET, &screen, None).await);
        let text = json!({"text": format!("k{i} ")});
        i_own.push(timed(&a, reqwest::Method::POST, &input, Some(text.clone())).await);
        i_fwd.push(timed(&b, reqwest::Method::POST, &input, Some(text)).await);
    }
    for c in [&mut ca, &mut cb] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let _ = std::process::Command::new("tmux")
        .arg("-S")
        .arg(da.join("data/tmux.sock"))
        .arg("kill-server")
        .status();
    println!("## The fleet: forwarded screen and input (issue 29)\n");
    println!("{rounds} rounds of each, alternating; ms.\n");
    println!("| what | p50 | p99 | p50 ratio | target (1.2× + 2 ms) |\n|---|---|---|---|---|");
    for (what, own, fwd) in [
        ("GET /runs/{id}/screen", &mut s_own, &mut s_fwd),
        ("POST /runs/{id}/input", &mut i_own, &mut i_fwd),
    ] {
        let (o50, o99) = (median(own), pct(own, 0.99));
        let (f50, f99) = (median(fwd), pct(fwd, 0.99));
        println!("| {what}, the owning node (baseline) | {o50:.2} | {o99:.2} | 1.00 | |");
        println!(
            "| {what}, another node forwarding | {f50:.2} | {f99:.2} | {:.2} | p50 {}, p99 {} |",
            f50 / o50,
            if f50 <= 1.2 * o50 + 2.0 {
                "met"
            } else {
                "missed"
            },
            if f99 <= 1.2 * o99 + 2.0 {
                "met"
            } else {
                "missed"
            },
        );
    }
}
