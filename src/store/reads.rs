//! Connections for the hot single-statement reads (resolve, a run's token,
//! a repo by key), kept beside sqlx's pool.
//!
//! sqlx's pool pings every connection it takes back, so one query through
//! it is two round trips (three with `test_before_acquire`). A read taken
//! from here is one: the connection goes back to the idle list only when its
//! statement finished cleanly. If the statement failed, or the request was
//! dropped mid-statement (a client that hung up), the connection is closed
//! instead, so a half-read reply can never reach the next reader. A
//! PostgreSQL connection idle longer than [`TRUST_IDLE`] is pinged before
//! use, which catches a restarted server without paying a ping per query.

use std::sync::Mutex;
use std::time::Instant;

use sqlx::{Connection, Database, Pool};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::TRUST_IDLE;

/// Up to `size` connections of one backend, opened on demand from `pool`
/// (with its connect options) and detached from it.
pub struct Reads<DB: Database> {
    pool: Pool<DB>,
    /// Ping a connection idle [`TRUST_IDLE`] or longer before use (a socket
    /// can go stale; a SQLite file handle cannot).
    ping_idle: bool,
    slots: Semaphore,
    idle: Mutex<Vec<(DB::Connection, Instant)>>,
}

/// One checked-out connection. Deref to use it; [`ReadConn::keep`] returns
/// it to the idle list, dropping it closes it.
pub struct ReadConn<'a, DB: Database> {
    reads: &'a Reads<DB>,
    conn: Option<DB::Connection>,
    _slot: SemaphorePermit<'a>,
}

impl<DB: Database> Reads<DB> {
    pub fn new(pool: Pool<DB>, size: usize, ping_idle: bool) -> Self {
        Reads {
            pool,
            ping_idle,
            slots: Semaphore::new(size),
            idle: Mutex::new(Vec::with_capacity(size)),
        }
    }

    /// Waits for a free slot and returns a live connection in it.
    pub async fn get(&self) -> Result<ReadConn<'_, DB>, sqlx::Error> {
        let slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match idle {
            Some((mut conn, since)) if self.ping_idle && since.elapsed() >= TRUST_IDLE => {
                if conn.ping().await.is_ok() {
                    conn
                } else {
                    self.open().await?
                }
            }
            Some((conn, _)) => conn,
            None => self.open().await?,
        };
        Ok(ReadConn {
            reads: self,
            conn: Some(conn),
            _slot: slot,
        })
    }

    /// Closes the idle connections; readers still holding one close it when
    /// they finish, and new readers get `PoolClosed`.
    pub fn close(&self) {
        self.slots.close();
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    async fn open(&self) -> Result<DB::Connection, sqlx::Error> {
        Ok(self.pool.acquire().await?.detach())
    }
}

impl<DB: Database> std::fmt::Debug for Reads<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reads")
            .field("free_slots", &self.slots.available_permits())
            .finish_non_exhaustive()
    }
}

impl<DB: Database> ReadConn<'_, DB> {
    /// The statement finished cleanly: the connection may serve the next read.
    pub fn keep(mut self) {
        if self.reads.slots.is_closed() {
            return;
        }
        if let Some(conn) = self.conn.take() {
            self.reads
                .idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((conn, Instant::now()));
        }
    }
}

impl<DB: Database> std::ops::Deref for ReadConn<'_, DB> {
    type Target = DB::Connection;
    fn deref(&self) -> &DB::Connection {
        self.conn
            .as_ref()
            .expect("a ReadConn holds its connection until kept")
    }
}

impl<DB: Database> std::ops::DerefMut for ReadConn<'_, DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        self.conn
            .as_mut()
            .expect("a ReadConn holds its connection until kept")
    }
}

/// Runs one read statement on a connection from the live backend's
/// [`Reads`], bound to `$conn` (a `&mut` connection). `$body` evaluates to a
/// `Result<_, sqlx::Error>`; the macro yields its value or returns the error.
macro_rules! on_read {
    ($store:expr, $conn:ident => $body:expr) => {
        match $store.reads() {
            $crate::store::ReadsOf::Sqlite(reads) => $crate::store::reads::read_on!(reads, $conn => $body),
            $crate::store::ReadsOf::Pg(reads) => $crate::store::reads::read_on!(reads, $conn => $body),
        }
    };
}

/// One arm of [`on_read!`]: the connection is kept only when `$body` is `Ok`.
macro_rules! read_on {
    ($reads:expr, $conn:ident => $body:expr) => {{
        let mut held = $reads.get().await?;
        let $conn = &mut *held;
        let out = $body;
        if out.is_ok() {
            held.keep();
        }
        out?
    }};
}

pub(crate) use {on_read, read_on};

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::sqlite::SqlitePoolOptions;

    async fn reads() -> Reads<sqlx::Sqlite> {
        let pool = SqlitePoolOptions::new()
            .connect("sqlite::memory:")
            .await
            .unwrap();
        Reads::new(pool, 2, false)
    }

    fn idle(reads: &Reads<sqlx::Sqlite>) -> usize {
        reads.idle.lock().unwrap().len()
    }

    #[tokio::test]
    async fn a_clean_read_keeps_its_connection_and_a_dropped_one_closes_it() {
        let reads = reads().await;
        let mut conn = reads.get().await.unwrap();
        let one: (i64,) = sqlx::query_as("SELECT 1")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(one.0, 1);
        conn.keep();
        assert_eq!(idle(&reads), 1, "kept after a clean statement");

        // Taken again (the same one), then dropped without keep: as when a
        // statement failed or its request was cancelled mid-read.
        let conn = reads.get().await.unwrap();
        assert_eq!(idle(&reads), 0);
        drop(conn);
        assert_eq!(idle(&reads), 0, "a connection not kept is closed");
        assert_eq!(reads.slots.available_permits(), 2, "its slot is free again");
    }

    #[tokio::test]
    async fn readers_beyond_the_size_wait_for_a_slot() {
        let reads = reads().await;
        let a = reads.get().await.unwrap();
        let _b = reads.get().await.unwrap();
        let third = tokio::time::timeout(std::time::Duration::from_millis(50), reads.get()).await;
        assert!(third.is_err(), "a third reader waits while two hold slots");
        a.keep();
        let third = tokio::time::timeout(std::time::Duration::from_secs(5), reads.get()).await;
        assert!(
            third.is_ok(),
            "and gets the kept connection once one is back"
        );
    }

    #[tokio::test]
    async fn a_closed_store_keeps_no_connection_and_serves_no_read() {
        let reads = reads().await;
        let held = reads.get().await.unwrap();
        reads.get().await.unwrap().keep();
        assert_eq!(idle(&reads), 1);
        reads.close();
        assert_eq!(idle(&reads), 0);
        held.keep();
        assert_eq!(
            idle(&reads),
            0,
            "a read that ends after the close closes its connection"
        );
        assert!(matches!(reads.get().await, Err(sqlx::Error::PoolClosed)));
    }
}
