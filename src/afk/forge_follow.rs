//! Following a pull request on a forge (issue 14 §1, ADR 20): when the
//! agent's turn ends, lab pushes the run's branch (once a round) and reads
//! the pull request's state (`IssueSource::pull_status`), at most once per
//! `forge_poll` (`--forge-poll-ms`, 60 s by default) per claim, in a task of
//! its own, so the settle loop (every second) never waits on the forge.
//!
//! - checks pending (or none reported yet, within `PR_GRACE` of the last
//!   push): wait;
//! - red: a round with the failures (key `{head}:{check names}`);
//! - a review asking for changes, or a comment (on a line or in the
//!   conversation) by anyone but lab's own account (who opened the pull
//!   request): a round with its text (key `review:{id}` / `comment:{id}`),
//!   once each;
//! - feedback whose text says `needs-human`: the run ends for a person;
//! - green, or none after the grace: the run ends `pr-green`, once the
//!   repo's own `check_command` (when set) passes too;
//! - merged or closed: the run ends.
//!
//! Rounds are bounded by `afk.max_rounds`; then `needs-human`. A rate limit
//! of the forge moves the next poll to when it asks.

use std::collections::HashSet;
use std::time::Instant;

use super::follow::Verdict;
use super::forge_feedback::{
    ASK_FOR_A_PERSON, Feedback, asks_for_a_person, feedback, round_prompt,
};
use super::{PR_GRACE, Scheduler};
use crate::domain::{AgentState, ChecksState, RoundCause, Run, StopCause};
use crate::issues::SourceError;
use crate::issues::pull_status::{CheckState, Mergeable, PullStatus};
use crate::repo::Repo;
use crate::settings::Settings;
use crate::store::Claim;

/// How long lab waits for the forge to show the head it pushed.
const HEAD_WAIT: std::time::Duration = std::time::Duration::from_secs(120);
/// How soon lab reads again a pull request whose head or mergeability is
/// not known yet.
const SOON: std::time::Duration = std::time::Duration::from_secs(3);

/// The first 12 characters of a commit id.
fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}

/// How the AFK status says a forge's rate limit holds the reads back.
const RATE_LIMITED: &str = "the forge's rate limit: following pull requests waits";

/// Where a claim's following stands on this node (its `ClaimState::forge`).
#[derive(Debug, Default)]
pub(super) struct Follow {
    /// No poll before then.
    next: Option<Instant>,
    /// A push and poll runs.
    busy: bool,
    /// Its answer, for the round it was read in, not yet acted on.
    polled: Option<(i64, Result<PullStatus, SourceError>)>,
    /// The last round whose commits were pushed, and when.
    pushed: Option<(i64, Instant)>,
    /// The commit lab pushed last: the pull request is judged only at it.
    pushed_sha: Option<String>,
    /// The head the forge reported at the last read (what a push of a
    /// rewritten branch may replace: `--force-with-lease`).
    last_head: Option<String>,
    /// Feedback already answered with a round: `review:{id}`, `comment:{id}`.
    answered: HashSet<String>,
}

impl Scheduler {
    /// What to do with a live AFK run whose pull request is on a forge.
    pub(super) async fn follow_forge(
        &self,
        claim: &Claim,
        run: &Run,
        repo: &Repo,
        settings: &Settings,
        number: i64,
    ) -> Verdict {
        // An agent that ended its session is done with its round too.
        let idle = !run.state.is_active()
            || run
                .agent
                .as_ref()
                .is_some_and(|a| a.state == AgentState::Idle);
        let (polled, poll) = self.claims.with(claim.id, |c| {
            let f = &mut c.forge;
            if f.answered.is_empty()
                && let Some(k) = &claim.round_key
            {
                f.answered.insert(k.clone());
            }
            match f.polled.take() {
                Some((round, r)) if round == claim.rounds => (Some(r), None),
                _ => {
                    let due = f.next.is_none_or(|at| Instant::now() >= at);
                    if idle && due && !f.busy {
                        f.busy = true;
                        f.next = Some(Instant::now() + self.runner.cfg().forge_poll);
                        let push = f.pushed.is_none_or(|(r, _)| r < claim.rounds);
                        let lease = f
                            .last_head
                            .clone()
                            .map_or(super::pull::Lease::Unknown, super::pull::Lease::Head);
                        (None, Some((push, lease)))
                    } else {
                        (None, None)
                    }
                }
            }
        });
        if let Some((push, lease)) = poll {
            self.poll(claim, run, repo, number, push, lease);
        }
        match polled? {
            Ok(s) => {
                self.clear_rate_limit_note(&repo.name);
                self.judge_forge(claim, run, repo, settings, s).await
            }
            Err(SourceError::RateLimited { retry_after }) => {
                let next = Instant::now() + retry_after.max(self.runner.cfg().forge_poll);
                self.claims.land(claim.id, |c| c.forge.next = Some(next));
                self.note(
                    &repo.name,
                    Some(format!("{RATE_LIMITED} {} s", retry_after.as_secs())),
                );
                None
            }
            Err(e) => {
                tracing::warn!(claim = claim.id, error = %e, "could not read the pull request");
                None
            }
        }
    }

