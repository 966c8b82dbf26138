//! The store: lab's state in SQLite (the embedded default) or PostgreSQL.
//!
//! One [`Store`] serves both backends. The backend is picked once, from the
//! URL, at start-up; every query is the same SQL text with `$n` placeholders,
//! run on whichever pool is live (see [`on_db!`]). Each backend has its own
//! migrations folder, embedded in the binary and applied by `lab serve`.
//!
//! Invariant: write transactions on SQLite start with `BEGIN IMMEDIATE`, so
//! two writers queue on the lock instead of failing with "database is locked".

mod afk;
mod cache;
mod column;
mod issues;
mod ledger;
mod nodes;
mod notify;
mod outbox;
mod plans;
mod pulls;
mod reads;
mod repos;
mod resume;
mod reviews;
mod run_row;
mod runs;
mod sessions;
mod settings;
mod usage;
mod written;

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::validate::Invalid;

pub use afk::{Claim, ClaimResult};
pub use cache::{CacheStats, Counts};
pub use issues::{CommentRow, IssueRow, NewPullRow, PullRow};
pub use ledger::{LedgerBy, LedgerCount};
pub use outbox::{Due, OUTCOME_WAIT_MS};
pub use pulls::PullMerge;
pub use repos::RepoKey;
pub use reviews::ReviewOf;
pub use runs::{Ending, NewRun, RunFilter, RunPlaces};
pub use sessions::WebSession;
pub use usage::UsageRead;
pub use written::Written;

pub(crate) use reads::on_read;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("stored data is unreadable: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The live pool.
#[derive(Clone, Debug)]
pub enum Db {
    Sqlite(SqlitePool),
    Pg(PgPool),
}

/// The hot-read connections of the live backend (see `reads.rs`).
#[derive(Debug)]
pub enum ReadsOf {
    Sqlite(reads::Reads<sqlx::Sqlite>),
    Pg(reads::Reads<sqlx::Postgres>),
}

/// How many hot-read connections a store keeps at most: enough to keep two
/// cores busy while some wait on the database.
const READ_CONNS: usize = 8;

/// Runs the same body on whichever pool is live. `$pool` is bound to the
/// concrete pool, so `query(...).bind(...)` works unchanged on both.
macro_rules! on_db {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            $crate::store::Db::Sqlite($pool) => $body,
            $crate::store::Db::Pg($pool) => $body,
        }
    };
}

/// Runs the body in a write transaction bound to `$tx`, committing when it
/// returns `Ok`. SQLite takes the write lock up front (`BEGIN IMMEDIATE`);
/// on PostgreSQL, the optional `pg_lock` statement runs first (a
/// `SELECT … FOR UPDATE` that serialises read-modify-write transactions).
/// With `changes: cache`, the transaction changes rows the resolve cache
/// holds (ADR 11): on PostgreSQL it also notifies the other nodes, and it
/// commits through [`commit_changes`], which empties this node's cache.
macro_rules! in_tx {
    ($db:expr, $tx:ident => $body:expr) => {
        in_tx!($db, $tx, pg_lock: "" => $body)
    };
    ($db:expr, $tx:ident, pg_lock: $lock:expr => $body:expr) => {
        in_tx!(@run $db, $tx, $lock, None => $body)
    };
    ($db:expr, $tx:ident, pg_lock: $lock:expr, changes: $cache:expr => $body:expr) => {
        in_tx!(@run $db, $tx, $lock, Some($cache) => $body)
    };
    (@run $db:expr, $tx:ident, $lock:expr, $cache:expr => $body:expr) => {
        match $db {
            $crate::store::Db::Sqlite(pool) => {
                let mut $tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                let out = $body;
                if out.is_ok() {
                    match $cache {
                        Some(cache) => $crate::store::commit_changes($tx, cache).await?,
                        None => $tx.commit().await?,
                    }
                }
                out
            }
            $crate::store::Db::Pg(pool) => {
                let mut $tx = pool.begin().await?;
                let lock: &'static str = $lock;
                if !lock.is_empty() {
                    sqlx::query(lock).execute(&mut *$tx).await?;
                }
                let out = $body;
                if out.is_ok() {
                    match $cache {
                        Some(cache) => {
                            sqlx::query($crate::store::notify::NOTIFY).execute(&mut *$tx).await?;
                            $crate::store::commit_changes($tx, cache).await?
                        }
                        None => $tx.commit().await?,
                    }
                }
                out
            }
        }
    };
}

