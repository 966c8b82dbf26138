//! Where an issue is in its life, as every issue source spells it.

use super::spelled::spelled;

spelled! {
    /// Whether an issue is open (the AFK scheduler may take it) or closed.
    pub enum IssueState ("issue state") {
        Open = "open",
        Closed = "closed",
    }
}
