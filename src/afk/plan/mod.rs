//! The plan phase of an AFK issue (issue 28 §2). An issue whose `plan` is
//! not `off` gets a planning run first: a read-only workspace, the issue
//! and the knobs' plan fragments. Its agent submits its plan
//! (`labctl plan submit`); once its turn ends lab stops it and the claim
//! waits for a decision (`plan-review`). An approval starts the work run
//! with the plan in its prompt; a rejection resumes the same planning
//! session with the reason, up to `afk.max_plan_rounds`, and then the
//! issue needs a person.
//!
//! `auto` asks a review run to judge the plan (its verdict approves or
//! rejects it, the findings as the reason); a person may decide first.
//!
//! Trust boundary: the plan is the agent's words. lab stores it, shows it on
//! its own pages and gives it, fenced as data, to the issue's work run. The
//! issue is told that a version waits and where (lab's page), never the
//! text: a forge comment of lab's never carries the agent's bytes.

mod commands;
mod review;

use super::Scheduler;
use super::no_answer::Answers;
use super::prompt;
use crate::domain::{MAX_PLAN_BYTES, Outcome, Plan, PlanState, Run, RunKind, Stage, StopCause};
use crate::repo::Repo;
use crate::settings::Settings;
use crate::store::{Claim, RepoKey, StoreError};

/// Why a plan request was refused.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Nothing to act on: no claim, no proposed plan (404/409 by caller).
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(crate::validate::Invalid),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn invalid(field: &str, message: String) -> PlanError {
    PlanError::Invalid(crate::validate::FieldError::new(field, message).into())
}

/// Whether `knobs` ask a review run, not a person, to judge the plan
/// (`plan = auto`; a person may still decide first).
pub fn judged_by_review(knobs: &[crate::knob::Resolved]) -> bool {
    knobs
        .iter()
        .find(|k| k.key == crate::knob::Plan.key())
        .and_then(|k| k.value.as_str())
        .is_some_and(|v| v == "auto")
}

/// Whether `knobs` ask for a plan first.
pub fn wanted(knobs: &[crate::knob::Resolved]) -> bool {
    knobs
        .iter()
        .find(|k| k.key == crate::knob::Plan.key())
        .and_then(|k| k.value.as_str())
        .is_some_and(|v| v != "off")
}

use crate::knob::Knob;

impl Scheduler {
    /// What a settle does with a claim before its work: a live planning run
    /// whose turn ended is stopped once it submitted a plan (told once if
    /// not); one that ended is judged by whether it did. A claim whose plan
    /// waits for a decision waits.
    /// True while a run of the phase works (the settle follows it
    /// closely).
    pub(super) async fn settle_plan(
        &self,
        claim: &Claim,
        run: &Run,
        settings: &Settings,
        repo: Option<&Repo>,
    ) -> Result<bool, StoreError> {
        if claim.stage == Stage::PlanReview
            && judged_by_review(&run.knobs)
            && let Some(repo) = repo
        {
            self.settle_plan_review(claim, run, settings, repo).await?;
            return Ok(true);
        }
        if claim.stage != Stage::Plan {
            return Ok(false);
        }
        let store = self.runner.store();
        let proposed = store
            .plans_of_claim(claim.id)
            .await?
            .into_iter()
            .rev()
            .find(|p| p.state == PlanState::Proposed)
            .is_some();
        if run.state.is_active() {
            let budget = super::budget::of(run, repo, settings);
            if let Some((cause, why)) =
                super::budget::over(run, &budget, self.runner.cfg().limit_minute_ms)
            {
                let _ = self.runner.stop(run.id, cause, &why).await;
                let outcome = match cause {
                    StopCause::TimeLimit => Outcome::TimedOut,
                    _ => Outcome::OverBudget,
                };
                store.finish_claim(claim.id, outcome, &why).await?;
                return Ok(true);
            }
            // A planning run whose model does not answer is asked again,
            // not told it has no plan yet; too long without an answer
            // ends it (`no_answer.rs`).
            match self.follow_answers(claim, run).await {
                Answers::Fine => {}
                Answers::Awaited => return Ok(true),
                Answers::End(why) => {
                    let _ = self.runner.stop(run.id, StopCause::CliUnusable, &why).await;
                    store
                        .finish_claim(claim.id, Outcome::CliUnusable, &why)
                        .await?;
                    return Ok(true);
                }
            }
            if !crate::afk::turn_ended(run) {
                return Ok(true);
            }
            if proposed {
                let _ = self
                    .runner
                    .stop(
                        run.id,
                        StopCause::Planned,
                        "it submitted its plan: lab waits for a decision",
                    )
                    .await;
                self.to_review(claim, run).await?;
                return Ok(true);
            }
            if !self
                .claims
                .with(claim.id, |c| std::mem::replace(&mut c.plan_nudged, true))
            {
                let _ = self
                    .tell(claim, run, prompt::PLAN_MISSING, "no plan yet")
                    .await;
                return Ok(true);
            }
            let why = "the planning run ended its turn twice without submitting a plan";
            let _ = self.runner.stop(run.id, StopCause::Planned, why).await;
            store.finish_claim(claim.id, Outcome::Failed, why).await?;
            return Ok(true);
        }
        if run.stop_cause == Some(StopCause::Operator) {
            // The operator's word: the issue waits for them, plan or not.
            store
                .finish_claim(
                    claim.id,
                    Outcome::Stopped,
                    "An operator stopped its planning run. lab tries this issue again when a \
                     person puts its ready label back.",
                )
                .await?;
        } else if proposed {
            self.to_review(claim, run).await?;
        } else {
            store
                .finish_claim(
                    claim.id,
                    Outcome::Failed,
                    "the planning run ended without submitting a plan",
                )
                .await?;
        }
        Ok(true)
    }