/// Commits a transaction that changed cached rows, then empties this node's
/// cache, in a task of its own: a caller dropped mid-commit (a client that
/// hung up) cannot leave the commit landed and the cache unemptied. A commit
/// that failed may still have landed, so the cache is emptied either way.
pub(crate) async fn commit_changes<DB: sqlx::Database>(
    tx: sqlx::Transaction<'static, DB>,
    cache: &std::sync::Arc<cache::Cache>,
) -> Result<()> {
    let cache = cache.clone();
    crate::to_the_end(async move {
        let done = tx.commit().await;
        cache.invalidate();
        done
    })
    .await?;
    Ok(())
}

pub(crate) use {in_tx, on_db};

/// How long a pooled PostgreSQL connection may sit idle and still be used
/// without a ping first.
const TRUST_IDLE: Duration = Duration::from_secs(2);

/// Pings a PostgreSQL connection before use only when it has been idle a
/// while (a restarted server or a dropped socket shows up there), so a busy
/// server pays no extra round trip per query. sqlx's own
/// `test_before_acquire` pings on every checkout, and the pool already pings
/// on every return, which together would make one query three round trips.
async fn ping_if_idle(
    conn: &mut sqlx::PgConnection,
    meta: sqlx::pool::PoolConnectionMetadata,
) -> std::result::Result<bool, sqlx::Error> {
    use sqlx::Connection as _;
    if meta.idle_for < TRUST_IDLE {
        return Ok(true);
    }
    Ok(conn.ping().await.is_ok())
}

/// lab's state.
#[derive(Clone, Debug)]
pub struct Store {
    db: Db,
    reads: std::sync::Arc<ReadsOf>,
    cache: std::sync::Arc<cache::Cache>,
    /// This process's writes, announced by kind (any clone of this store).
    written: std::sync::Arc<written::Announcer>,
}

impl Store {
    /// Opens the database at `url` (`sqlite://…` or `postgres://…`).
    pub async fn connect(url: &str) -> Result<Store> {
        let db = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let opts = PgConnectOptions::from_str(url)?;
            Db::Pg(
                PgPoolOptions::new()
                    .max_connections(16)
                    .acquire_timeout(Duration::from_secs(10))
                    .test_before_acquire(false)
                    .before_acquire(|conn, meta| Box::pin(ping_if_idle(conn, meta)))
                    .connect_with(opts)
                    .await?,
            )
        } else if url.starts_with("sqlite:") {
            return Self::connect_sqlite(SqliteConnectOptions::from_str(url)?).await;
        } else {
            return Err(StoreError::Db(sqlx::Error::Configuration(
                format!(
                    "unsupported database URL '{}': use sqlite://PATH or postgres://…",
                    crate::validate::shown(url)
                )
                .into(),
            )));
        };
        Ok(Store::with_db(db))
    }

    /// Opens (creating it if needed) the SQLite database in this file.
    pub async fn open_sqlite_file(path: &std::path::Path) -> Result<Store> {
        Self::connect_sqlite(SqliteConnectOptions::new().filename(path)).await
    }

    async fn connect_sqlite(opts: SqliteConnectOptions) -> Result<Store> {
        let opts = opts
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        // A SQLite connection is a file handle in this process: it cannot go
        // stale the way a socket can, so it is never tested before use.
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .test_before_acquire(false)
            .connect_with(opts)
            .await?;
        Ok(Store::with_db(Db::Sqlite(pool)))
    }

    /// Applies the embedded migrations of the live backend.
    pub async fn migrate(&self) -> Result<()> {
        match &self.db {
            Db::Sqlite(pool) => sqlx::migrate!("migrations/sqlite").run(pool).await?,
            Db::Pg(pool) => {
                sqlx::migrate!("migrations/postgres").run(pool).await?;
                // A migration may change cached rows: other nodes forget
                // theirs (a rolling upgrade runs it while they serve).
                sqlx::query(notify::NOTIFY).execute(pool).await?;
            }
        }
        self.cache.invalidate();
        Ok(())
    }

    /// How many embedded migrations the database has not applied.
    pub async fn pending_migrations(&self) -> Result<usize> {
        macro_rules! pending {
            ($pool:expr, $m:expr) => {{
                sqlx::query("SELECT 1").execute($pool).await?;
                let applied: Vec<(i64,)> =
                    sqlx::query_as("SELECT version FROM _sqlx_migrations WHERE success")
                        .fetch_all($pool)
                        .await
                        .unwrap_or_default();
                $m.iter()
                    .filter(|m| !applied.iter().any(|(v,)| *v == m.version))
                    .count()
            }};
        }
        Ok(match &self.db {
            Db::Sqlite(pool) => pending!(pool, sqlx::migrate!("migrations/sqlite")),
            Db::Pg(pool) => pending!(pool, sqlx::migrate!("migrations/postgres")),
        })
    }

    pub fn backend(&self) -> &'static str {
        match &self.db {
            Db::Sqlite(_) => "sqlite",
            Db::Pg(_) => "postgres",
        }
    }

    /// A SQLite store is this process's alone, so its cache hears every
    /// write from the start; a PostgreSQL store's cache is on only while its
    /// listener hears the other nodes (`notify.rs`).
    fn with_db(db: Db) -> Store {
        let (reads, cache) = match &db {
            Db::Sqlite(pool) => (
                ReadsOf::Sqlite(reads::Reads::new(pool.clone(), READ_CONNS, false)),
                std::sync::Arc::new(cache::Cache::on()),
            ),
            Db::Pg(pool) => {
                let cache = std::sync::Arc::new(cache::Cache::off());
                notify::spawn_listener(pool.clone(), &cache);
                (
                    ReadsOf::Pg(reads::Reads::new(pool.clone(), READ_CONNS, true)),
                    cache,
                )
            }
        };
        Store {
            db,
            reads: std::sync::Arc::new(reads),
            cache,
            written: Default::default(),
        }
    }

    /// How often the resolve cache answered a read, and how often it could
    /// not (ADR 11).
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    pub(crate) fn reads(&self) -> &ReadsOf {
        &self.reads
    }

    pub async fn close(&self) {
        match self.reads() {
            ReadsOf::Sqlite(reads) => reads.close(),
            ReadsOf::Pg(reads) => reads.close(),
        }
        on_db!(&self.db, pool => pool.close().await)
    }
}

