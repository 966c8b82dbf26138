//! How AFK runs end: an [`Outcome`] (a pull request and how its checks
//! went, `failed` with the exit status, `timed-out`, `over-budget`, or
//! `cli-unusable` when the agent CLI cannot work). The issue is then relabelled with the outcome's label,
//! so it is not taken again until a person puts the ready label back, and
//! commented.

use std::time::Instant;

use super::judge::{ended_how, judge, judged_by_scope, quick_exit};
use super::ticks::Pace;
use super::{Scheduler, TickReport};
use crate::domain::{Outcome, Run, StopCause};
use crate::repo::issue_source::SourceKind;

use crate::store::{Claim, RepoKey, StoreError, now_ms};

impl Scheduler {
    /// Records the endings of this node's AFK runs, ends the ones past the
    /// time limit (or done after opening their pull request), and tells the
    /// issues. Counted once it is over, with the pace it found for the loop
    /// (`Ticks::settled`), whether or not it could read everything.
    pub(super) async fn settle(&self, report: &mut TickReport) -> Result<(), StoreError> {
        let mut pace = Pace::Quiet;
        let settled = self.settle_claims(report, &mut pace).await;
        // A settle that failed to read looks again within a second.
        self.ticks
            .settled(if settled.is_err() { Pace::Follow } else { pace });
        settled
    }

