//! What lab last knew of an AFK run's pull request (a claim's `checks`):
//! one typed value, stored and shown as a short text.

use std::fmt;

/// An AFK run's pull request as lab last judged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChecksState {
    /// Its checks passed (the repo's check command, or the forge's checks).
    Passed,
    /// It has no checks to pass.
    None,
    /// Its checks still run.
    Pending,
    /// Its checks failed: which, and what they said in a few words.
    Failed(String),
    /// Its checks ended in a way the agent cannot fix (a workflow awaiting a
    /// maintainer's approval, stale, cancelled): which.
    Blocked(String),
    /// It conflicts with its base branch.
    Conflict,
    /// The forge would not let lab read its checks: why.
    Unreadable(String),
    /// A person merged it.
    Merged,
    /// A person closed it without merging.
    Closed,
}

impl ChecksState {
    /// The stored text.
    pub fn text(&self) -> String {
        match self {
            ChecksState::Passed => "passed".into(),
            ChecksState::None => "none".into(),
            ChecksState::Pending => "pending".into(),
            ChecksState::Failed(w) => format!("failed: {w}"),
            ChecksState::Blocked(w) => format!("waiting for a person: {w}"),
            ChecksState::Conflict => "conflict".into(),
            ChecksState::Unreadable(w) => format!("unreadable: {w}"),
            ChecksState::Merged => "merged".into(),
            ChecksState::Closed => "closed".into(),
        }
    }

    /// Reads a stored text (one lab did not write reads as a failure that
    /// says it).
    pub fn parse(s: &str) -> ChecksState {
        match s {
            "passed" => ChecksState::Passed,
            "none" => ChecksState::None,
            "pending" => ChecksState::Pending,
            "conflict" => ChecksState::Conflict,
            "merged" => ChecksState::Merged,
            "closed" => ChecksState::Closed,
            _ => {
                if let Some(w) = s.strip_prefix("failed: ") {
                    ChecksState::Failed(w.to_owned())
                } else if let Some(w) = s.strip_prefix("waiting for a person: ") {
                    ChecksState::Blocked(w.to_owned())
                } else if let Some(w) = s.strip_prefix("unreadable: ") {
                    ChecksState::Unreadable(w.to_owned())
                } else {
                    ChecksState::Failed(s.to_owned())
                }
            }
        }
    }

    /// Whether the run's work stands green: passed, or nothing to pass.
    pub fn green(&self) -> bool {
        matches!(self, ChecksState::Passed | ChecksState::None)
    }
}

impl fmt::Display for ChecksState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_reads_back() {
        for c in [
            ChecksState::Passed,
            ChecksState::None,
            ChecksState::Pending,
            ChecksState::Failed("ci/test".into()),
            ChecksState::Blocked("ci: action_required".into()),
            ChecksState::Conflict,
            ChecksState::Unreadable("check runs: 403".into()),
            ChecksState::Merged,
            ChecksState::Closed,
        ] {
            assert_eq!(ChecksState::parse(&c.text()), c);
        }
        assert_eq!(ChecksState::parse("odd"), ChecksState::Failed("odd".into()));
        assert!(ChecksState::Passed.green() && ChecksState::None.green());
        assert!(!ChecksState::Merged.green());
    }
}