    /// Whether lab's forge account for `repo` is the operator's own (then
    /// its comments are a person's words).
    async fn operator_account(&self, repo: &Repo) -> bool {
        match self.sources.identity(repo).await {
            Ok(i) => i.is_some_and(|i| i.is_operator),
            Err(e) => {
                tracing::debug!(repo = %repo.name, error = %e, "could not read lab's forge account");
                false
            }
        }
    }

    /// A read went through: the repo's rate-limit note, if it is this
    /// module's, is over.
    fn clear_rate_limit_note(&self, repo: &str) {
        self.problems.clear_if(repo, RATE_LIMITED);
    }

    /// Pushes the round's commits (when not yet) and reads the pull
    /// request, in a task of its own (the claim's follow already says it
    /// is busy); the answer lands in the claim's follow, unless the claim
    /// was forgotten meanwhile.
    fn poll(
        &self,
        claim: &Claim,
        run: &Run,
        repo: &Repo,
        number: i64,
        push: bool,
        lease: super::pull::Lease,
    ) {
        let (runner, claims, source) = (
            self.runner.clone(),
            self.claims.clone(),
            self.sources.of(repo),
        );
        let (run, repo, claim, claim_id, round) = (
            run.clone(),
            repo.clone(),
            claim.clone(),
            claim.id,
            claim.rounds,
        );
        tokio::spawn(async move {
            if push && let Some(branch) = run.branch.as_deref() {
                let pushed = super::pull::deliver(&runner, &repo, &run, branch, lease).await;
                let sha = runner.workspaces().branch_head(&repo, branch).await;
                claims.land(claim_id, |c| {
                    c.forge.pushed = Some((round, Instant::now()));
                    match pushed {
                        // Nothing was pushed: the forge's head stays what
                        // lab last pushed, and the breach is acted on.
                        Err(super::pull::PullError::Scope(b)) => {
                            c.scope_pending = Some((b, sha));
                        }
                        Err(e) => {
                            tracing::warn!(run = run.id, error = %e, "could not push the round's commits");
                            c.forge.pushed_sha = sha;
                        }
                        Ok(()) => c.forge.pushed_sha = sha,
                    }
                });
            }
            // The rounds and checks so far, in its description.
            super::pull::write_receipt(&runner, &claims, source.as_ref(), &claim, false).await;
            let r = source.pull_status(number).await;
            claims.land(claim_id, |c| {
                let f = &mut c.forge;
                f.busy = false;
                if let Ok(s) = &r {
                    f.last_head = Some(s.head_sha.clone());
                }
                f.polled = Some((round, r));
            });
        });
    }

    /// Reads the pull request again soon (its head or mergeability not
    /// known yet), not a whole `forge_poll` later.
    fn poll_soon(&self, claim: &Claim) {
        let soon = Instant::now() + SOON.min(self.runner.cfg().forge_poll);
        self.claims.land(claim.id, |c| {
            c.forge.next = Some(c.forge.next.map_or(soon, |n| n.min(soon)));
        });
    }

