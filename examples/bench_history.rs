//! AFK history benchmark: what a long AFK history costs the scheduler and
//! the ledger. In one invocation, per database:
//!
//! - **tick reads**, the claim-table reads of one settle and one tick over
//!   20 repos (each repo's blocking issues, a claim attempt on a taken
//!   issue, this node's live claims and outcomes to tell), timed with no
//!   history (the baseline), then after CLAIMS ended and told claims, with
//!   migration 0005's indexes and again with them dropped (as before 0005);
//! - **the ledger**, counted by the database (now) against reading the
//!   newest 100 000 claims and counting them in memory (before), over the
//!   same history.
//!
//! cargo run --release --example bench_history [CLAIMS] [ROUNDS]
//!
//! SQLite in a temp dir; also PostgreSQL when LAB_BENCH_DATABASE_URL names a
//! server it may create a database on. On PostgreSQL the history is
//! vacuumed and analysed before it is timed, as autovacuum would.

use std::collections::BTreeMap;
use std::time::Instant;

use lab::domain::Outcome;
use lab::store::{ClaimResult, LedgerBy, Store};

mod common;
use common::{fresh_pg, median};

const REPOS: usize = 20;

/// The baseline: the old in-memory ledger over the newest 100 000 claims.
async fn in_memory(store: &Store) -> usize {
    let claims = store.claims(100_000).await.unwrap();
    let mut groups: BTreeMap<(u8, String, String), (usize, Vec<f64>)> = BTreeMap::new();
    for c in claims.iter().filter(|c| c.run_id.is_some()) {
        let keys = [
            (0, c.repo_name.clone(), String::new()),
            (
                1,
                c.model.clone().unwrap_or_default(),
                c.effort.clone().unwrap_or_default(),
            ),
        ];
        for k in keys {
            let g = groups.entry(k).or_default();
            g.0 += 1;
            if let (Some(a), Some(b)) = (c.started_at, c.ended_at) {
                g.1.push((b - a) as f64);
            }
        }
    }
    for (_, d) in groups.values_mut() {
        if !d.is_empty() {
            median(d);
        }
    }
    groups.len()
}

async fn in_database(store: &Store) -> usize {
    let (r, m) = tokio::try_join!(
        store.afk_ledger(LedgerBy::Repo),
        store.afk_ledger(LedgerBy::Model)
    )
    .unwrap();
    r.len() + m.len()
}

/// The claim-table reads of one settle and one tick; returns ms.
async fn tick_reads(store: &Store, repos: &[lab::repo::Repo]) -> f64 {
    let t = Instant::now();
    store.active_claims("bench").await.unwrap();
    store.claims_to_relabel("bench").await.unwrap();
    for r in repos {
        store.blocked_issues(r.id).await.unwrap();
        let taken = try_claim(store, r, 0).await;
        assert_eq!(taken, ClaimResult::IssueTaken);
    }
    t.elapsed().as_secs_f64() * 1e3
}

async fn time_tick_reads(store: &Store, repos: &[lab::repo::Repo], rounds: usize) -> f64 {
    let mut ms = Vec::new();
    for _ in 0..rounds {
        ms.push(tick_reads(store, repos).await);
    }
    median(&mut ms)
}

/// One claim attempt for issue `n` of `r`, with caps that never bind.
async fn try_claim(store: &Store, r: &lab::repo::Repo, n: i64) -> ClaimResult {
    store
        .claim_issue(
            r.id,
            &r.name,
            n,
            "bench",
            1_000_000,
            1_000_000,
            lab::store::now_ms(),
        )
        .await
        .unwrap()
}

/// Claims issue `n` of `r` with a run that ended with `outcome`; `told`
/// marks the outcome as told on the issue (as the scheduler does).
async fn claim(store: &Store, r: &lab::repo::Repo, n: i64, outcome: Option<Outcome>, told: bool) {
    let ClaimResult::Claimed(c) = try_claim(store, r, n).await else {
        panic!("claim {n} of {} refused", r.name);
    };
    let (m, e) = [
        ("sonnet", "high"),
        ("opus", "max"),
        ("gpt-5", "low"),
        ("opus", "low"),
    ][n as usize % 4];
    store.attach_run(c.id, n, m, e).await.unwrap();
    if let Some(o) = outcome {
        store.finish_claim(c.id, o, "").await.unwrap();
        if told {
            store.mark_relabelled(c.id).await.unwrap();
        }
    }
}

