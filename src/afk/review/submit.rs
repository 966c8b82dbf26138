//! A review run's verdict, as its agent submits it (`labctl review
//! submit`): only a live review run whose claim is in review may, once; a
//! verdict lab refuses is the reviewer's one retry (the count is this
//! module's), the second leaves the issue to a person.
//!
//! Trust boundary: the submission is the reviewer's bytes, checked here
//! (`Submission::check`) on the host before anything is stored; the head
//! it is recorded against is read by lab (`branch_head`), never taken
//! from the agent.

use super::super::Scheduler;
use crate::domain::Run;
use crate::domain::{PlanState, Review, RunKind, Stage, StopCause, Submission};
use crate::store::{RepoKey, ReviewOf, StoreError};

/// Why a verdict was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// Not a live review run, or its claim moved on (409).
    #[error("{0}")]
    Conflict(String),
    /// The verdict's shape (422); `last` when it was the reviewer's retry
    /// and the issue now needs a person.
    #[error("{invalid}")]
    Invalid {
        invalid: crate::validate::Invalid,
        last: bool,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Scheduler {
    /// Records the verdict `run` submitted (its own token, checked by the
    /// caller): only a live review run whose claim is in review may, once.
    /// A verdict lab refuses is the reviewer's one retry; the second ends
    /// the claim for a person.
    pub async fn submit_review(&self, run: &Run, sub: &Submission) -> Result<Review, ReviewError> {
        if run.kind != RunKind::Review || !run.state.is_active() {
            return Err(ReviewError::Conflict(format!(
                "run {} is not a live review run: only one submits a verdict",
                run.id
            )));
        }
        let store = self.runner.store();
        let claim = store
            .claim_of_review_run(run.id)
            .await?
            .filter(|c| matches!(c.stage, Stage::Review | Stage::PlanReview))
            .ok_or_else(|| {
                ReviewError::Conflict(format!(
                    "run {}'s pull request or plan is not in review now: its issue moved on",
                    run.id
                ))
            })?;
        let checked = match sub.check() {
            Ok(c) => c,
            Err(invalid) => {
                let refused = self.claims.with(claim.id, |c| {
                    c.review_refused += 1;
                    c.review_refused
                });
                let last = refused >= 2;
                if last {
                    // The claim's ending first: a settle that sees the run
                    // stopped meanwhile finds the claim already judged.
                    self.needs_human(
                        &claim,
                        "its review run's verdict was refused twice; what was wrong is on the \
                         review run's page",
                    )
                    .await?;
                    let _ = self
                        .runner
                        .stop(run.id, StopCause::Reviewed, "its verdict was refused twice")
                        .await;
                }
                return Err(ReviewError::Invalid { invalid, last });
            }
        };
        let head = if claim.stage == Stage::PlanReview {
            // A plan's review: the version it judged.
            let version = store
                .plans_of_claim(claim.id)
                .await?
                .into_iter()
                .rev()
                .find(|p| p.state == PlanState::Proposed)
                .map_or(0, |p| p.version);
            format!("plan v{version}")
        } else {
            let work = match claim.run_id {
                Some(id) => store.run(id).await?,
                None => {
                    return Err(ReviewError::Conflict(format!(
                        "run {}'s claim has no work run",
                        run.id
                    )));
                }
            };
            let repo = store.repo(&RepoKey::Id(claim.repo_id)).await?;
            match work.branch.as_deref() {
                Some(b) => self.runner.workspaces().branch_head(&repo, b).await,
                None => None,
            }
            .unwrap_or_default()
        };
        let review = store
            .submit_review(
                ReviewOf {
                    claim: &claim,
                    run: run.id,
                    head: &head,
                },
                &checked,
            )
            .await?;
        Ok(review)
    }
}
