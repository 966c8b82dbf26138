//! How an AFK run ended for its issue, and the label that says so on the
//! issue.

use super::spelled::spelled;

spelled! {
    /// How an AFK run ended for its issue (a claim's outcome).
    pub enum Outcome ("outcome") {
        /// Its pull request's checks passed (or it has none to pass).
        PrGreen = "pr-green",
        /// It opened a pull request whose checks were still running when the
        /// run's time ended.
        PrOpened = "pr-opened",
        /// Its rounds on the pull request were used up, or a reviewer asked
        /// for a person.
        NeedsHuman = "needs-human",
        /// It ended without a pull request; its exit status says why (its
        /// screen and log stay on the run's page).
        Failed = "failed",
        /// It ran past the run time limit and lab stopped it.
        TimedOut = "timed-out",
        /// It spent more tokens or money than its budget and lab stopped it.
        OverBudget = "over-budget",
        /// A person merged its pull request.
        PrMerged = "pr-merged",
        /// A person closed its pull request without merging it.
        PrClosed = "pr-closed",
        /// Its agent CLI could not work at all (not signed in, its sign-in
        /// refused, exiting at once); tried again once the CLI can.
        CliUnusable = "cli-unusable",
        /// An operator stopped it (its page, the API, labctl): not tried
        /// again until a person puts the ready label back.
        Stopped = "stopped",
    }
}

impl Outcome {
    /// The label its issue gets instead of the ready label.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::PrGreen => "lab:pr-green",
            Outcome::PrOpened => "lab:pr-opened",
            Outcome::NeedsHuman => "lab:needs-human",
            Outcome::Failed => "lab:failed",
            Outcome::TimedOut => "lab:timed-out",
            Outcome::OverBudget => "lab:over-budget",
            Outcome::PrMerged => "lab:pr-merged",
            Outcome::PrClosed => "lab:pr-closed",
            Outcome::CliUnusable => "lab:cli-unusable",
            Outcome::Stopped => "lab:stopped",
        }
    }

    /// Whether the run left a pull request that stands (open or merged):
    /// what the ledger counts a success. A pull request a person closed
    /// unmerged does not.
    pub fn has_pull(self) -> bool {
        matches!(
            self,
            Outcome::PrGreen | Outcome::PrOpened | Outcome::NeedsHuman | Outcome::PrMerged
        )
    }

    /// Whether another attempt may do better (`afk.max_attempts`): a run
    /// that failed, ran out of time or met a CLI that could not work; not
    /// one that opened a pull request, spent its budget or was stopped by
    /// an operator (they say when it runs again).
    pub fn retryable(self) -> bool {
        matches!(
            self,
            Outcome::Failed | Outcome::TimedOut | Outcome::CliUnusable
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_outcome_has_its_label() {
        let labels: Vec<String> = Outcome::ALL.iter().map(|o| o.label().to_owned()).collect();
        let spelled: Vec<String> = Outcome::ALL
            .iter()
            .map(|o| format!("lab:{}", o.as_str()))
            .collect();
        assert_eq!(labels, spelled);
    }
}
