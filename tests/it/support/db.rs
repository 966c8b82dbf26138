//! The two backends, each test on a database of its own.

use sqlx::Connection;

#[derive(Clone, Debug)]
pub enum Backend {
    Sqlite,
    /// The server URL from LAB_TEST_DATABASE_URL.
    Postgres(String),
}

impl Backend {
    /// PostgreSQL at LAB_TEST_DATABASE_URL. Without it the test fails: a
    /// PostgreSQL test that did not run must not pass. (`cargo nextest run`
    /// leaves these tests out, and reports them as skipped.)
    pub fn postgres() -> Backend {
        match std::env::var("LAB_TEST_DATABASE_URL") {
            Ok(url) if !url.is_empty() => Backend::Postgres(url),
            _ => panic!(
                "LAB_TEST_DATABASE_URL is not set, so this PostgreSQL test cannot run. \
                 Start a throw-away server with `eval \"$(.ci/start-postgres)\"`, then \
                 `cargo nextest run --profile postgres`; plain `cargo nextest run` \
                 skips the PostgreSQL tests."
            ),
        }
    }

    /// A database URL for one test: None means the server's default (SQLite
    /// in its data dir); for PostgreSQL a new, empty database.
    pub async fn fresh_url(&self) -> Option<String> {
        match self {
            Backend::Sqlite => None,
            Backend::Postgres(url) => Some(fresh_pg_database(url).await),
        }
    }
}

/// Creates `lab_t_<random>` on the server at `url` and returns its URL.
pub async fn fresh_pg_database(url: &str) -> String {
    let name = format!("lab_t_{}", lab::auth::new_token().get(..16).unwrap());
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .expect("connect to LAB_TEST_DATABASE_URL");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .expect("create a test database");
    conn.close().await.ok();
    let (base, _) = url.rsplit_once('/').expect("a database URL with a path");
    format!("{base}/{name}")
}
