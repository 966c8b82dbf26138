//! How PostgreSQL nodes hear each other's writes to the cached rows (ADR 11).
//!
//! A write that can change a cached row sends `NOTIFY lab_cache` inside its
//! own transaction, so the notification exists exactly when the write
//! committed. Each node keeps one listening connection; every write's
//! notification empties its cache. The cache is on only while that
//! connection is known to hear: it is turned on after `LISTEN` succeeded,
//! and turned off the moment the connection fails, or when, after
//! [`HEARTBEAT`] of silence, a probe it sends itself (`pg_notify` with its
//! own payload) is not heard back within [`ANSWER_WITHIN`]. That also
//! catches a pooler that accepts `LISTEN` but does not deliver. A
//! notification sent while a node was deaf is therefore never needed: that
//! node's cache was off, and is emptied when it turns back on.

use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;

use super::cache::Cache;

/// The channel every cache-changing write notifies.
pub const CHANNEL: &str = "lab_cache";

/// The statement a write runs in its transaction to tell the other nodes.
pub const NOTIFY: &str = "NOTIFY lab_cache";

/// How a probe's payload starts (a write's payload is empty).
const PROBE: &str = "probe:";

/// The listener's probe: it notifies itself, on its own connection, and must
/// hear that back (named, so an operator can tell it apart in
/// `pg_stat_activity`).
pub const HEARTBEAT_SQL: &str = "SELECT pg_notify('lab_cache', $1) AS lab_cache_listener";

/// How long the listening connection may hear nothing before it probes.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// How soon a probe must be heard back before the connection counts as deaf.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// How long to wait before listening again after a failure.
const RETRY: Duration = Duration::from_millis(500);

/// Listens for other nodes' writes while the cache lives (the task ends
/// when the store's last handle is gone or the pool is closed).
pub fn spawn_listener(pool: PgPool, cache: &Arc<Cache>) {
    let cache = Arc::downgrade(cache);
    tokio::spawn(async move {
        while !pool.is_closed() && cache.strong_count() > 0 {
            match listen(&pool, &cache).await {
                Ok(()) => return,
                Err(e) => {
                    if let Some(c) = cache.upgrade() {
                        c.turn_off();
                    }
                    if pool.is_closed() {
                        return;
                    }
                    tracing::warn!(error = %e, "cache listener lost its connection; the resolve cache is off until it is back");
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    });
}

/// One listening connection's life: `Ok` when the cache is gone, `Err` when
/// the connection failed or stopped hearing.
async fn listen(pool: &PgPool, cache: &Weak<Cache>) -> Result<(), sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    // Reconnecting is this function's caller's job, so that the cache is
    // off while nobody listens.
    listener.eager_reconnect(false);
    listener.listen(CHANNEL).await?;
    let probe = new_probe();
    match cache.upgrade() {
        Some(c) => c.turn_on(),
        None => return Ok(()),
    }
    loop {
        match tokio::time::timeout(HEARTBEAT, next(&mut listener)).await {
            Ok(heard) => {
                if heard? == Heard::Write && !empty(cache) {
                    return Ok(());
                }
            }
            Err(_silent) => {
                // Nothing heard for a while: notify ourselves and wait for it
                // to come back. That proves the connection is alive and still
                // listening; whatever arrives meanwhile is handled as usual.
                let deadline = tokio::time::Instant::now() + ANSWER_WITHIN;
                let ask = sqlx::query(HEARTBEAT_SQL).bind(&probe);
                by(deadline, ask.execute(&mut listener)).await?;
                loop {
                    match by(deadline, next(&mut listener)).await? {
                        Heard::Probe(p) if p == probe => break,
                        Heard::Probe(_) => {}
                        Heard::Write if !empty(cache) => return Ok(()),
                        Heard::Write => {}
                    }
                }
            }
        }
        if cache.strong_count() == 0 {
            return Ok(());
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
    deadline: tokio::time::Instant,
    fut: impl std::future::Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, sqlx::Error> {
    tokio::time::timeout_at(deadline, fut)
        .await
        .unwrap_or_else(|_| {
            Err(sqlx::Error::Protocol(format!(
                "the listening connection did not hear itself within {ANSWER_WITHIN:?}"
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
    // costs an early end to one wait, not correctness: any probe heard
    // proves the connection hears.
    let _ = getrandom::fill(&mut b);
    format!("{PROBE}{}", hex::encode(b))
}
