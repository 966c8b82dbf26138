//! The domain types every layer shares: runs and their states, one scope's
//! defaults, a change to a field, an AFK run's outcome, an issue's state.
//! Pure data with its own rules; no IO, and nothing here names a module
//! above it.

mod agent;
mod change;
mod checks;
mod defaults;
mod input;
mod issue;
mod node;
mod notification;
mod outcome;
mod output;
mod plan;
mod provenance;
mod review;
mod run;
mod spelled;
mod step;
mod stop;
mod usage;

pub use agent::{AGENT_REASON_CHARS, AgentBy, AgentState, AgentStatus, agent_reason};
pub use change::Change;
pub use checks::ChecksState;
pub use defaults::{Defaults, KindDefaults, KindLayer};
pub use input::Key;
pub use issue::{IssueFilter, IssueState};
pub use node::{BEAT_MS, Capacity, DOWN_AFTER_MS, NODE_DOWN, Node, NodeState};
pub use notification::{NotifyEvent, NotifyKind};
pub use outcome::Outcome;
pub use output::{OutputFormat, ScreenFormat};
pub use plan::{MAX_PLAN_BYTES, Plan, PlanState, Stage};
pub use provenance::{Layer, Sourced};
pub use review::{Checked, Finding, Review, Severity, Submission, Verdict};
pub use run::{IssueBudget, Phase, Run, RunIssue, RunKind, RunLimits, RunState};
pub use step::{CheckStep, RoundCause, RoundStep, STEP_TAIL, Step};
pub use stop::StopCause;
pub use usage::{Usage, compact_cost, compact_tokens, nano_to_usd};

/// A time lab stored (milliseconds since the epoch) as RFC 3339: UTC, with
/// milliseconds, the way every API body and page shows times.
pub fn rfc3339(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}
