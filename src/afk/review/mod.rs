//! The review phase of an AFK issue (issue 28 §3). An issue whose `review`
//! is `on` gets, once its pull request's checks are green, a review run: a
//! read-only workspace at the pull request's head, the issue, the approved
//! plan, the diff, what the checks said and the knobs' review fragments.
//! Its agent submits a verdict (`labctl review submit`); a verdict lab
//! refuses gets one retry, then the issue needs a person. An approval lets
//! the claim be judged as before (`pr-green`); changes requested type the
//! findings into the work run's same session as the next round (resumed:
//! lab had stopped it), then the checks and the review run again, up to
//! `afk.max_rounds`.
//!
//! Trust boundary: the verdict and the diff are agents' bytes. The
//! reviewer's workspace is checked out inside its own sandbox
//! (`Workspaces::check_out`); the diff is read from the repo as fetched
//! back (host side, git's own protocol carried it, no external diff). The
//! verdict's text goes to lab's own pages and, fenced as data, to the work
//! run; a forge hears lab's sentence about it (the verdict, its counts,
//! where to read it), never its words.

use super::Scheduler;
use super::no_answer::Answers;
use super::prompt;
use crate::domain::{
    ChecksState, Outcome, PlanState, Review, RoundCause, Run, RunIssue, RunKind, RunState, Stage,
    StopCause, Verdict,
};
use crate::repo::Repo;
use crate::repo::issue_source::SourceKind;
use crate::run::LaunchRequest;
use crate::settings::Settings;
use crate::store::{Claim, RepoKey, StoreError};

mod submit;
pub use submit::ReviewError;

/// Whether `knobs` ask for a review.
pub fn wanted(knobs: &[crate::knob::Resolved]) -> bool {
    knobs
        .iter()
        .find(|k| k.key == crate::knob::Review.key())
        .and_then(|k| k.value.as_str())
        .is_some_and(|v| v == "on")
}

use crate::knob::Knob;

/// The most bytes of the diff a review prompt carries.
const DIFF_BYTES: usize = 96 * 1024;

impl Scheduler {
    /// Whether the claim's work, green, waits for a review first: its
    /// knobs ask for one and no review approved this round's head.
    pub(super) async fn review_due(&self, claim: &Claim, run: &Run) -> Result<bool, StoreError> {
        if run.kind != RunKind::Afk || claim.pr_url.is_none() || !wanted(&run.knobs) {
            return Ok(false);
        }
        let reviews = self.runner.store().reviews_of_claim(claim.id).await?;
        Ok(!reviews
            .last()
            .is_some_and(|r| r.round == claim.rounds && r.verdict == Verdict::Approved))
    }

    /// Starts the review of the claim's pull request: the claim moves to
    /// `review` and its review run starts. One that cannot start ends the
    /// claim for a person (its pull request is open and green).
    pub(super) async fn begin_review(
        &self,
        claim: &Claim,
        run: &Run,
        repo: &Repo,
    ) -> Result<(), StoreError> {
        let store = self.runner.store();
        if claim.stage == Stage::Work
            && !store
                .move_claim(claim.id, Stage::Work, Stage::Review, false)
                .await?
        {
            return Ok(());
        }
        if let Err(why) = Box::pin(self.launch_review(claim, run, repo)).await {
            tracing::warn!(claim = claim.id, %why, "the review run could not start");
            let url = claim.pr_url.clone().unwrap_or_default();
            store
                .finish_claim(
                    claim.id,
                    Outcome::NeedsHuman,
                    &format!(
                        "{url} (its checks passed, but its review run could not start: {why})"
                    ),
                )
                .await?;
        }
        Ok(())
    }

