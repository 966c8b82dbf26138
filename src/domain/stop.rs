//! Why lab stopped a run.

use super::spelled::spelled;

spelled! {
    /// Who or what stopped a run (a run that ended on its own has none).
    pub enum StopCause ("stop cause") {
        /// An operator stopped it (API, page, labctl).
        Operator = "operator",
        /// It ran past the AFK run time limit.
        TimeLimit = "time_limit",
        /// Its pull request was open and its grace period over.
        PullRequest = "pull_request",
        /// It spent more tokens or money than its AFK budget.
        Budget = "budget",
        /// Its rounds on its pull request were used up, or a reviewer asked
        /// for a person.
        Rounds = "rounds",
        /// Its agent CLI cannot work (not signed in, its sign-in refused).
        CliUnusable = "cli_unusable",
        /// Its branch changed paths outside its `writes` and its rounds to
        /// undo that were used up.
        Scope = "scope",
        /// A planning run that submitted its plan and ended its turn: its
        /// work is done until the plan is decided (issue 28 §2).
        Planned = "planned",
        /// A review run that submitted its verdict and ended its turn
        /// (issue 28 §3).
        Reviewed = "reviewed",
        /// A work run that ended its turn without a pull request, was
        /// reminded once, and ended its turn again without one (issue 40
        /// §2): a person looks.
        NoPullRequest = "no_pull_request",
    }
}
