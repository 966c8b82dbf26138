//! Scheduler benchmark (issue 5): one AFK tick over 50 repos × 200 open
//! ready issues on the built-in tracker, against a baseline tick over the
//! same 50 repos with no issues, in the same invocation.
//!
//! cargo build --release && cargo run --release --example bench_afk [TICKS]
//!
//! Runs lab in this process (SQLite in a temp dir; also PostgreSQL when
//! LAB_BENCH_DATABASE_URL names a server it may create a database on), with
//! an agent that sleeps. The steady tick is the one lab runs all day once
//! every repo has its live AFK run: settle 50 live claims, then per repo list
//! its 200 ready issues, skip the claimed one, and stop at the repo's cap.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

mod common;
use common::{Api, fresh_pg, git_repo, lab_bin, pct, script};

const REPOS: usize = 50;
const ISSUES: usize = 200;

/// Times `ticks` scheduler ticks; returns (median, p90, max) in ms.
async fn time_ticks(s: &lab::afk::Scheduler, ticks: usize) -> (f64, f64, f64) {
    let mut ms = Vec::with_capacity(ticks);
    for _ in 0..ticks {
        let t0 = Instant::now();
        let r = s.tick().await;
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert!(
            r.launched.is_empty(),
            "a steady tick launched {:?}",
            r.launched
        );
    }
    (pct(&mut ms, 0.5), pct(&mut ms, 0.9), pct(&mut ms, 1.0))
}