    async fn launch_review(&self, claim: &Claim, run: &Run, repo: &Repo) -> Result<Run, String> {
        let store = self.runner.store();
        let settings = store.settings().await.map_err(|e| e.to_string())?;
        let branch = run.branch.as_deref().ok_or("the work run has no branch")?;
        let ws = self.runner.workspaces();
        // The branch as the work run left it (its last round may not have
        // been collected: no check command ran it).
        if let Some(dir) = run.workspace.as_deref() {
            let jail = self.runner.jail(run, Some(repo));
            if let Err(e) = ws
                .collect(repo, std::path::Path::new(dir), branch, jail.as_ref())
                .await
            {
                tracing::warn!(run = run.id, error = %e, "could not take the run's branch");
            }
        }
        let head = ws
            .branch_head(repo, branch)
            .await
            .ok_or_else(|| format!("the branch '{branch}' is not in the repo"))?;
        let base = ws
            .branch_head(repo, &repo.default_branch)
            .await
            .ok_or_else(|| format!("the repo has no branch '{}'", repo.default_branch))?;
        let limits = crate::diff::Limits {
            file: DIFF_BYTES,
            total: DIFF_BYTES,
        };
        let diff = ws
            .range_diff(repo, &base, &head, limits)
            .await
            .map_err(|e| e.to_string())?;
        let issue = self
            .sources
            .of(repo)
            .issue(claim.issue_number)
            .await
            .map_err(|e| e.to_string())?;
        let plan = store
            .plans_of_claim(claim.id)
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .rev()
            .find(|p| p.state == PlanState::Approved);
        let checks = match claim.checks.as_deref().map(ChecksState::parse) {
            Some(ChecksState::None) | None => "there are none".to_owned(),
            Some(c) => c.text(),
        };
        let text = prompt::review(
            &prompt::ReviewBrief {
                issue: &issue,
                plan: plan.as_ref(),
                base: &diff.base,
                head: &head,
                diff: &diff_text(&diff),
                diff_cut: diff.truncated,
                checks: &checks,
                round: claim.rounds,
                max: settings.afk.max_rounds,
            },
            &run.knobs,
        );
        let review = self
            .launch_reviewer(claim, run, repo, &issue, text, Some(head))
            .await?;
        tracing::info!(claim = claim.id, run = review.id, "review run started");
        Ok(review)
    }

    /// Launches a review run for `claim` (of its pull request, or of its
    /// plan): the review run defaults, the work's knobs, tied to the claim
    /// as its reviewer; its workspace at `start_at` when given, else the
    /// base.
    pub(super) async fn launch_reviewer(
        &self,
        claim: &Claim,
        run: &Run,
        repo: &Repo,
        issue: &crate::issues::Issue,
        prompt: String,
        start_at: Option<String>,
    ) -> Result<Run, String> {
        // A new reviewer: its nudge and its retry are its own.
        self.claims.with(claim.id, |c| {
            c.review_nudged = false;
            c.review_refused = 0;
        });
        let global = self
            .runner
            .store()
            .repo_with_global(&RepoKey::Id(repo.id))
            .await
            .map_err(|e| e.to_string())?
            .1;
        self.runner
            .launch(LaunchRequest {
                options: Default::default(),
                repo: repo.clone(),
                global,
                kind: RunKind::Review,
                provider: None,
                model: None,
                effort: None,
                prompt,
                prompt_names_branch: false,
                env: [("LAB_ISSUE".to_owned(), claim.issue_number.to_string())].into(),
                afk_claim: Some(claim.id),
                issue_layer: None,
                knobs: run.knobs.clone(),
                issue: run.issue.clone().or_else(|| {
                    Some(RunIssue {
                        number: claim.issue_number,
                        title: issue.title.clone(),
                        url: issue.url.clone(),
                    })
                }),
                start_at,
            })
            .await
            .map_err(|e| e.to_string())
    }

    /// What a settle does with a claim in review: follows its review run
    /// and acts on its verdict once there is one.
    pub(super) async fn settle_review(
        &self,
        claim: &Claim,
        work: &Run,
        settings: &Settings,
        repo: Option<&Repo>,
    ) -> Result<(), StoreError> {
        let Some(repo) = repo else {
            self.runner
                .store()
                .finish_claim(claim.id, Outcome::Failed, "its repo was removed")
                .await?;
            return Ok(());
        };
        if claim.review_run_id.is_none() {
            // lab stopped between the move and the review run's launch.
            return Box::pin(self.begin_review(claim, work, repo)).await;
        }
        match self.follow_reviewer(claim, settings, repo).await? {
            Some(v) => Box::pin(self.act_on(claim, work, repo, settings, &v)).await,
            None => Ok(()),
        }
    }

