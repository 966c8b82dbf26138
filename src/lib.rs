//! lab: runs coding-agent CLIs in tmux for the git repositories it manages.
//!
//! See ARCHITECTURE.md for the map of this crate.

// `unsafe` lives in `sys` only (its own allow).
#![deny(unsafe_code)]

pub mod afk;
pub mod app;
pub mod auth;
pub mod cli;
pub mod clock;
pub mod diff;
pub mod doctor;
pub mod domain;
pub mod fleet;
pub mod http;
pub mod issues;
pub mod knob;
pub mod lock;
pub mod notifications;
pub mod provider;
pub mod repo;
pub mod resolve;
pub mod run;
pub mod server;
pub mod service;
pub mod settings;
pub mod state;
pub mod store;
pub mod sys;
pub mod usage;
pub mod validate;
pub mod web;

/// Runs `work` as a task of its own and waits for it. Work that must finish
/// once begun (a stop, a launch, a commit that empties the cache) goes
/// through here: when the caller's future is dropped, as when a client hangs
/// up, the work still runs to its end. A panic in it is the caller's panic.
pub async fn to_the_end<T: Send + 'static>(work: impl Future<Output = T> + Send + 'static) -> T {
    match tokio::spawn(work).await {
        Ok(v) => v,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Installs the TLS crypto provider HTTP clients use (ring). Idempotent;
/// call before building a `reqwest::Client`.
pub fn init_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Sets up logging for the binaries: `LAB_LOG` (or `RUST_LOG`) filters,
/// default `info`.
pub fn init_logging() {
    let filter = std::env::var("LAB_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "info".to_owned());
    let _ = tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .try_init();
}