    /// The claim's plan waits for a decision; the issue is told where.
    async fn to_review(&self, claim: &Claim, run: &Run) -> Result<(), StoreError> {
        let store = self.runner.store();
        if !store
            .move_claim(claim.id, Stage::Plan, Stage::PlanReview, false)
            .await?
        {
            return Ok(());
        }
        let Ok(repo) = store.repo(&RepoKey::Id(claim.repo_id)).await else {
            return Ok(());
        };
        let version = store
            .plans_of_claim(claim.id)
            .await?
            .last()
            .map_or(0, |p| p.version);
        let auto = judged_by_review(&run.knobs);
        let text = format!(
            "lab's planning run for this issue submitted plan version {version}. {} \
             {}/repos/{}/issues/{} (or `labctl plan approve {n} --repo {r}` / `labctl plan \
             reject {n} --repo {r} --reason \"<why>\"`; on a forge, a `/lab approve` or \
             `/lab reject <reason>` comment by a writer).",
            if auto {
                "A review run judges it; a person may decide first:"
            } else {
                "It waits for a decision:"
            },
            self.runner.cfg().lab_url.trim_end_matches('/'),
            repo.name,
            claim.issue_number,
            n = claim.issue_number,
            r = repo.name,
        );
        if let Err(e) = self
            .sources
            .of(&repo)
            .comment(claim.issue_number, &text)
            .await
        {
            tracing::warn!(claim = claim.id, error = %e, "could not tell the issue about its plan");
        }
        if auto {
            let claim = store
                .claim_of_run(run.id)
                .await?
                .unwrap_or_else(|| claim.clone());
            Box::pin(self.begin_plan_review(&claim, run, &repo)).await?;
        }
        Ok(())
    }

    /// Records the plan `run` submitted (the run's own token, checked by
    /// the caller): only a planning run whose claim is planning may.
    pub async fn submit_plan(&self, run: &Run, text: &str) -> Result<Plan, PlanError> {
        if run.kind != RunKind::Plan || !run.state.is_active() {
            return Err(PlanError::Conflict(format!(
                "run {} is not a live planning run: only one submits a plan",
                run.id
            )));
        }
        let text = text.trim();
        if text.is_empty() {
            return Err(invalid("text", "the plan is empty".into()));
        }
        if text.len() > MAX_PLAN_BYTES {
            return Err(invalid(
                "text",
                format!(
                    "the plan has {} bytes; at most {MAX_PLAN_BYTES} are allowed",
                    text.len()
                ),
            ));
        }
        let store = self.runner.store();
        let claim = store
            .claim_of_run(run.id)
            .await?
            .filter(|c| c.active && c.stage == Stage::Plan)
            .ok_or_else(|| {
                PlanError::Conflict(format!(
                    "run {}'s issue is not being planned now: its plan was decided or the issue \
                     ended",
                    run.id
                ))
            })?;
        let plan = store
            .submit_plan(claim.id, claim.repo_id, claim.issue_number, run.id, text)
            .await?;
        self.claims.with(claim.id, |c| c.plan_nudged = false);
        Ok(plan)
    }

    /// The claim of an issue whose plan waits, and the version that waits.
    async fn waiting(&self, repo: &Repo, issue: i64) -> Result<(Claim, Plan), PlanError> {
        let store = self.runner.store();
        let claim = store
            .active_claim_of_issue(repo.id, issue)
            .await?
            .filter(|c| c.stage == Stage::PlanReview)
            .ok_or_else(|| {
                PlanError::Conflict(format!(
                    "issue {issue} of '{}' has no plan waiting for a decision",
                    repo.name
                ))
            })?;
        let plan = store
            .plans_of_claim(claim.id)
            .await?
            .into_iter()
            .rev()
            .find(|p| p.state == PlanState::Proposed)
            .ok_or_else(|| PlanError::Conflict(format!("issue {issue} has no proposed plan")))?;
        Ok((claim, plan))
    }