    /// Follows a claim's review run (of its pull request or of its plan):
    /// its verdict once submitted (the run is stopped then); over its
    /// budget, or a turn that ended without a verdict (told once, then)
    /// or a run that ended without one, and the issue needs a person.
    /// `None` while it works, or once the claim was ended.
    pub(super) async fn follow_reviewer(
        &self,
        claim: &Claim,
        settings: &Settings,
        repo: &Repo,
    ) -> Result<Option<Review>, StoreError> {
        let store = self.runner.store();
        let Some(review_id) = claim.review_run_id else {
            return Ok(None);
        };
        let review = match store.run(review_id).await {
            Ok(r) => r,
            Err(StoreError::NotFound) => {
                self.needs_human(claim, "its review run was removed")
                    .await?;
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let verdict = store
            .reviews_of_claim(claim.id)
            .await?
            .into_iter()
            .find(|r| r.run_id == review.id);
        if let Some(v) = verdict {
            if review.state.is_active() {
                let _ = self
                    .runner
                    .stop(review.id, StopCause::Reviewed, "it submitted its verdict")
                    .await;
            }
            return Ok(Some(v));
        }
        if review.state.is_active() {
            let budget = super::budget::of(&review, Some(repo), settings);
            if let Some((cause, why)) =
                super::budget::over(&review, &budget, self.runner.cfg().limit_minute_ms)
            {
                let _ = self.runner.stop(review.id, cause, &why).await;
                self.needs_human(claim, &format!("its review run was stopped: {why}"))
                    .await?;
                return Ok(None);
            }
            // A review run whose model does not answer is asked again, not
            // told it has no verdict yet; too long without an answer, and
            // a person judges (`no_answer.rs`).
            match self.follow_answers(claim, &review).await {
                Answers::Fine => {}
                Answers::Awaited => return Ok(None),
                Answers::End(why) => {
                    let _ = self
                        .runner
                        .stop(review.id, StopCause::CliUnusable, &why)
                        .await;
                    self.needs_human(claim, &format!("its review run was stopped: {why}"))
                        .await?;
                    return Ok(None);
                }
            }
            if !super::turn_ended(&review) {
                return Ok(None);
            }
            if !self
                .claims
                .with(claim.id, |c| std::mem::replace(&mut c.review_nudged, true))
            {
                let _ = self
                    .tell(claim, &review, prompt::REVIEW_MISSING, "no verdict yet")
                    .await;
                return Ok(None);
            }
            let why = "its review run ended its turn twice without a verdict";
            let _ = self.runner.stop(review.id, StopCause::Reviewed, why).await;
            self.needs_human(claim, why).await?;
            return Ok(None);
        }
        if review.stop_cause == Some(StopCause::Operator) {
            store
                .finish_claim(
                    claim.id,
                    Outcome::Stopped,
                    "An operator stopped its review run. lab tries this issue again when a \
                     person puts its ready label back.",
                )
                .await?;
            return Ok(None);
        }
        self.needs_human(claim, "its review run ended without a verdict")
            .await?;
        Ok(None)
    }

    /// Stops the claim's review run when it is live (a person decided its
    /// plan first).
    pub(super) async fn stop_reviewer(&self, claim: &Claim, why: &str) {
        let Some(id) = claim.review_run_id else {
            return;
        };
        if self
            .runner
            .store()
            .run(id)
            .await
            .is_ok_and(|r| r.state.is_active())
        {
            let _ = self.runner.stop(id, StopCause::Reviewed, why).await;
        }
    }

    /// A verdict, acted on: an approval lets the claim be judged; changes
    /// requested start the next round in the work run's session while
    /// rounds are left.
    async fn act_on(
        &self,
        claim: &Claim,
        work: &Run,
        repo: &Repo,
        settings: &Settings,
        review: &Review,
    ) -> Result<(), StoreError> {
        let store = self.runner.store();
        self.post_verdict(claim, repo, review).await;
        if review.verdict == Verdict::Approved {
            store.end_review(claim.id).await?;
            return Ok(());
        }
        let max = settings.afk.max_rounds;
        if claim.rounds >= max {
            return self
                .needs_human(
                    claim,
                    &format!(
                        "a review still asks for changes after {} round(s), the limit \
                         (afk.max_rounds)",
                        claim.rounds
                    ),
                )
                .await;
        }
        let key = format!("{}:review", review.head);
        if !store
            .start_round(claim.id, &key, RoundCause::Review)
            .await?
        {
            return self
                .needs_human(
                    claim,
                    "a review asks for changes on the same commit as before: the last round \
                     changed nothing",
                )
                .await;
        }
        store.clear_claim_checks(claim.id).await?;
        if !store.end_review(claim.id).await? {
            return Ok(());
        }
        let text = prompt::review_round(review, claim.rounds + 1, max);
        let resumed = match work.state {
            RunState::Stopped => self.runner.resume_stopped(work.id, text).await,
            _ => self.runner.resume_round(work.id, text).await,
        };
        match resumed {
            Ok(r) if r.state.is_active() => {
                tracing::info!(
                    run = work.id,
                    round = claim.rounds + 1,
                    "a review asked for changes: the session resumes for a new round"
                );
                Ok(())
            }
            Ok(r) => {
                self.needs_human(
                    claim,
                    &format!(
                        "a review asked for changes and the session could not be resumed: {}",
                        r.state_reason.unwrap_or_default()
                    ),
                )
                .await
            }
            Err(e) => {
                self.needs_human(
                    claim,
                    &format!(
                        "a review asked for changes and lab could not resume the session: {e}"
                    ),
                )
                .await
            }
        }
    }

    /// Ends the claim for a person (`review: <why>`), naming its pull
    /// request.
    pub(super) async fn needs_human(&self, claim: &Claim, why: &str) -> Result<(), StoreError> {
        let detail = match &claim.pr_url {
            Some(url) => format!("review: {why}; its pull request: {url}"),
            None => format!("review: {why}"),
        };
        let store = self.runner.store();
        if store
            .finish_claim(claim.id, Outcome::NeedsHuman, &detail)
            .await?
            && let Some(work) = claim.run_id
        {
            store
                .note_run_reason(work, &format!("review: {why}"))
                .await?;
        }
        Ok(())
    }

    /// Tells a forge pull request what the review concluded, in lab's
    /// words, as a review comment (the built-in tracker shows the verdict
    /// on its page).
    async fn post_verdict(&self, claim: &Claim, repo: &Repo, review: &Review) {
        if repo.issues.source == SourceKind::Builtin {
            return;
        }
        let Some(number) = claim.pr_number else {
            return;
        };
        let blocking = review.blocking().count();
        let text = format!(
            "{mark}\nlab's review run {run} {verdict} {head}: {blocking} blocking and {advisory} \
             advisory finding(s). Its summary and findings: {url}/repos/{repo}/issues/{issue}",
            mark = super::forge_feedback::LAB_MARK,
            run = review.run_id,
            verdict = match review.verdict {
                Verdict::Approved => "approved",
                Verdict::ChangesRequested => "asked for changes on",
            },
            head = review.head.chars().take(12).collect::<String>(),
            advisory = review.findings.len() - blocking,
            url = self.runner.cfg().lab_url.trim_end_matches('/'),
            repo = repo.name,
            issue = claim.issue_number,
        );
        if let Err(e) = self.sources.of(repo).review_comment(number, &text).await {
            tracing::warn!(claim = claim.id, error = %e, "could not post the review's verdict");
        }
    }
}

/// The diff as a review prompt carries it: each file's header and patch.
fn diff_text(d: &crate::diff::Diff) -> String {
    let mut out = String::new();
    for f in &d.files {
        let from = f.old_path.as_deref().unwrap_or(&f.path);
        out.push_str(&format!(
            "diff {from} -> {} ({}, +{} -{}{})\n",
            f.path,
            f.status.as_str(),
            f.added,
            f.removed,
            if f.binary { ", binary" } else { "" }
        ));
        out.push_str(&f.patch);
        if !f.patch.ends_with('\n') && !f.patch.is_empty() {
            out.push('\n');
        }
    }
    if out.is_empty() {
        out.push_str("(no changes)");
    }
    out
}
