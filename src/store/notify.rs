//! How PostgreSQL nodes hear each other's writes to the cached rows (ADR 11).
//!
//! A write that can change a cached row sends `NOTIFY lab_cache` inside its
//! own transaction, so the notification exists exactly when the write
//! committed. Each node keeps one listening connection, on a one-connection
//! pool of its own; every write's notification empties its cache.
//!
//! The cache is on only while that connection is known to hear: after
//! `LISTEN`, the listener sends itself a probe (`pg_notify` with a payload of
//! its own) and turns the cache on when the probe comes back. After
//! [`HEARTBEAT`] without hearing anything it probes again; a probe not heard
//! back within [`ANSWER_WITHIN`], or a failed connection, turns the cache
//! off. That catches a dead or half-open socket, a frozen server process,
//! and a pooler that accepts `LISTEN` but does not deliver. A notification
//! sent while a node was deaf is therefore never needed: that node's cache
//! was off, and is emptied when it turns back on.

use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::time::Instant;

use super::cache::Cache;

/// The channel every cache-changing write notifies.
pub const CHANNEL: &str = "lab_cache";

/// The statement a write runs in its transaction to tell the other nodes
/// (an empty payload: a write).
pub const NOTIFY: &str = "NOTIFY lab_cache";

/// How a probe's payload starts.
const PROBE: &str = "probe:";

/// The listener's probe: it notifies itself, on its own connection, and must
/// hear that back (named, so an operator can tell it apart in
/// `pg_stat_activity`).
pub const HEARTBEAT_SQL: &str = "SELECT pg_notify('lab_cache', $1) AS lab_cache_listener";

/// How long the listener may hear nothing before it probes.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// How soon a probe must be heard back (and connecting and `LISTEN` must
/// finish) before the connection counts as deaf.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// How long to wait before listening again after a failure.
const RETRY: Duration = Duration::from_millis(500);

/// Listens for other nodes' writes while the store lives: the task ends when
/// `pool` (the store's) is closed or the cache is gone, and the cache is off
/// whenever the task is not listening, however it ended.
pub fn spawn_listener(pool: PgPool, cache: &Arc<Cache>) {
    let cache = Arc::downgrade(cache);
    tokio::spawn(async move {
        let _off = OffWhenDone(cache.clone());
        let mut failures = 0u32;
        while !pool.is_closed() && cache.strong_count() > 0 {
            let outcome = tokio::select! {
                _ = pool.close_event() => return,
                outcome = listen(&pool, &cache, &mut failures) => outcome,
            };
            if let Some(c) = cache.upgrade() {
                c.turn_off();
            }
            match outcome {
                Ok(()) => return,
                Err(e) => {
                    // Say it once per outage, not every retry.
                    if failures == 0 {
                        tracing::warn!(error = %e, "the resolve cache is off: this node cannot hear the other nodes' writes");
                    } else {
                        tracing::debug!(error = %e, "the cache listener failed again");
                    }
                    failures += 1;
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    });
}

/// Turns the cache off when the listener task ends, also by cancellation.
struct OffWhenDone(Weak<Cache>);

impl Drop for OffWhenDone {
    fn drop(&mut self) {
        if let Some(c) = self.0.upgrade() {
            c.turn_off();
        }
    }
}

/// One listening connection's life: `Ok` when the cache is gone, `Err` when
/// the connection failed or stopped hearing.
async fn listen(pool: &PgPool, cache: &Weak<Cache>, failures: &mut u32) -> Result<(), sqlx::Error> {
    // A pool of its own for each attempt: a connection lost to a frozen
    // server can then hang in sqlx's clean-up without holding one of the
    // store's connections, or this listener's next one.
    let own = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(ANSWER_WITHIN)
        .connect_lazy_with((*pool.connect_options()).clone());
    let deadline = Instant::now() + ANSWER_WITHIN;
    let mut listener = by(deadline, PgListener::connect_with(&own)).await?;
    // Reconnecting is the caller's job, so that the cache is off while
    // nobody listens.
    listener.eager_reconnect(false);
    by(deadline, listener.listen(CHANNEL)).await?;
    let probe = new_probe();
    probe_round(&mut listener, &probe, cache).await?;
    match cache.upgrade() {
        Some(c) => c.turn_on(),
        None => return Ok(()),
    }
    if *failures > 0 {
        tracing::info!("the resolve cache is on again");
        *failures = 0;
    }
    loop {
        match tokio::time::timeout(HEARTBEAT, next(&mut listener)).await {
            Ok(heard) => {
                if heard? == Heard::Write && !empty(cache) {
                    return Ok(());
                }
            }
            Err(_silent) => probe_round(&mut listener, &probe, cache).await?,
        }
        if cache.strong_count() == 0 {
            return Ok(());
        }
    }
}

/// Notifies ourselves and waits for it to come back: proof that the
/// connection is alive and still listening. Whatever arrives meanwhile is
/// handled as usual.
async fn probe_round(
    listener: &mut PgListener,
    probe: &str,
    cache: &Weak<Cache>,
) -> Result<(), sqlx::Error> {
    let deadline = Instant::now() + ANSWER_WITHIN;
    let ask = sqlx::query(HEARTBEAT_SQL).bind(probe);
    by(deadline, ask.execute(&mut *listener)).await?;
    loop {
        match by(deadline, next(listener)).await? {
            Heard::Probe(p) if p == probe => {
                if let Some(c) = cache.upgrade() {
                    c.probed();
                }
                return Ok(());
            }
            Heard::Probe(_) => {}
            Heard::Write => {
                empty(cache);
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Heard {
    /// A write: the cache must be emptied.
    Write,
    /// A node's probe (its payload): proof that this connection hears.
    Probe(String),
}

async fn next(listener: &mut PgListener) -> Result<Heard, sqlx::Error> {
    match listener.try_recv().await? {
        Some(n) if n.payload().starts_with(PROBE) => Ok(Heard::Probe(n.payload().to_owned())),
        Some(_) => Ok(Heard::Write),
        None => Err(sqlx::Error::Protocol(
            "the listening connection was lost".into(),
        )),
    }
}

/// `fut`, failed if it has not finished by `deadline`.
async fn by<T>(
    deadline: Instant,
    fut: impl std::future::Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, sqlx::Error> {
    tokio::time::timeout_at(deadline, fut)
        .await
        .unwrap_or_else(|_| {
            Err(sqlx::Error::Protocol(format!(
                "the listening connection did not answer within {ANSWER_WITHIN:?}"
            )))
        })
}

/// Empties the cache; `false` when it is gone.
fn empty(cache: &Weak<Cache>) -> bool {
    cache.upgrade().map(|c| c.invalidate()).is_some()
}

/// This listener's own probe payload.
fn new_probe() -> String {
    let mut b = [0u8; 8];
    // A failed random source only makes probes of two nodes alike, which
    // can end one wait early, not make a deaf node look hearing: any probe
    // heard proves the connection hears.
    let _ = getrandom::fill(&mut b);
    format!("{PROBE}{}", hex::encode(b))
}