    async fn judge_forge(
        &self,
        claim: &Claim,
        run: &Run,
        repo: &Repo,
        settings: &Settings,
        s: PullStatus,
    ) -> Verdict {
        if s.merged || s.closed {
            let (how, checks) = if s.merged {
                ("merged", ChecksState::Merged)
            } else {
                ("closed", ChecksState::Closed)
            };
            self.note_checks(claim, &checks).await;
            return Some((
                StopCause::PullRequest,
                format!("its pull request was {how}; lab ended the run"),
            ));
        }
        if let Some((b, head)) = self.claims.with(claim.id, |c| c.scope_pending.take()) {
            return self
                .scope_round(
                    claim,
                    run,
                    settings.afk.max_rounds,
                    &b,
                    head.as_deref(),
                    super::prompt::Then::Push,
                )
                .await;
        }
        let (answered, pushed_sha, since_push) = self
            .claims
            .peek(claim.id, |c| {
                (
                    c.forge.answered.clone(),
                    c.forge.pushed_sha.clone(),
                    c.forge.pushed.map(|(_, at)| at.elapsed()),
                )
            })
            .unwrap_or_default();
        // Judged only at the commit lab pushed: the forge moves a pull
        // request's head a little after a push.
        if let Some(want) = pushed_sha.filter(|w| *w != s.head_sha) {
            if since_push.is_none_or(|e| e < HEAD_WAIT) {
                self.poll_soon(claim);
                return None;
            }
            return Some((
                StopCause::Rounds,
                format!(
                    "the forge shows {} as the pull request's head {} s after lab pushed {}",
                    short(&s.head_sha),
                    HEAD_WAIT.as_secs(),
                    short(&want)
                ),
            ));
        }
        let new = feedback(&s, &answered, self.operator_account(repo).await);
        if let Some(f) = new.iter().find(|f| asks_for_a_person(&f.text)) {
            return Some((
                StopCause::Rounds,
                format!("{} asked for a person ({ASK_FOR_A_PERSON})", f.author),
            ));
        }
        if !s.unreadable.is_empty() {
            self.note(
                &repo.name,
                Some(format!(
                    "the forge refused some of the pull request's checks ({}); lab reads the others",
                    s.unreadable.join("; ")
                )),
            );
        }
        if s.mergeable == Mergeable::Conflict {
            return self
                .conflict_round(claim, run, repo, settings.afk.max_rounds, &s)
                .await;
        }
        let red = match &s.checks {
            CheckState::Red(fails) => Some(fails.clone()),
            CheckState::Blocked(fails) => {
                let what = fails
                    .iter()
                    .map(|f| format!("{} ({})", f.name, f.text))
                    .collect::<Vec<_>>()
                    .join(", ");
                self.note_checks(claim, &ChecksState::Blocked(what.clone()))
                    .await;
                // A workflow awaiting a maintainer's approval may still
                // run: wait. Stale or cancelled ones will not: a person.
                if fails.iter().all(|f| f.text.starts_with("action_required")) {
                    return None;
                }
                return Some((
                    StopCause::Rounds,
                    format!("its checks ended without a verdict the agent can change: {what}"),
                ));
            }
            CheckState::Pending => {
                self.note_checks(claim, &ChecksState::Pending).await;
                None
            }
            CheckState::None if since_push.is_some_and(|e| e < PR_GRACE) => None,
            CheckState::None if !s.unreadable.is_empty() => {
                // Nothing readable reported: never taken for green.
                self.note_checks(claim, &ChecksState::Unreadable(s.unreadable.join("; ")))
                    .await;
                None
            }
            _ if s.mergeable == Mergeable::Unknown => {
                // The forge still computes whether it merges: never green
                // before it says.
                self.poll_soon(claim);
                None
            }
            CheckState::None | CheckState::Green if new.is_empty() => {
                let checks = if s.checks == CheckState::Green {
                    ChecksState::Passed
                } else {
                    ChecksState::None
                };
                if let Some(command) = repo.effective_check_command() {
                    // Beside the forge's checks, the repo's own must pass.
                    return self
                        .with_check(claim, run, repo, command, settings.afk.max_rounds)
                        .await;
                }
                self.note_checks(claim, &checks).await;
                return Some((
                    StopCause::PullRequest,
                    format!("its pull request's checks: {checks}; lab ended the run"),
                ));
            }
            _ => None,
        };
        if red.is_none() && new.is_empty() {
            return None;
        }
        self.forge_round(claim, run, settings.afk.max_rounds, &s, red, new)
            .await
    }

