//! Where an issue is in its life, as every issue source spells it.

use super::spelled::spelled;

spelled! {
    /// Whether an issue is open (the AFK scheduler may take it) or closed.
    pub enum IssueState ("issue state") {
        Open = "open",
        Closed = "closed",
    }
}

spelled! {
    /// Which issues a listing shows: the open ones, the closed ones, or all.
    pub enum IssueFilter ("issue filter") {
        Open = "open",
        Closed = "closed",
        All = "all",
    }
}

impl IssueFilter {
    /// The states a listing of this filter asks its source for.
    pub fn states(self) -> &'static [IssueState] {
        match self {
            IssueFilter::Open => &[IssueState::Open],
            IssueFilter::Closed => &[IssueState::Closed],
            IssueFilter::All => &[IssueState::Open, IssueState::Closed],
        }
    }
}
