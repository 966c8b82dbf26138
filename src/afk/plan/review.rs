//! `plan = auto` (issue 28 §2): a review run judges each plan version with
//! the verdict of the review phase (`afk::review`): approved approves it,
//! changes requested rejects it with the summary and blocking findings as
//! the reason. A person may decide first.

use super::PlanError;
use crate::afk::{Scheduler, prompt};
use crate::domain::{PlanState, Run};
use crate::repo::Repo;
use crate::settings::Settings;
use crate::store::{Claim, StoreError};

impl Scheduler {
    /// A claim whose plan a review run judges (`plan = auto`): its review
    /// run starts (again, if lab stopped before it did), and its verdict
    /// decides the plan as a person's decision would.
    pub(super) async fn settle_plan_review(
        &self,
        claim: &Claim,
        run: &Run,
        settings: &Settings,
        repo: &Repo,
    ) -> Result<(), StoreError> {
        if claim.review_run_id.is_none() {
            return Box::pin(self.begin_plan_review(claim, run, repo)).await;
        }
        let Some(verdict) = self.follow_reviewer(claim, settings, repo).await? else {
            return Ok(());
        };
        let by = format!("review run {}", verdict.run_id);
        let decided = match verdict.verdict {
            // Boxed: a decision starts a run, a deep future for the
            // settle's stack.
            crate::domain::Verdict::Approved => {
                Box::pin(self.approve_plan(repo, claim.issue_number, &by))
                    .await
                    .map(|_| ())
            }
            crate::domain::Verdict::ChangesRequested => {
                let mut reason = verdict.summary.clone();
                for f in verdict.blocking() {
                    reason.push_str(&format!("\n- {}:{}: {}", f.path, f.line, f.message));
                }
                let reason: String = reason.chars().take(crate::knob::MAX_TEXT).collect();
                Box::pin(self.reject_plan(repo, claim.issue_number, &by, &reason))
                    .await
                    .map(|_| ())
            }
        };
        match decided {
            Ok(()) => Ok(()),
            Err(PlanError::Store(e)) => Err(e),
            // A person decided first: nothing to do.
            Err(e) => {
                tracing::info!(claim = claim.id, error = %e, "a plan review's verdict came late");
                Ok(())
            }
        }
    }

    /// Starts the review run of the plan that waits: a read-only checkout
    /// of the base, the issue, the plan (fenced as data) and the knobs'
    /// plan fragments.
    pub(super) async fn begin_plan_review(
        &self,
        claim: &Claim,
        run: &Run,
        repo: &Repo,
    ) -> Result<(), StoreError> {
        let store = self.runner.store();
        let Some(plan) = store
            .plans_of_claim(claim.id)
            .await?
            .into_iter()
            .rev()
            .find(|p| p.state == PlanState::Proposed)
        else {
            return Ok(());
        };
        let launched = async {
            let issue = self
                .sources
                .of(repo)
                .issue(claim.issue_number)
                .await
                .map_err(|e| e.to_string())?;
            let settings = store.settings().await.map_err(|e| e.to_string())?;
            let text = prompt::plan_review(
                &issue,
                &plan,
                claim.plan_rounds + 1,
                settings.afk.max_plan_rounds,
                &run.knobs,
            );
            self.launch_reviewer(claim, run, repo, &issue, text, None)
                .await
        };
        match launched.await {
            Ok(r) => {
                tracing::info!(claim = claim.id, run = r.id, "plan review run started");
                Ok(())
            }
            Err(why) => {
                self.needs_human(
                    claim,
                    &format!(
                        "plan version {} waits, but its review run could not start: {why}",
                        plan.version
                    ),
                )
                .await
            }
        }
    }
}
