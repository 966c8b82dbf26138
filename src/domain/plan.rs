//! The plan phase of an AFK issue (issue 28 §2): where a claim stands
//! (`Stage`), and each version of the plan its planning run submitted.

use super::spelled::spelled;

spelled! {
    /// Where an AFK claim stands: planning (its planning run works), its
    /// plan waiting for a decision, reviewed, or the work (the default: a claim of an
    /// issue with `plan = off` is at work from its start).
    pub enum Stage ("stage") {
        Plan = "plan",
        PlanReview = "plan-review",
        Work = "work",
        /// Its pull request's checks passed and a review run judges it
        /// (issue 28 §3).
        Review = "review",
    }
}

spelled! {
    /// A plan version's state: proposed until decided; superseded when its
    /// run submitted a newer one first.
    pub enum PlanState ("plan state") {
        Proposed = "proposed",
        Approved = "approved",
        Rejected = "rejected",
        Superseded = "superseded",
    }
}

/// One version of an issue's plan. `text` is the agent's words: lab shows
/// it on its own pages and gives it to the next run, never to a
/// forge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub claim_id: i64,
    pub run_id: i64,
    /// 1, 2, … over the plans.
    pub version: i64,
    pub text: String,
    pub state: PlanState,
    /// Who decided (`operator`, a forge login), when decided.
    pub decided_by: Option<String>,
    /// Why it was rejected.
    pub reason: Option<String>,
    pub created_at: i64,
    pub decided_at: Option<i64>,
}

/// The most bytes a plan may have.
pub const MAX_PLAN_BYTES: usize = 64 * 1024;

impl Plan {
    /// Who the plan's state is down to: the decider, else its run.
    pub fn by(&self) -> String {
        self.decided_by
            .clone()
            .unwrap_or_else(|| format!("run {}", self.run_id))
    }

    /// When its state was reached (ms).
    pub fn at(&self) -> i64 {
        self.decided_at.unwrap_or(self.created_at)
    }
}