    /// Approves the plan waiting for `issue` and starts the work run with
    /// it. A work run that cannot start ends the attempt (`failed`, tried
    /// again as the next attempt).
    pub async fn approve_plan(&self, repo: &Repo, issue: i64, by: &str) -> Result<Plan, PlanError> {
        let (claim, mut plan) = self.waiting(repo, issue).await?;
        let store = self.runner.store();
        if !store
            .decide_plan(claim.id, plan.version, PlanState::Approved, by, None)
            .await?
        {
            return Err(PlanError::Conflict(format!(
                "plan version {} was decided meanwhile",
                plan.version
            )));
        }
        plan.state = PlanState::Approved;
        plan.decided_by = Some(by.to_owned());
        self.stop_reviewer(&claim, "its plan was decided").await;
        let plan_run = claim.run_id.unwrap_or(plan.run_id);
        if !store.start_work(claim.id, plan_run).await? {
            return Err(PlanError::Conflict(format!(
                "issue {issue}'s claim moved on meanwhile"
            )));
        }
        if let Err(why) = self.launch_work(repo, &claim, &plan).await {
            store
                .finish_claim(
                    claim.id,
                    Outcome::Failed,
                    &format!("the plan was approved, but the work run could not start: {why}"),
                )
                .await?;
        }
        Ok(plan)
    }

    /// Rejects the plan waiting for `issue` with `reason`: the planning
    /// session goes on with it, or when the plan rounds are used up the
    /// issue needs a person (`plan rejected: …`).
    pub async fn reject_plan(
        &self,
        repo: &Repo,
        issue: i64,
        by: &str,
        reason: &str,
    ) -> Result<Plan, PlanError> {
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(invalid(
                "reason",
                "say why the plan is rejected (the planning run is told)".into(),
            ));
        }
        if reason.chars().count() > crate::knob::MAX_TEXT {
            return Err(invalid(
                "reason",
                format!("at most {} characters are allowed", crate::knob::MAX_TEXT),
            ));
        }
        let (claim, mut plan) = self.waiting(repo, issue).await?;
        let store = self.runner.store();
        let settings = store.settings().await?;
        if !store
            .decide_plan(
                claim.id,
                plan.version,
                PlanState::Rejected,
                by,
                Some(reason),
            )
            .await?
        {
            return Err(PlanError::Conflict(format!(
                "plan version {} was decided meanwhile",
                plan.version
            )));
        }
        plan.state = PlanState::Rejected;
        plan.decided_by = Some(by.to_owned());
        self.stop_reviewer(&claim, "its plan was decided").await;
        plan.reason = Some(reason.to_owned());
        let max = settings.afk.max_plan_rounds;
        let round = claim.plan_rounds + 2;
        if round > max {
            let detail = format!(
                "plan rejected: {reason} (after {} plan round(s), the limit: afk.max_plan_rounds)",
                round - 1
            );
            if store
                .finish_claim(claim.id, Outcome::NeedsHuman, &detail)
                .await?
            {
                let run = claim.run_id.unwrap_or(plan.run_id);
                store.note_run_reason(run, &detail).await?;
            }
            return Ok(plan);
        }
        if !store
            .move_claim(claim.id, Stage::PlanReview, Stage::Plan, true)
            .await?
        {
            return Err(PlanError::Conflict(format!(
                "issue {issue}'s claim moved on meanwhile"
            )));
        }
        let text = prompt::plan_rejected(plan.version, by, reason, round, max);
        let run_id = claim.run_id.unwrap_or(plan.run_id);
        match self.runner.resume_stopped(run_id, text).await {
            Ok(r) if r.state.is_active() => {}
            Ok(r) => {
                let why = format!(
                    "plan rejected: {reason}; the planning session could not go on: {}",
                    r.state_reason.unwrap_or_default()
                );
                store
                    .finish_claim(claim.id, Outcome::NeedsHuman, &why)
                    .await?;
            }
            Err(e) => {
                let why =
                    format!("plan rejected: {reason}; the planning session could not go on: {e}");
                store
                    .finish_claim(claim.id, Outcome::NeedsHuman, &why)
                    .await?;
            }
        }
        Ok(plan)
    }

    /// The work run of a claim whose plan was approved.
    async fn launch_work(&self, repo: &Repo, claim: &Claim, plan: &Plan) -> Result<Run, String> {
        let store = self.runner.store();
        let settings = store.settings().await.map_err(|e| e.to_string())?;
        let source = self.sources.of(repo);
        let issue = source
            .issue(claim.issue_number)
            .await
            .map_err(|e| e.to_string())?;
        let directives = self
            .directives_for(repo, &settings, source.as_ref(), &issue)
            .await
            .ok_or("the issue's directives are refused now")?;
        self.launch_kind(
            repo,
            &settings,
            &issue,
            directives.layer(),
            claim.id,
            Some(plan),
        )
        .await
        .map_err(|e| e.to_string())
    }
}
