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
mod notification;
mod outcome;
mod output;
mod provenance;
mod run;
mod spelled;
mod stop;
mod usage;

pub use agent::{AGENT_REASON_CHARS, AgentBy, AgentState, AgentStatus, agent_reason};
pub use change::Change;
pub use checks::ChecksState;
pub use defaults::Defaults;
pub use input::Key;
pub use issue::{IssueFilter, IssueState};
pub use notification::{NotifyEvent, NotifyKind};
pub use outcome::Outcome;
pub use output::{OutputFormat, ScreenFormat};
pub use provenance::{Layer, Sourced};
pub use run::{Run, RunIssue, RunKind, RunLimits, RunState};
pub use stop::StopCause;
pub use usage::{Usage, compact_cost, compact_tokens, nano_to_usd};

/// The UTC date (year, month, day) of a time in ms since the epoch (times
/// before it count as the epoch).
pub fn civil_date(ms: i64) -> (i64, u32, u32) {
    let date = rfc3339(ms);
    let part = |r: std::ops::Range<usize>| date.get(r).and_then(|p| p.parse().ok());
    (
        part(0..4).unwrap_or(1970),
        part(5..7).unwrap_or(1) as u32,
        part(8..10).unwrap_or(1) as u32,
    )
}

/// A UTC date and time of day as ms since the epoch; `None` for a date that
/// does not exist (Feb 30) or comes before the epoch.
pub fn civil_ms(year: i64, month: u32, day: u32, hour: u32, minute: u32) -> Option<i64> {
    let t = humantime::parse_rfc3339(&format!(
        "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:00Z"
    ))
    .ok()?;
    i64::try_from(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis()).ok()
}

/// A time lab stored (milliseconds since the epoch) as RFC 3339: UTC, with
/// milliseconds, the way every API body and page shows times.
pub fn rfc3339(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod clock_tests {
    use super::*;

    #[test]
    fn dates_and_times_round_trip() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(1_764_583_200_000), (2025, 12, 1));
        assert_eq!(civil_date(951_782_400_000), (2000, 2, 29));
        assert_eq!(civil_date(-1), (1970, 1, 1));
        assert_eq!(civil_ms(2000, 2, 29, 0, 0), Some(951_782_400_000));
        assert_eq!(civil_ms(1970, 1, 1, 1, 1), Some(3_660_000));
        assert_eq!(civil_ms(2026, 2, 30, 0, 0), None);
        assert_eq!(civil_ms(2026, 1, 1, 24, 0), None);
    }
}
