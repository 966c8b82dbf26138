//! The two backends, each test on a database of its own.

use sqlx::Connection;

#[derive(Clone, Debug)]
pub enum Backend {
    Sqlite,
    /// The server URL from LAB_TEST_DATABASE_URL.
    Postgres(String),
}

impl Backend {
    /// PostgreSQL when LAB_TEST_DATABASE_URL is set. When it is not, the test
    /// says so on stderr; with LAB_REQUIRE_POSTGRES=1 (CI) it fails instead.
    pub fn postgres() -> Option<Backend> {
        match std::env::var("LAB_TEST_DATABASE_URL") {
            Ok(url) if !url.is_empty() => Some(Backend::Postgres(url)),
            _ => {
                assert!(
                    std::env::var("LAB_REQUIRE_POSTGRES").is_err(),
                    "LAB_REQUIRE_POSTGRES is set but LAB_TEST_DATABASE_URL is not"
                );
                eprintln!("SKIPPED on PostgreSQL: LAB_TEST_DATABASE_URL is not set");
                None
            }
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
