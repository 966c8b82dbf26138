//! A run as lab records it: its kind, its state, and the values it was
//! started with. Pure data: no IO, no tmux.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::Sourced;
use crate::provider::{ProviderId, UnknownProvider};

/// Whether an operator started the run or the AFK scheduler did, and for
/// the scheduler's, which step of an issue it is: `afk` does the work,
/// `plan` writes a plan for it, `review` reviews the work (issue 28; each
/// has its own defaults, ADR 32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    Manual,
    Afk,
    Plan,
    Review,
}

impl RunKind {
    pub const ALL: [RunKind; 4] = [
        RunKind::Manual,
        RunKind::Afk,
        RunKind::Plan,
        RunKind::Review,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Manual => "manual",
            RunKind::Afk => "afk",
            RunKind::Plan => "plan",
            RunKind::Review => "review",
        }
    }

    /// Whether nobody watches it start: every kind the scheduler starts.
    /// Such a run takes no per-run override and runs its kind's defaults.
    pub fn is_unattended(self) -> bool {
        !matches!(self, RunKind::Manual)
    }
}

impl fmt::Display for RunKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "manual" => Ok(RunKind::Manual),
            "afk" => Ok(RunKind::Afk),
            "plan" => Ok(RunKind::Plan),
            "review" => Ok(RunKind::Review),
            other => Err(format!(
                "unknown run kind '{other}'; allowed: manual, afk, plan, review"
            )),
        }
    }
}

/// Which step of its work a run is at (issue 28), beside its state:
/// `working` while its agent works (or waits for a person, or can be
/// resumed), `checking` while an AFK run's turn is over and lab judges it
/// (its check command, the forge's checks and reviews), `done` once it
/// ended. `planning`, `plan-review` and `reviewing` belong to the plan and
/// review runs, which come with their phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Planning,
    PlanReview,
    Working,
    Checking,
    Reviewing,
    Done,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Planning => "planning",
            Phase::PlanReview => "plan-review",
            Phase::Working => "working",
            Phase::Checking => "checking",
            Phase::Reviewing => "reviewing",
            Phase::Done => "done",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    /// Its tmux session vanished with no exit recorded (the tmux server was
    /// killed, the machine restarted) while its workspace and CLI session id
    /// remain: it holds no process and can be resumed (ADR 18).
    Lost,
}

impl RunState {
    pub const ALL: [RunState; 7] = [
        RunState::Starting,
        RunState::Running,
        RunState::Waiting,
        RunState::Exited,
        RunState::Failed,
        RunState::Stopped,
        RunState::Lost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Starting => "starting",
            RunState::Running => "running",
            RunState::Waiting => "waiting",
            RunState::Exited => "exited",
            RunState::Failed => "failed",
            RunState::Stopped => "stopped",
            RunState::Lost => "lost",
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
        super::spelled::parse(s, "run state")
    }
}

impl crate::validate::Choice for RunState {
    const ALL: &'static [Self] = &RunState::ALL;
    fn as_str(self) -> &'static str {
        RunState::as_str(self)
    }
}

/// What one run may use, as applied (ADR 24): `None` is no cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// MiB of memory (its cgroup's cap).
    pub memory_max_mb: Option<i64>,
    /// Processes and threads at once.
    pub pids_max: Option<i64>,
}

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
    /// Whether its agent ran in lab's sandbox (ADR 12).
    pub sandboxed: bool,
    /// The caps its agent runs under.
    pub limits: RunLimits,
    /// Why lab stopped it, when it did.
    pub stop_cause: Option<super::StopCause>,
    /// What its agent is doing (ADR 13); `None` until known.
    pub agent: Option<super::AgentStatus>,
    /// The agent CLI's own session id (Claude Code's `--session-id`, the
    /// id of a Codex rollout), once known.
    pub cli_session_id: Option<String>,
    /// The usage-limit line lab acted on (it typed `continue` after its
    /// reset), while the line stays on the run's screen: seen again, it is
    /// no new limit (issue 40 §4). The agent's bytes.
    pub limit_line: Option<String>,
    /// What the agent used, from its CLI's transcript; `None` until the
    /// transcript was found.
    pub usage: Option<super::Usage>,
    /// The issue it works on (an AFK run's; `None` for a manual run started
    /// without one).
    pub issue: Option<RunIssue>,
    /// Which attempt at its issue it is (1 for the first, and for a manual
    /// run).
    pub attempt: i64,
    /// Which round on its pull request it is in (1 until a check or a
    /// review sends it back to work).
    pub round: i64,
    /// How it ended for its issue (AFK runs, once settled).
    pub outcome: Option<super::Outcome>,
    /// The knobs it runs with, each with where its value came from (AFK
    /// runs; none for a manual run).
    pub knobs: Vec<crate::knob::Resolved>,
    /// The budgets its issue lowered (AFK runs), when it did.
    pub issue_budget: Option<IssueBudget>,
    /// Where its AFK claim stands while the claim is active and names it
    /// (a planning run while its plan waits, a work run while its pull
    /// request is reviewed).
    pub stage: Option<super::Stage>,
}

/// The budgets an AFK run's issue lowered (issue 27): each at most what its
/// repo allows, checked when the issue was claimed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IssueBudget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_nano_usd: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_timeout_minutes: Option<i64>,
}

impl IssueBudget {
    pub fn is_empty(&self) -> bool {
        *self == IssueBudget::default()
    }
}

impl Run {
    /// Its [`Phase`]: from its state and, for an AFK run, whether its
    /// agent's turn is over.
    pub fn phase(&self) -> Phase {
        // Its claim's stage first: a planning run lab stopped while its
        // plan waits, a work run lab stopped while a review judges it.
        match (self.kind, self.stage) {
            (RunKind::Plan, Some(super::Stage::PlanReview)) => return Phase::PlanReview,
            (RunKind::Afk, Some(super::Stage::Review)) => return Phase::Reviewing,
            _ => {}
        }
        if !self.state.is_active() && self.state != RunState::Lost {
            return Phase::Done;
        }
        let turn_over = self
            .agent
            .as_ref()
            .is_some_and(|a| a.state == super::AgentState::Idle);
        if self.kind == RunKind::Plan {
            return Phase::Planning;
        }
        if self.kind == RunKind::Review {
            return Phase::Reviewing;
        }
        if self.kind == RunKind::Afk && self.state.is_active() && turn_over {
            Phase::Checking
        } else {
            Phase::Working
        }
    }

    /// Its provider, unless that left lab's catalog since the run started
    /// (the row keeps the id it was started with).
    pub fn provider_id(&self) -> Result<ProviderId, UnknownProvider> {
        self.provider.parse()
    }
}

/// The issue a run works on, as it was when the run started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunIssue {
    pub number: i64,
    pub title: String,
    /// Where a person reads it.
    pub url: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip() {
        for s in RunState::ALL {
            assert_eq!(s.as_str().parse::<RunState>().unwrap(), s);
        }
        assert!("done".parse::<RunState>().is_err());
    }

    #[test]
    fn kinds_round_trip() {
        for k in RunKind::ALL {
            assert_eq!(k.as_str().parse::<RunKind>().unwrap(), k);
            assert_eq!(k.is_unattended(), k != RunKind::Manual);
        }
        let e = "planning".parse::<RunKind>().unwrap_err();
        assert!(e.contains("plan, review"), "{e}");
    }
}
