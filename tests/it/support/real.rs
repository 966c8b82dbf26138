//! The real agent CLIs (LAB_REAL_CLAUDE, LAB_REAL_CODEX: paths to the
//! pinned binaries, set by `.ci/install-real-clis`). The tests that use them
//! live in the modules `real_cli` and `contract`, which `cargo nextest run`
//! leaves out (and reports as skipped); `--profile ci` runs them.

use std::path::PathBuf;

/// The pinned CLI of `provider`. Without it the test fails: a real-CLI test
/// that did not run must not pass.
pub fn cli(provider: &str) -> PathBuf {
    let var = match provider {
        "claude-code" => "LAB_REAL_CLAUDE",
        "codex" => "LAB_REAL_CODEX",
        other => panic!("no real CLI for {other}"),
    };
    match std::env::var_os(var).map(PathBuf::from) {
        Some(p) if p.exists() => p,
        _ => panic!(
            "{var} does not name a binary, so this real-CLI test cannot run. \
             Install the pinned CLIs with `eval \"$(.ci/install-real-clis)\"` and \
             start PostgreSQL with `eval \"$(.ci/start-postgres)\"`, then \
             `cargo nextest run --profile ci`; plain `cargo nextest run` skips the \
             real-CLI tests."
        ),
    }
}