    async fn settle_claims(
        &self,
        report: &mut TickReport,
        pace: &mut Pace,
    ) -> Result<(), StoreError> {
        let store = &self.runner.store();
        let settings = store.settings().await?;
        let active = store.active_claims(self.runner.node()).await?;
        for claim in active {
            let Some(run_id) = claim.run_id else {
                // A claim whose launch never finished (lab stopped meanwhile).
                if now_ms() - claim.claimed_at > LAUNCH_LIMIT_MS {
                    store.release_claim(claim.id).await?;
                } else {
                    // Its launch names its run (a claims write), or it is
                    // released then.
                    *pace = pace.and(Pace::Watch {
                        until_ms: Some(claim.claimed_at + LAUNCH_LIMIT_MS + 1),
                    });
                }
                continue;
            };
            let mut run = match store.run(run_id).await {
                Ok(r) => r,
                Err(StoreError::NotFound) => {
                    self.claims.land(claim.id, |c| c.judged = true);
                    if store
                        .finish_claim(claim.id, Outcome::Failed, "its run was removed")
                        .await?
                    {
                        report.finished.push(run_id);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            if run.state == crate::domain::RunState::Lost && self.settle_lost(&mut run).await? {
                *pace = pace.and(Pace::Follow);
                continue;
            }
            let repo = match store.repo(&RepoKey::Id(claim.repo_id)).await {
                Ok(r) => Some(r),
                Err(StoreError::NotFound) => None,
                Err(e) => return Err(e),
            };
            if claim.stage == crate::domain::Stage::Review {
                // Its green pull request's review run judges it.
                self.settle_review(&claim, &run, &settings, repo.as_ref())
                    .await?;
                *pace = pace.and(Pace::Follow);
                continue;
            }
            if claim.stage != crate::domain::Stage::Work {
                // Before the work: its planning run, or its plan waiting.
                let working = self
                    .settle_plan(&claim, &run, &settings, repo.as_ref())
                    .await?;
                // A plan waiting for a person wakes the loop by its
                // decision (a claims write), or on a forge, by a comment
                // read on a clock; a planning or reviewing run is followed.
                if working {
                    *pace = pace.and(Pace::Follow);
                }
                if let Some(repo) = repo.as_ref()
                    && repo.issues.source != SourceKind::Builtin
                {
                    self.plan_commands(&claim, repo).await?;
                    *pace = pace.and(Pace::Watch {
                        until_ms: Some(now_ms() + self.runner.cfg().forge_poll.as_millis() as i64),
                    });
                }
                continue;
            }
            if run.state.is_active()
                && let Some(why) = self.unusable(&run).await
            {
                // The run's own word ends the run; only the CLI's own check
                // holds the provider's other runs back.
                match self.runner.stop(run_id, StopCause::CliUnusable, &why).await {
                    Ok(r) => run = r,
                    Err(e) => {
                        tracing::warn!(run = run_id, error = %e, "could not end an AFK run");
                        continue;
                    }
                }
                if let Ok(provider) = run.provider_id() {
                    self.check_cli(provider, false).await;
                }
            }
            if run.state.is_active() {
                let waiting = self.follow_limit(&claim, &run).await;
                // A run whose model does not answer is not judged by its
                // turns meanwhile; too long without one ends it.
                let answers = self.follow_answers(&claim, &run).await;
                let awaited = answers != super::no_answer::Answers::Fine;
                let why = match answers {
                    super::no_answer::Answers::End(why) => Some((StopCause::CliUnusable, why)),
                    _ => {
                        self.watch(&claim, &run, repo.as_ref(), &settings, waiting || awaited)
                            .await
                    }
                };
                // A run whose agent waits is looked at every second, as
                // before: its screen may yet say its CLI cannot work.
                let agent_waits = run
                    .agent
                    .as_ref()
                    .is_some_and(|a| a.state == crate::domain::AgentState::Waiting);
                *pace = pace.and(
                    if waiting || awaited || agent_waits || claim.pr_url.is_some() {
                        Pace::Follow
                    } else {
                        Pace::Watch {
                            until_ms: Some(super::budget::time_limit_at(
                                &run,
                                repo.as_ref(),
                                &settings,
                                self.runner.cfg().limit_minute_ms,
                            )),
                        }
                    },
                );
                let Some((cause, why)) = why else { continue };
                match self.runner.stop(run_id, cause, &why).await {
                    Ok(r) => run = r,
                    Err(e) => {
                        tracing::warn!(run = run_id, error = %e, "could not end an AFK run");
                        continue;
                    }
                }
                if run.state.is_active() {
                    continue;
                }
            }
            // A forge pull request of an agent that ended its session on its
            // own is followed as a live one's is; a round resumes the
            // session (within the run's time limit, counted from its start).
            let ended_cause = match self
                .follow_ended(&claim, &run, repo.as_ref(), &settings)
                .await
            {
                Ended::Wait => {
                    *pace = pace.and(Pace::Follow);
                    continue;
                }
                Ended::Judge(cause) => cause,
            };
            if ended_cause.is_none()
                && run.stop_cause != Some(StopCause::Operator)
                && claim.pr_url.is_some()
                && claim.checks.is_none()
                && !self
                    .check_after_end(&claim, &run, repo.as_ref(), settings.afk.max_rounds)
                    .await
            {
                // Its check runs: the outcome waits for it.
                *pace = pace.and(Pace::Follow);
                continue;
            }
            // The claim as it is now (its checks may have been noted since
            // it was read).
            let claim = store.claim_of_run(run_id).await?.unwrap_or(claim);
            if claim.pr_url.is_none()
                && let Some(repo) = repo.as_ref()
            {
                // A run that ended without a pull request may have left its
                // branch out of scope without asking for one: lab looks.
                self.scope_at_end(&claim, &run, repo).await;
            }
            let scope = self.claims.peek(claim.id, |c| c.scope.clone()).flatten();
            let (mut outcome, mut detail) = judge(
                &claim,
                &run,
                settings.afk.max_rounds,
                ended_cause,
                scope.as_ref(),
                &self.runner.cfg().lab_url,
            );
            // Green, and its knobs ask for a review first (issue 28 §3).
            if outcome == Outcome::PrGreen
                && let Some(repo) = repo.as_ref()
                && self.review_due(&claim, &run).await?
            {
                Box::pin(self.begin_review(&claim, &run, repo)).await?;
                *pace = pace.and(Pace::Follow);
                continue;
            }
            // Judged now: nothing of its following counts any more (its
            // state goes once its issue is told).
            self.claims.with(claim.id, |c| c.judged = true);
            // Out of scope at its end: the run's page says so, naming the
            // paths (escaped), as a run whose rounds ran out does.
            if let Some(b) = judged_by_scope(&claim, run.stop_cause.or(ended_cause), scope.as_ref())
                && run.stop_cause != Some(StopCause::Scope)
            {
                let why = format!("scope: {}; {}", b.named(), ended_how(&run));
                store.note_run_reason(run_id, &why).await?;
            }
            // A CLI that exits as soon as it starts: lab checks it, and only
            // its check makes the ending the CLI's fault.
            if outcome == Outcome::Failed
                && quick_exit(&run)
                && let Ok(provider) = run.provider_id()
                && let Some(why) = self.check_cli(provider, false).await
            {
                outcome = Outcome::CliUnusable;
                detail = format!(
                    "its CLI exited {} s after it started, and lab's own check of the CLI says: {why}.",
                    (run.ended_at.unwrap_or(0) - run.started_at.unwrap_or(0)) / 1000
                );
            }
            let retry_at = (outcome.retryable() && claim.attempt < settings.afk.max_attempts)
                .then(|| now_ms() + retry_backoff(settings.afk.tick_seconds, claim.attempt));
            if store
                .finish_claim_retry(claim.id, outcome, &detail, retry_at)
                .await?
            {
                tracing::info!(
                    run = run_id,
                    issue = claim.issue_number,
                    outcome = outcome.as_str(),
                    "AFK run ended"
                );
                report.finished.push(run_id);
            }
        }
        let to_tell = store.claims_to_relabel(self.runner.node()).await?;
        if !to_tell.is_empty() {
            // An issue lab could not tell yet is asked again on a clock.
            *pace = pace.and(Pace::Follow);
        }
        for claim in to_tell {
            self.tell_issue(&claim).await;
        }
        Ok(())
    }

    /// Relabels and comments the issue of an ended claim; retried next tick
    /// when the source fails (the issue stays blocked meanwhile).
    async fn tell_issue(&self, claim: &Claim) {
        let store = &self.runner.store();
        // A review run still live when its claim was judged (its verdict
        // refused twice, lab stopped meanwhile) ends with it.
        if let Some(review) = claim.review_run_id
            && store.run(review).await.is_ok_and(|r| r.state.is_active())
        {
            let _ = self
                .runner
                .stop(
                    review,
                    StopCause::Reviewed,
                    "its issue's outcome is recorded",
                )
                .await;
        }
        let waiting = self.claims.peek(claim.id, |c| c.tell_retry).flatten();
        if waiting.is_some_and(|at| Instant::now() < at) {
            return;
        }
        let repo = match store.repo(&RepoKey::Id(claim.repo_id)).await {
            Ok(r) => r,
            Err(StoreError::NotFound) => {
                // The repo is gone, and its issues with it: nobody to tell.
                self.told(claim).await;
                return;
            }
            Err(e) => {
                tracing::warn!(claim = claim.id, error = %e, "cannot read the repo of an ended AFK run");
                return;
            }
        };
        let outcome = claim.outcome.unwrap_or(Outcome::Failed);
        let run = claim
            .run_id
            .map(|r| format!("run {r}"))
            .unwrap_or_else(|| "an AFK run".into());
        let with = match (&claim.model, &claim.effort) {
            (Some(m), Some(e)) => format!(" ({m}, {e} effort)"),
            _ => String::new(),
        };
        let detail = claim.detail.as_deref().unwrap_or("");
        let attempt = if claim.attempt > 1 {
            format!(" (attempt {})", claim.attempt)
        } else {
            String::new()
        };
        let run = format!("{run}{attempt}");
        let text = match outcome {
            Outcome::PrGreen => {
                format!(
                    "lab's {run}{with} opened a pull request for this issue, and its checks passed: {detail}"
                )
            }
            Outcome::PrOpened => {
                format!("lab's {run}{with} opened a pull request for this issue: {detail}")
            }
            Outcome::NeedsHuman => format!(
                "lab's {run}{with} opened a pull request for this issue, and it needs a person now: {detail}"
            ),
            Outcome::OverBudget => {
                format!("lab's {run}{with} was stopped: it spent more than its budget.\n\n{detail}")
            }
            Outcome::TimedOut => format!(
                "lab's {run}{with} was stopped at the run time limit without a pull request.\n\n{detail}"
            ),
            Outcome::Failed => {
                format!("lab's {run}{with} ended without a pull request.\n\n{detail}")
            }
            Outcome::PrMerged => {
                format!(
                    "lab's {run}{with} opened a pull request for this issue, and it was merged: {detail}"
                )
            }
            Outcome::Stopped => format!("lab's {run}{with} was stopped by an operator. {detail}"),
            Outcome::CliUnusable => format!(
                "lab's {run}{with} could not work on this issue: {detail} lab checks the CLI itself \
                 and starts no AFK run of it while it cannot work."
            ),
            Outcome::PrClosed => format!(
                "lab's {run}{with} opened a pull request for this issue, and it was closed without being merged: {detail}"
            ),
        };
        let source = self.sources.of(&repo);
        // The pull request's description ends with the whole receipt.
        super::pull::write_receipt(&self.runner, &self.claims, source.as_ref(), claim, true).await;
        let told = async {
            if claim.retry_at.is_some() {
                // Tried again: the issue keeps its ready label.
                let text = format!(
                    "{text}\n\nlab tries this issue again (attempt {} of at most {}).",
                    claim.attempt + 1,
                    self.runner.store().settings().await?.afk.max_attempts
                );
                return source.comment(claim.issue_number, &text).await;
            }
            source
                .relabel(claim.issue_number, repo.effective_label(), outcome.label())
                .await?;
            source.comment(claim.issue_number, &text).await
        };
        match told.await {
            Ok(()) => self.told(claim).await,
            Err(e) => {
                let at = Instant::now() + TELL_RETRY;
                self.claims.with(claim.id, |c| c.tell_retry = Some(at));
                self.note(
                    &repo.name,
                    Some(format!(
                        "could not tell issue {} how its run ended: {e}",
                        claim.issue_number
                    )),
                );
            }
        }
    }

    /// The issue has been told: the claim stops blocking it, and its last
    /// step on this node is done: its state goes, the one place it does.
    async fn told(&self, claim: &Claim) {
        self.claims.forget(claim.id);
        if let Err(e) = self.runner.store().mark_relabelled(claim.id).await {
            // Told again next time: a repeated comment, not a lost one.
            tracing::warn!(claim = claim.id, error = %e, "cannot record that an issue was told");
        }
    }
}

/// How long a claim may go without naming its run before it is released
/// (its launch never finished: lab stopped meanwhile).
const LAUNCH_LIMIT_MS: i64 = 10 * 60_000;

/// How long lab waits before telling an issue again after its source failed.
const TELL_RETRY: std::time::Duration = std::time::Duration::from_secs(30);

/// What settling does with an ended run's forge pull request.
enum Ended {
    /// Its checks are read, or a round goes on: the outcome waits.
    Wait,
    /// Judge it now (with why the follow-up ended it, if it did).
    Judge(Option<StopCause>),
}

impl Scheduler {
    async fn follow_ended(
        &self,
        claim: &Claim,
        run: &Run,
        repo: Option<&crate::repo::Repo>,
        settings: &crate::settings::Settings,
    ) -> Ended {
        let on_its_own = run.state == crate::domain::RunState::Exited && run.stop_cause.is_none();
        let Some(repo) = repo.filter(|r| r.issues.source != SourceKind::Builtin) else {
            return Ended::Judge(None);
        };
        let Some(number) = claim.pr_number.filter(|_| on_its_own) else {
            return Ended::Judge(None);
        };
        let budget = repo.budget.over(&settings.afk);
        let started = run.started_at.unwrap_or(run.created_at);
        let minute_ms = self.runner.cfg().limit_minute_ms;
        if now_ms() - started > budget.run_timeout_minutes.saturating_mul(minute_ms) {
            return Ended::Judge(None);
        }
        match self.follow_forge(claim, run, repo, settings, number).await {
            None => Ended::Wait,
            Some((cause, why)) => {
                tracing::info!(run = run.id, %why, "the pull request's follow-up ended");
                Ended::Judge(Some(cause))
            }
        }
    }
}

/// How long a failed attempt waits before the next: a tick for the first,
/// doubling after each, at most an hour.
pub fn retry_backoff(tick_seconds: i64, attempt: i64) -> i64 {
    let doubled = tick_seconds
        .max(1)
        .saturating_mul(1 << attempt.clamp(1, 20).saturating_sub(1));
    doubled.min(3600) * 1000
}
