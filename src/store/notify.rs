//! How PostgreSQL nodes hear each other's writes to the cached rows (ADR 11).
//!
//! A write that can change a cached row sends `NOTIFY lab_cache` inside its
//! own transaction, so the notification exists exactly when the write
//! committed. Each node keeps one listening connection; every notification
//! empties its cache. The cache is on only while that connection is known to
//! be alive: it is turned on after `LISTEN` succeeded, and turned off the
//! moment the connection fails, or stays silent past [`HEARTBEAT`] and then
//! does not answer a query within [`ANSWER_WITHIN`]. A notification sent
//! while a node was deaf is therefore never needed: that node's cache was
//! off, and is emptied when it turns back on.

use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;

use super::cache::Cache;

/// The channel every cache-changing write notifies.
pub const CHANNEL: &str = "lab_cache";

/// The statement a write runs in its transaction to tell the other nodes.
pub const NOTIFY: &str = "NOTIFY lab_cache";

/// The query that shows the listening connection still answers (named, so
/// an operator can tell it apart in `pg_stat_activity`).
pub const HEARTBEAT_SQL: &str = "SELECT 1 AS lab_cache_listener";

/// How long the listening connection may be silent before it is asked to
/// answer a query.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// How long that query may take before the connection counts as dead.
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
/// the connection failed.
async fn listen(pool: &PgPool, cache: &Weak<Cache>) -> Result<(), sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    // Reconnecting is this function's caller's job, so that the cache is
    // off while nobody listens.
    listener.eager_reconnect(false);
    listener.listen(CHANNEL).await?;
    match cache.upgrade() {
        Some(c) => c.turn_on(),
        None => return Ok(()),
    }
    loop {
        match tokio::time::timeout(HEARTBEAT, listener.try_recv()).await {
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None)) => return Err(sqlx::Error::Protocol("connection lost".into())),
            Ok(Err(e)) => return Err(e),
            Err(_silent) => {
                // Nothing for a while: make sure the connection still
                // answers, which also brings in anything it had pending.
                match tokio::time::timeout(
                    ANSWER_WITHIN,
                    sqlx::query(HEARTBEAT_SQL).execute(&mut listener),
                )
                .await
                {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Err(e),
                    Err(_) => {
                        return Err(sqlx::Error::Protocol(format!(
                            "the listening connection did not answer within {ANSWER_WITHIN:?}"
                        )));
                    }
                }
                if listener.next_buffered().is_none() {
                    if cache.strong_count() == 0 {
                        return Ok(());
                    }
                    continue;
                }
            }
        }
        // A notification (or several): one emptying covers them all.
        while listener.next_buffered().is_some() {}
        match cache.upgrade() {
            Some(c) => c.invalidate(),
            None => return Ok(()),
        }
    }
}
