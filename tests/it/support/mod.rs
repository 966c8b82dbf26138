//! Test support: real servers on 127.0.0.1:0, on SQLite and (when
//! LAB_TEST_DATABASE_URL is set) on a fresh PostgreSQL database.

pub mod agent;
pub mod browser;
pub mod db;
pub mod forge;
pub mod git;
pub mod process;
pub mod real;
pub mod server;

pub use db::Backend;
pub use server::TestServer;

/// Declares one test per backend: `name::sqlite` and `name::postgres`, both
/// calling `async fn name(b: Backend)`.
#[macro_export]
macro_rules! on_both {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name($crate::support::Backend::Sqlite).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    if let Some(b) = $crate::support::Backend::postgres() {
                        super::$name(b).await
                    }
                }
            }
        )+
    };
}

/// The `id` of a run (or any record) in an API answer.
pub fn id(v: &serde_json::Value) -> i64 {
    v["id"].as_i64().expect("an answer with an integer id")
}