async fn drop_indexes(url: &str) {
    use sqlx::Connection;
    let sql =
        "DROP INDEX afk_claims_blocking; DROP INDEX afk_claims_to_tell; DROP INDEX afk_claims_live";
    if url.starts_with("postgres") {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::raw_sql(sql).execute(&mut c).await.unwrap();
    } else {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::raw_sql(sql).execute(&mut c).await.unwrap();
    }
}

async fn bench(label: &str, url: &str, claims: usize, rounds: usize) {
    let store = Store::connect(url).await.unwrap();
    store.migrate().await.unwrap();
    let mut repos = Vec::new();
    for i in 0..REPOS {
        let r = lab::repo::create(&lab::repo::RepoPatch {
            name: lab::domain::Change::Set(format!("r{i}")),
            path: lab::domain::Change::Set(format!("/srv/r{i}")),
            ..Default::default()
        })
        .unwrap();
        let r = store.create_repo(&r).await.unwrap();
        // Each repo has a live AFK run (issue 0) and an outcome to tell (1).
        claim(&store, &r, 0, None, false).await;
        claim(&store, &r, 1, Some(Outcome::Failed), false).await;
        repos.push(r);
    }
    let empty = time_tick_reads(&store, &repos, rounds).await;
    let t0 = Instant::now();
    for i in 0..claims {
        let outcome = Outcome::ALL[i % 3];
        claim(&store, &repos[i % REPOS], 2 + i as i64, Some(outcome), true).await;
    }
    eprintln!(
        "{label}: {claims} claims of history written in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    if url.starts_with("postgres") {
        // What autovacuum does on a live server after this many writes: the
        // old versions of each claim's row leave the indexes.
        use sqlx::Connection;
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::raw_sql("VACUUM ANALYZE afk_claims")
            .execute(&mut c)
            .await
            .unwrap();
    }
    let indexed = time_tick_reads(&store, &repos, rounds).await;
    let (mut old, mut new) = (Vec::new(), Vec::new());
    let (mut g_old, mut g_new) = (0, 0);
    for _ in 0..rounds {
        let t = Instant::now();
        g_old = in_memory(&store).await;
        old.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        g_new = in_database(&store).await;
        new.push(t.elapsed().as_secs_f64() * 1e3);
    }
    assert_eq!(g_old, g_new, "both ledgers have the same groups");
    let (o, n) = (median(&mut old), median(&mut new));
    store.close().await;
    drop_indexes(url).await;
    let store = Store::connect(url).await.unwrap();
    let unindexed = time_tick_reads(&store, &repos, rounds).await;
    println!(
        "| {label} | {claims} | {empty:.2} | {indexed:.2} ({:.2}×) | {unindexed:.2} ({:.2}×) | {o:.2} | {n:.2} ({:.2}×) |",
        indexed / empty,
        unindexed / empty,
        n / o
    );
}
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let claims: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let tmp = tempfile::tempdir().unwrap();
    println!(
        "| database | history (claims) | tick reads, no history (ms) | with history, indexed (ms, ÷ none) | with history, no 0005 indexes (ms, ÷ none) | ledger in memory (ms) | ledger in the database (ms, ÷ memory) |"
    );
    println!("|---|---|---|---|---|---|---|");
    let file = tmp.path().join("lab.db");
    bench(
        "SQLite",
        &format!("sqlite://{}?mode=rwc", file.display()),
        claims,
        rounds,
    )
    .await;
    if let Ok(admin) = std::env::var("LAB_BENCH_DATABASE_URL") {
        bench("PostgreSQL", &fresh_pg(&admin).await, claims, rounds).await;
    }
}
