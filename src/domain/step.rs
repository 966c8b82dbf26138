//! What lab did for an AFK claim, step by step (issue 28 §5): the rounds it
//! started and why, the checks it ran and how they ended. lab writes them,
//! never the agent; a pull request's receipt is read from them.

use serde::{Deserialize, Serialize};

/// One step of a claim's work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// lab started another round of the agent's session.
    Round(RoundStep),
    /// lab ran the repo's check command on the run's branch.
    Check(CheckStep),
}

/// A round lab started, and what started it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RoundStep {
    /// The round's number (2 for the first lab started).
    pub round: i64,
    pub cause: RoundCause,
}

/// What sent the agent back to work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RoundCause {
    /// The issue: the first round, the run's start (never stored).
    Issue,
    /// The repo's check command failed.
    Check,
    /// The forge's checks failed.
    ForgeCheck,
    /// A review or a comment asked for changes.
    Review,
    /// The branch changed paths outside the run's scope.
    Scope,
    /// The branch conflicts with its base.
    Conflict,
}

impl RoundCause {
    /// Its name as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RoundCause::Issue => "issue",
            RoundCause::Check => "check",
            RoundCause::ForgeCheck => "forge-check",
            RoundCause::Review => "review",
            RoundCause::Scope => "scope",
            RoundCause::Conflict => "conflict",
        }
    }
}

impl std::fmt::Display for RoundCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run of the repo's check command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CheckStep {
    /// The round it checked.
    pub round: i64,
    pub command: String,
    /// Its exit status; `null` when it did not exit on its own (killed at
    /// its time limit, or it could not start).
    pub status: Option<i32>,
    pub duration_ms: i64,
    /// The end of what it printed (at most 2 KiB here): the checked code
    /// is the agent's, so this is shown on lab's pages and in the API only,
    /// never on a forge.
    pub output_tail: String,
}

/// The most of a check's output a step keeps.
pub const STEP_TAIL: usize = 2048;

impl CheckStep {
    /// The end of `output`, at most [`STEP_TAIL`] bytes, cut on a char.
    pub fn tail(output: &str) -> String {
        let mut from = output.len().saturating_sub(STEP_TAIL);
        while !output.is_char_boundary(from) {
            from += 1;
        }
        output[from..].to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_read_back_as_written() {
        let steps = [
            Step::Round(RoundStep {
                round: 2,
                cause: RoundCause::ForgeCheck,
            }),
            Step::Check(CheckStep {
                round: 1,
                command: "cargo test".into(),
                status: Some(101),
                duration_ms: 1500,
                output_tail: CheckStep::tail(&"é".repeat(3000)),
            }),
        ];
        for s in steps {
            let text = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<Step>(&text).unwrap(), s);
        }
        assert_eq!(
            serde_json::to_value(RoundCause::ForgeCheck).unwrap(),
            "forge-check"
        );
        assert!(CheckStep::tail(&"é".repeat(3000)).len() <= STEP_TAIL);
    }
}
