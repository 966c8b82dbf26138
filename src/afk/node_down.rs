//! AFK issues of a node that stopped beating (issue 29 §3): another node
//! takes their claims over. An active claim ends `failed` with why, and its
//! issue runs again as the next attempt (the old workspace is on the dead
//! machine, and the issue is told so); an ended claim whose issue was not
//! told yet is told by the node that took it.
//!
//! Host side only: reads and writes claims, never a run's data.

use super::Scheduler;
use super::outcome::retry_backoff;
use crate::domain::Outcome;
use crate::store::{StoreError, now_ms};

impl Scheduler {
    /// Takes over what node `dead` held; how many claims this node took
    /// (another node may take some first: each goes to one node).
    pub async fn take_over(&self, dead: &str) -> Result<usize, StoreError> {
        let store = self.runner.store();
        let claims = store.claims_of_node(dead).await?;
        if claims.is_empty() {
            return Ok(0);
        }
        let settings = store.settings().await?;
        let me = self.runner.node();
        let mut taken = 0;
        for claim in claims {
            let run = claim
                .run_id
                .map(|r| format!("run {r}"))
                .unwrap_or_else(|| "its run".to_owned());
            let detail = format!(
                "lab node '{dead}' stopped beating while {run} worked on this issue (node down). \
                 That run's workspace and session are on that machine; lab does not wait for it."
            );
            let ending = claim.active.then(|| {
                let retry_at = (claim.attempt < settings.afk.max_attempts)
                    .then(|| now_ms() + retry_backoff(settings.afk.tick_seconds, claim.attempt));
                (Outcome::Failed, detail.as_str(), retry_at)
            });
            if store.take_over_claim(&claim, dead, me, ending).await? {
                tracing::warn!(
                    claim = claim.id,
                    issue = claim.issue_number,
                    node = dead,
                    "took over the AFK claim of a node that is down"
                );
                taken += 1;
            }
        }
        Ok(taken)
    }
}