async fn bench(label: &str, t: &Path, agent: &Path, database_url: Option<String>, ticks: usize) {
    let cfg = lab::server::ServeConfig {
        data_dir: Some(t.join(format!("data-{label}"))),
        listen: "127.0.0.1:0".into(),
        database_url,
        public_url: None,
        node_url: None,
        node_down_after: 30,
        reconcile_ms: 1000,
        notify_retry_ms: 1000,
        forge_poll_ms: 60_000,
        no_relay: false,
        lab_exe: Some(lab_bin()),
        provider_bins: [("claude-code".parse().unwrap(), agent.to_path_buf())].into(),
        agent_home: Some(t.join("home")),
        run_env: Vec::new(),
        bwrap: None,
        sandbox_ro: Vec::new(),
        sandbox_rw: Vec::new(),
        launch_pause_ms: 0,
        limit_minute_ms: 60_000,
    };
    let running = lab::server::start(&cfg).await.expect("lab starts");
    let api = Api::new(format!("http://{}", running.addr), running.token.clone());
    use reqwest::Method;
    // The background loop must not tick meanwhile: a day between ticks.
    api.send(
        Method::PATCH,
        "/api/v1/settings",
        json!({"afk": {"tick_seconds": 86_400, "max_concurrent": REPOS, "memory_per_run_mb": 0}}),
    )
    .await;
    let mut repo_ids = Vec::new();
    for i in 0..REPOS {
        let path = t.join(format!("repos-{label}/r{i}"));
        if !path.exists() {
            git_repo(&path);
        }
        let r = api
            .send(
                Method::POST,
                "/api/v1/repos",
                json!({"name": format!("r{i}"), "path": path}),
            )
            .await;
        api.send(
            Method::PATCH,
            &format!("/api/v1/repos/r{i}"),
            json!({"afk_enabled": true, "afk_max_concurrent": 1}),
        )
        .await;
        repo_ids.push(r["id"].as_i64().unwrap());
    }
    let s = &running.scheduler;
    let (b50, _, _) = time_ticks(s, ticks).await;

    let labels = vec!["ready-for-agent".to_owned(), "bug".to_owned()];
    for id in &repo_ids {
        for n in 0..ISSUES {
            running
                .store
                .create_issue(
                    *id,
                    &format!("Issue {n}"),
                    "Something to fix.",
                    &labels,
                    &Default::default(),
                )
                .await
                .unwrap();
        }
    }
    // The first tick launches one run per repo (tmux, worktrees): timed
    // apart, it is not the steady state.
    let t0 = Instant::now();
    let first = s.tick().await;
    let launch_ms = t0.elapsed().as_secs_f64() * 1e3;
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    assert_eq!(first.launched.len(), REPOS, "one run per repo");
    let (s50, s90, smax) = time_ticks(s, ticks).await;
    // What the caps spare a steady tick: listing every repo's ready issues,
    // as the tick does for the repos with room.
    let repos = running.store.repos().await.unwrap();
    let mut listing = Vec::with_capacity(ticks);
    for _ in 0..ticks {
        let t0 = Instant::now();
        let all: Vec<&lab::repo::Repo> = repos.iter().collect();
        for ready in s.list_ready(&all).await {
            assert_eq!(ready.unwrap().len(), ISSUES - 1, "all but the claimed one");
        }
        listing.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let l50 = pct(&mut listing, 0.5);

    println!(
        "| {label} | {b50:.2} | {s50:.2} / {s90:.2} / {smax:.2} | {:.2}× | {l50:.2} | {:.2}× | {launch_ms:.0} |",
        s50 / b50,
        (b50 + l50) / b50
    );

    // Issue 14: 100 live AFK runs (two per repo), first without pull
    // requests (the steady tick as it was), then each with an open pull
    // request that the tick watches (budgets, usage limits, the repo's
    // check command's slot).
    api.send(
        Method::PATCH,
        "/api/v1/settings",
        json!({"afk": {"max_concurrent": 2 * REPOS, "memory_per_run_mb": 0}}),
    )
    .await;
    for i in 0..REPOS {
        api.send(
            Method::PATCH,
            &format!("/api/v1/repos/r{i}"),
            json!({"afk_max_concurrent": 2}),
        )
        .await;
    }
    let second = s.tick().await;
    assert!(second.errors.is_empty(), "{:?}", second.errors);
    assert_eq!(second.launched.len(), REPOS, "a second run per repo");
    // Every repo at its cap again: the steady tick of 100 live runs.
    let (u50, _, _) = time_ticks(s, ticks).await;
    for i in 0..REPOS {
        api.send(
            Method::PATCH,
            &format!("/api/v1/repos/r{i}"),
            json!({"check_command": "make check"}),
        )
        .await;
    }
    let claims = running.store.claims(1000).await.unwrap();
    let live: Vec<_> = claims.iter().filter(|c| c.active).collect();
    assert_eq!(live.len(), 2 * REPOS);
    for c in &live {
        let url = format!("http://forge.invalid/pulls/{}", c.id);
        assert!(running.store.set_claim_pr(c.id, &url, c.id).await.unwrap());
    }
    let (w50, w90, wmax) = time_ticks(s, ticks).await;
    println!(
        "| {label}, 100 live runs | {u50:.2} | {w50:.2} / {w90:.2} / {wmax:.2} | {:.2}× |",
        w50 / u50
    );
    for r in api
        .send(Method::GET, "/api/v1/runs", Value::Null)
        .await
        .as_array()
        .unwrap()
    {
        let id = r["id"].as_i64().unwrap();
        api.send(
            Method::POST,
            &format!("/api/v1/runs/{id}/stop"),
            Value::Null,
        )
        .await;
    }
    running.stop().await.unwrap();
}

/// A fresh database on the PostgreSQL server of `admin`.
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    lab::init_tls();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            std::env::var("LAB_LOG").unwrap_or_else(|_| "warn".into()),
        ))
        .with_writer(std::io::stderr)
        .try_init();
    let ticks: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(30);
    lab_bin(); // asserts the release build exists
    let tmp = tempfile::Builder::new()
        .prefix("lab-bench-afk-")
        .tempdir()
        .unwrap();
    let t = tmp.path();
    let agent = t.join("agent");
    script(
        &agent,
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo 0.0.1; exit 0; }\nexec sleep 100000\n",
    );
    println!(
        "{REPOS} repos, {ISSUES} open ready issues each, one live AFK run per repo; {ticks} ticks\n"
    );
    println!(
        "| database | baseline tick, no issues (ms, median) | steady tick (ms, median / p90 / max) | steady ÷ baseline | listing all 50 repos (ms, median) | baseline + listing ÷ baseline | launch tick, 50 runs (ms) |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "\nthen (issue 14), with 100 live runs: | database | steady tick, no pull request (ms, median) | every run's pull request watched (ms, median / p90 / max) | watched ÷ not |\n"
    );
    bench("SQLite", t, &agent, None, ticks).await;
    if let Ok(admin) = std::env::var("LAB_BENCH_DATABASE_URL") {
        let url = fresh_pg(&admin).await;
        bench("PostgreSQL", t, &agent, Some(url), ticks).await;
    }
}
