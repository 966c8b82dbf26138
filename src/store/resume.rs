//! Lost runs and their resumes (ADR 18). Like every state change, each is a
//! conditional update: a run is marked lost only from the state reconcile
//! saw, and resumed only from `lost`, so of two resumes at once one wins.

use super::Written;
use super::{Result, Store, on_db};
use crate::domain::RunState;

impl Store {
    /// `from` → `lost`, with the reason. The run token goes (a resume gets a
    /// fresh one); `ended_at` stays empty: the run has not ended, and its
    /// workspace is not the retention's to remove. False when the run was no
    /// longer in `from`.
    pub async fn mark_lost(&self, id: i64, from: RunState, reason: &str) -> Result<bool> {
        let _counted = self.writing(Written::Runs);
        let n = on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE runs SET state = 'lost', state_reason = $1, token_hash = NULL \
                 WHERE id = $2 AND state = $3",
            )
            .bind(reason)
            .bind(id)
            .bind(from.as_str())
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(n == 1)
    }

    /// `from` (`lost`, or `exited` for an AFK round) → `starting` for a
    /// resume, with the new run token's hash; the launch path then records
    /// it `running`. What the last process left (pid, exit, end, agent
    /// state) is cleared and `resumes` counts one more; its usage is read
    /// on, and its `started_at` stays its first start's. False when the run
    /// was no longer in `from` (someone else resumed it first).
    pub async fn begin_resume(&self, id: i64, token_hash: &str, from: RunState) -> Result<bool> {
        let _counted = self.writing(Written::Runs);
        let n = on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE runs SET state = 'starting', state_reason = NULL, token_hash = $1, \
                 resumes = resumes + 1, pid = NULL, pid_start = NULL, exit_status = NULL, \
                 exit_signal = NULL, agent_state = NULL, agent_reason = NULL, agent_since = NULL, \
                 agent_by = NULL, ended_at = NULL WHERE id = $2 AND state = $3",
            )
            .bind(token_hash)
            .bind(id)
            .bind(from.as_str())
            .execute(pool)
            .await?
            .rows_affected()
        });
        if n == 1 {
            // Its transcript is read on: the new round's turns count.
            on_db!(self.db(), pool => {
                sqlx::query("UPDATE run_usage SET done = FALSE WHERE run_id = $1")
                    .bind(id)
                    .execute(pool)
                    .await?;
            });
        }
        Ok(n == 1)
    }

    /// How many times a run was resumed.
    pub async fn resumes(&self, id: i64) -> Result<i64> {
        let (n,): (i64,) = on_db!(self.db(), pool => {
            sqlx::query_as("SELECT resumes FROM runs WHERE id = $1")
                .bind(id)
                .fetch_optional(pool)
                .await?
                .ok_or(super::StoreError::NotFound)?
        });
        Ok(n)
    }

    /// The issue number of the AFK claim a run works for, if any.
    pub async fn claimed_issue_of_run(&self, run_id: i64) -> Result<Option<i64>> {
        let row: Option<(i64,)> = on_db!(self.db(), pool => {
            sqlx::query_as(
                "SELECT issue_number FROM afk_claims WHERE run_id = $1 ORDER BY id DESC LIMIT 1",
            )
            .bind(run_id)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|(n,)| n))
    }
}