/// Milliseconds since the Unix epoch: how lab stores times.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Maps a unique-constraint violation to a conflict with this message.
pub(crate) fn conflict_on_unique(e: sqlx::Error, message: impl FnOnce() -> String) -> StoreError {
    match &e {
        sqlx::Error::Database(d) if d.is_unique_violation() => StoreError::Conflict(message()),
        _ => StoreError::Db(e),
    }
}

fn parse_options(field: &str, json: &str) -> Result<std::collections::BTreeMap<String, String>> {
    serde_json::from_str(json).map_err(|e| StoreError::Corrupt(format!("{field}: {e}")))
}

/// A stored set of knobs (issue 27), checked again as it is read. A knob
/// that left the registry, or a value that no longer fits its type, is left
/// out (and logged): the row still loads, and the knob takes the next
/// layer's value, as if it were unset here.
fn knobs_column(field: &str, json: &str) -> Result<crate::knob::Set> {
    let object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(json).map_err(|e| StoreError::Corrupt(format!("{field}: {e}")))?;
    let mut set = crate::knob::Set::new();
    for (key, raw) in object {
        let one = serde_json::Map::from_iter([(key.clone(), raw)]);
        match crate::knob::parse(field, &crate::knob::Input::Json(one)) {
            Ok(v) => set.extend(v),
            Err(e) => {
                tracing::warn!(field, key, error = %e, "a stored knob no longer fits; left out")
            }
        }
    }
    Ok(set)
}

fn knobs_json(set: &crate::knob::Set) -> String {
    serde_json::to_string(set).unwrap_or_else(|_| "{}".to_owned())
}

/// A plan or review run's own defaults from their three columns.
fn kind_defaults(
    field: &str,
    model_default: Option<String>,
    effort_default: Option<String>,
    options: &str,
) -> Result<crate::domain::KindDefaults> {
    Ok(crate::domain::KindDefaults {
        model_default,
        effort_default,
        options: parse_options(field, options)?,
    })
}

fn options_json(o: &std::collections::BTreeMap<String, String>) -> String {
    serde_json::to_string(o).unwrap_or_else(|_| "{}".to_owned())
}
