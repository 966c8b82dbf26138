//! Test support: real servers on 127.0.0.1:0, on SQLite and on a fresh
//! PostgreSQL database (LAB_TEST_DATABASE_URL), the one API client (`api`)
//! and the one way to wait for something (`wait`).
//!
//! Naming is what selects tests (`.config/nextest.toml`): every PostgreSQL
//! test is a `…::postgres` (declared by `on_both!` or `on_postgres!`), and
//! every test of the real agent CLIs is in `real_cli` or `contract`.

pub mod agent;
pub mod api;
pub mod browser;
mod counters;
pub mod db;
pub mod forge;
pub mod git;
pub mod model;
pub mod process;
pub mod real;
pub mod server;
pub mod wait;

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
                    super::$name($crate::support::Backend::postgres()).await
                }
            }
        )+
    };
}

/// Declares a test of what only PostgreSQL has (several nodes, `LISTEN`):
/// `name::postgres`, calling `async fn name(b: Backend)`.
#[macro_export]
macro_rules! on_postgres {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name($crate::support::Backend::postgres()).await
                }
            }
        )+
    };
}

/// The `id` of a run (or any record) in an API answer.
pub fn id(v: &serde_json::Value) -> i64 {
    v["id"].as_i64().expect("an answer with an integer id")
}

/// A loopback URL whose connections are refused for as long as the
/// returned socket lives: a TCP socket bound to a port of its own and never
/// listening. No test depends on a fixed port being free.
pub fn refused_url() -> (std::os::fd::OwnedFd, String) {
    use rustix::net::{AddressFamily, SocketAddrAny, SocketType, bind, getsockname, socket};
    let sock = socket(AddressFamily::INET, SocketType::STREAM, None).expect("a socket");
    bind(&sock, &std::net::SocketAddr::from(([127, 0, 0, 1], 0))).expect("bound");
    let addr = getsockname(&sock).expect("its address");
    let port = std::net::SocketAddr::try_from(addr)
        .map(|a: std::net::SocketAddr| a.port())
        .unwrap_or_else(
            |_: <std::net::SocketAddr as TryFrom<SocketAddrAny>>::Error| panic!("an IPv4 address"),
        );
    (sock, format!("http://127.0.0.1:{port}"))
}
