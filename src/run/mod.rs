//! Runs: one life of an agent CLI in one tmux session, its workspace, and
//! the loop that keeps run states true.
//!
//! Invariant: agent processes are started only by [`tmux`] (through the exec
//! shim in [`exec`]); git is started only by [`git`]; processes are
//! signalled only by [`proctree`].

pub mod agent_config;
mod agent_seen;
mod attention;
/// A run as a reconcile pass sees it, for the unit tests of other modules.
#[cfg(test)]
pub(crate) use attention::tests::run as test_run;
pub mod busy;
pub mod cgroup;
pub mod check;
pub mod cli_check;
mod confine;
pub mod diff;
pub mod disk;
pub mod env;
pub mod exec;
pub mod git;
mod launch;
mod launch_file;
mod launches;
pub mod log;
pub mod log_text;
mod log_watch;
pub mod merge;
mod on_path;
mod pane_watch;
pub mod proctree;
mod pty;
mod reconcile;
pub mod relay;
mod repo_file;
mod resume;
mod runner;
pub mod sandbox;
pub mod screen;
pub mod tmux;
mod transcript;
mod transcript_read;
mod usage;
mod wakes;
pub mod workspace;

pub use confine::{Unconfined, Unsandboxed};
pub use launch::{LaunchError, LaunchRequest, LaunchTimings};
pub use reconcile::{FULL_EVERY, PANES_EVERY, PassReport};
pub use resume::{NotResumable, RESUME_PROMPT};
pub use runner::{Conflict, RunError, Runner, RunnerConfig};

/// What leaves lab when an operation on a run's data fails (ADR 24): a
/// fixed message naming what failed, and an id. The detail, which may hold
/// bytes the run wrote (git's error text quotes the files it read), goes
/// only to lab's log, under that id; never to a run's token, an issue
/// comment or a forge.
pub fn withheld(run: i64, what: &str, detail: &str) -> String {
    let mut b = [0u8; 4];
    let _ = getrandom::fill(&mut b);
    let id = hex::encode(b);
    tracing::warn!(run, error_id = %id, what, detail, "an operation on a run's data failed");
    format!("{what} failed (error {id}; the detail is in lab's log)")
}

/// A new session id for an agent CLI: a random (version 4) UUID.
pub fn new_session_id() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source failed");
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// The tmux session name of a run: made by lab, never taken from input.
/// Only `[a-z0-9_-]` reach tmux, so no name is read as a format, a target
/// pattern or a separator.
pub fn session_name(repo: &str, id: i64) -> String {
    let clean: String = repo
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    format!("{SESSION_PREFIX}{id}-{clean}")
}

pub const SESSION_PREFIX: &str = "lab-";

/// The run id inside a session name lab made, if it is one.
pub fn session_run_id(session: &str) -> Option<i64> {
    let rest = session.strip_prefix(SESSION_PREFIX)?;
    let (id, _) = rest.split_once('-')?;
    id.parse().ok()
}

/// The branch a run works on.
pub fn branch_name(id: i64) -> String {
    format!("lab/run-{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_v4_uuids() {
        let a = new_session_id();
        assert_eq!(a.len(), 36);
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"));
        assert_ne!(a, new_session_id());
    }

    #[test]
    fn session_names_are_clean_and_carry_the_run_id() {
        assert_eq!(session_name("My.Repo_x", 42), "lab-42-my_repo_x");
        assert_eq!(session_run_id("lab-42-my_repo_x"), Some(42));
        assert_eq!(session_run_id("lab-x-y"), None);
        assert_eq!(session_run_id("other"), None);
        let long = session_name(&"a".repeat(100), 1);
        assert!(long.len() < 50);
    }
}
