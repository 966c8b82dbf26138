//! AFK runs found lost (ADR 18): resumed once automatically; a second loss,
//! or a run that cannot be resumed, ends the run `failed`, and its claim with
//! it.

use super::Scheduler;
use crate::domain::{Run, RunState};
use crate::run::RunError;
use crate::store::{Ending, StoreError};

/// How many times lab resumes a lost AFK run by itself.
pub const AUTO_RESUMES: i64 = 1;

impl Scheduler {
    /// Settles a lost AFK run. True: it was resumed (live again; the next
    /// tick looks at it). False: it is `failed` now (`run` is re-read), for
    /// the claim to be judged.
    pub(super) async fn settle_lost(&self, run: &mut Run) -> Result<bool, StoreError> {
        let store = &self.runner.store();
        let why = if store.resumes(run.id).await? < AUTO_RESUMES {
            match self.runner.resume(run.id).await {
                Ok(r) if r.state.is_active() => {
                    tracing::info!(run = run.id, "lost AFK run resumed");
                    *run = r;
                    return Ok(true);
                }
                Ok(r) => {
                    // The resume failed to start it: already `failed`, with why.
                    *run = r;
                    return Ok(false);
                }
                Err(RunError::Conflict(why)) => format!("it was lost and {why}"),
                Err(RunError::NotFound) => return Err(StoreError::NotFound),
                Err(RunError::Store(e)) => return Err(e),
                Err(RunError::Io(e)) => format!("it was lost and could not be resumed: {e}"),
            }
        } else {
            "its session was lost again after lab resumed it once".to_owned()
        };
        store
            .finish_run(
                run.id,
                &Ending {
                    state: RunState::Failed,
                    reason: Some(why),
                    exit_status: None,
                    exit_signal: None,
                    from: Some(RunState::Lost),
                    stop_cause: None,
                },
            )
            .await?;
        *run = store.run(run.id).await?;
        // Resumed by someone else meanwhile: live again.
        Ok(run.state.is_active())
    }
}
