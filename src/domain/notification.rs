//! What lab notifies the operator of, and how an endpoint is spoken to.

use super::spelled::spelled;

spelled! {
    /// How lab speaks to a notification endpoint.
    pub enum NotifyKind ("notification kind") {
        /// A generic JSON webhook.
        Webhook = "webhook",
        /// An ntfy-style topic URL (plain text and headers).
        Ntfy = "ntfy",
        /// A Slack-compatible incoming webhook (`{"text": …}`).
        Slack = "slack",
    }
}

spelled! {
    /// Something that happened to a run that an endpoint may want to hear.
    pub enum NotifyEvent ("notification event") {
        /// The run entered `waiting` (once per entry).
        Waiting = "waiting",
        /// The run ended: `exited` or `stopped`.
        Ended = "ended",
        /// The run `failed`.
        Failed = "failed",
        /// A pull request was opened for the run.
        PrOpened = "pr_opened",
    }
}
