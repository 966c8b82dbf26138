//! Runs: one life of an agent CLI in one tmux session, its workspace, and
//! the loop that keeps run states true.
//!
//! Invariant: agent processes are started only by [`tmux`] (through the exec
//! shim in [`exec`]); git runs only in [`workspace`]; processes are signalled
//! only by [`proctree`].

pub mod agent_config;
pub mod busy;
pub mod cli_check;
pub mod exec;
mod launch;
pub mod proctree;
mod reconcile;
mod runner;
pub mod tmux;
pub mod workspace;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::resolve::{RunKind, Sourced};

pub use launch::{LaunchError, LaunchRequest, LaunchTimings};
pub use reconcile::PassReport;
pub use runner::{RunError, Runner, RunnerConfig};

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// lab is preparing the workspace and the session.
    Starting,
    /// The agent process is alive.
    Running,
    /// The agent process is alive and waits for a person (see `state_reason`).
    Waiting,
    /// The agent process ended on its own; `exit_status` or `exit_signal` says how.
    Exited,
    /// lab could not start the run, or lost it; `state_reason` says why.
    Failed,
    /// Someone stopped the run; its process tree was ended.
    Stopped,
}

impl RunState {
    pub const ALL: [RunState; 6] = [
        RunState::Starting,
        RunState::Running,
        RunState::Waiting,
        RunState::Exited,
        RunState::Failed,
        RunState::Stopped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Starting => "starting",
            RunState::Running => "running",
            RunState::Waiting => "waiting",
            RunState::Exited => "exited",
            RunState::Failed => "failed",
            RunState::Stopped => "stopped",
        }
    }

    /// Whether the run may still have a live process.
    pub fn is_active(self) -> bool {
        matches!(
            self,
            RunState::Starting | RunState::Running | RunState::Waiting
        )
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        RunState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                let all: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
                format!(
                    "unknown run state '{}'; allowed: {}",
                    crate::validate::shown(s),
                    all.join(", ")
                )
            })
    }
}

/// The SQL list of active states, for `state IN (…)`.
pub const ACTIVE_STATES_SQL: &str = "('starting', 'running', 'waiting')";

/// One run, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub id: i64,
    pub kind: RunKind,
    /// `None` once the repo was removed from lab.
    pub repo_id: Option<i64>,
    pub repo_name: String,
    pub provider: String,
    pub model: Sourced,
    pub effort: Sourced,
    pub options: BTreeMap<String, Sourced>,
    pub prompt: String,
    pub state: RunState,
    pub state_reason: Option<String>,
    /// The lab node that owns the run's tmux session.
    pub node: String,
    pub session: String,
    pub workspace: Option<String>,
    pub branch: Option<String>,
    pub log_path: Option<String>,
    pub pid: Option<i64>,
    /// When `pid` started (clock ticks after boot): with `pid`, what
    /// identifies the process (pids are reused).
    pub pid_start: Option<i64>,
    pub exit_status: Option<i64>,
    pub exit_signal: Option<i64>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub workspace_removed_at: Option<i64>,
}

impl Run {
    /// What identifies this run's processes.
    pub fn mark(&self) -> proctree::RunMark {
        proctree::RunMark {
            root: self
                .pid
                .zip(self.pid_start.and_then(|s| u64::try_from(s).ok())),
            run_id: self.id,
            node: self.node.clone(),
        }
    }
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
    fn session_names_are_clean_and_carry_the_run_id() {
        assert_eq!(session_name("My.Repo_x", 42), "lab-42-my_repo_x");
        assert_eq!(session_run_id("lab-42-my_repo_x"), Some(42));
        assert_eq!(session_run_id("lab-x-y"), None);
        assert_eq!(session_run_id("other"), None);
        let long = session_name(&"a".repeat(100), 1);
        assert!(long.len() < 50);
    }

    #[test]
    fn states_round_trip() {
        for s in RunState::ALL {
            assert_eq!(s.as_str().parse::<RunState>().unwrap(), s);
        }
        assert!("done".parse::<RunState>().is_err());
    }
}