    /// A pull request that conflicts with its base: one round asking the
    /// agent to bring its branch up to date (the base's new commits are in
    /// its clone already: lab fetched them into the repo its clone borrows
    /// from); still conflicting after it, a person.
    async fn conflict_round(
        &self,
        claim: &Claim,
        run: &Run,
        repo: &Repo,
        max_rounds: i64,
        s: &PullStatus,
    ) -> Verdict {
        self.note_checks(claim, &ChecksState::Conflict).await;
        let base = &repo.default_branch;
        let stays = || {
            Some((
                StopCause::Rounds,
                format!("its pull request conflicts with '{base}', and a round did not resolve it"),
            ))
        };
        if claim.rounds >= max_rounds
            || claim
                .round_key
                .as_deref()
                .is_some_and(|k| k.starts_with("conflict:"))
        {
            return stays();
        }
        let Some(head) = self.runner.workspaces().base_head(repo).await else {
            return stays();
        };
        match self
            .runner
            .store()
            .start_round(
                claim.id,
                &format!("conflict:{}", s.head_sha),
                RoundCause::Conflict,
            )
            .await
        {
            Ok(true) => {}
            Ok(false) => return stays(),
            Err(e) => {
                tracing::warn!(claim = claim.id, error = %e, "could not start a round");
                return None;
            }
        }
        let text = format!(
            "lab: your pull request conflicts with `{base}` (round {} of {max_rounds}). `{base}` \
             is now at {head}; that commit is in your clone already. Bring your branch up to \
             date: `git merge {head}` (or rebase onto it), resolve the conflicts, commit on this \
             branch, and end your turn; lab pushes it and reads the pull request again.",
            claim.rounds + 1
        );
        self.tell(
            claim,
            run,
            &text,
            "its pull request conflicts with its base",
        )
        .await
    }

    /// A round for red checks and/or new feedback, or the end when the
    /// rounds are used up or a red check did not change.
    async fn forge_round(
        &self,
        claim: &Claim,
        run: &Run,
        max_rounds: i64,
        s: &PullStatus,
        red: Option<Vec<crate::issues::pull_status::Failure>>,
        new: Vec<Feedback>,
    ) -> Verdict {
        if let Some(fails) = &red {
            let names: Vec<&str> = fails.iter().map(|f| f.name.as_str()).collect();
            self.note_checks(claim, &ChecksState::Failed(names.join(", ")))
                .await;
        }
        if claim.rounds >= max_rounds {
            let what = if red.is_some() {
                "the forge's checks still fail"
            } else {
                "reviewers still ask for changes"
            };
            return Some((
                StopCause::Rounds,
                format!(
                    "{what} after {} round(s), the limit (afk.max_rounds)",
                    claim.rounds
                ),
            ));
        }
        let key = match (&red, new.first()) {
            (Some(fails), _) => {
                let names: Vec<&str> = fails.iter().map(|f| f.name.as_str()).collect();
                format!("{}:{}", s.head_sha, names.join(","))
            }
            (None, Some(f)) => f.key.clone(),
            (None, None) => return None,
        };
        let cause = if red.is_some() {
            RoundCause::ForgeCheck
        } else {
            RoundCause::Review
        };
        match self.runner.store().start_round(claim.id, &key, cause).await {
            Ok(true) => {}
            Ok(false) if red.is_some() => {
                return Some((
                    StopCause::Rounds,
                    "the forge's checks fail on the same commit as before: the agent's round changed nothing"
                        .to_owned(),
                ));
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(claim = claim.id, error = %e, "could not start a round");
                return None;
            }
        }
        self.claims.land(claim.id, |c| {
            c.forge.answered.extend(new.iter().map(|n| n.key.clone()));
        });
        let text = round_prompt(
            &s.head_sha,
            red.as_deref(),
            &new,
            claim.rounds + 1,
            max_rounds,
        );
        let why = if red.is_some() {
            "the forge's checks failed"
        } else {
            "a reviewer asked for changes"
        };
        self.tell(claim, run, &text, why).await
    }
}
