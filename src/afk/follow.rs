//! What lab does with a live AFK run each settle (issue 14): end it at its
//! time limit or over its budget, and once it opened its pull request,
//! follow the pull request through the repo's check command, round by
//! round, in the same agent session.
//!
//! A round ends when the agent's turn does (its CLI's hook says `idle`).
//! Then lab brings the run's branch into the repo (the pull request's head)
//! and runs the check command in the run's workspace, in its sandbox, as a
//! task of its own. Green ends the run (`pr-green`); red sends the agent the
//! failure as its next prompt (a new round), once per distinct failure (the
//! head's commit and the check), up to `afk.max_rounds`; then the issue
//! needs a person (`needs-human`).

use std::time::{Duration, Instant};

use super::prompt::Then;
use super::scope::Breach;
use super::{PR_GRACE, Scheduler};
use crate::domain::{AgentState, Run, RunState, StopCause};
use crate::domain::{CheckStep, ChecksState, RoundCause, Step};
use crate::repo::Repo;
use crate::repo::issue_source::SourceKind;
use crate::run::check::CheckResult;
use crate::settings::Settings;
use crate::store::{Claim, now_ms};

/// The longest a check command may run.
pub const CHECK_LIMIT: Duration = Duration::from_secs(20 * 60);

/// Where a claim's check stands on this node (its `ClaimState::check`).
#[derive(Debug)]
pub(super) enum Slot {
    /// A check of this round is running.
    Running { round: i64 },
    /// It finished: on which commit, and how.
    Done {
        round: i64,
        head: Option<String>,
        result: CheckResult,
        /// The branch left the run's scope: the check did not run.
        scope: Option<Breach>,
    },
    /// The round's result was acted on; the next check waits for the next
    /// round.
    Seen { round: i64 },
}

/// What a look at a claim's check slot leads to (decided in one hold of
/// the lock, so a result landing meanwhile is never overwritten).
enum Next {
    /// The check runs, or its result was acted on: nothing to do.
    Wait,
    /// A result to act on (the slot now says it was seen).
    Judge {
        head: Option<String>,
        result: CheckResult,
        scope: Option<Breach>,
    },
    /// No check of this round yet: one starts (the slot says it runs).
    Start,
}

/// Why lab ends a live run now, if it does.
pub(super) type Verdict = Option<(StopCause, String)>;

impl Scheduler {
    /// What to do with a live AFK run now.
    /// A run that waits on a usage limit (`waiting`) still has its time
    /// limit and budgets; its checks wait with it.
    pub(super) async fn watch(
        &self,
        claim: &Claim,
        run: &Run,
        repo: Option<&Repo>,
        settings: &Settings,
        waiting: bool,
    ) -> Verdict {
        let budget = super::budget::of(run, repo, settings);
        if let Some(v) = super::budget::over(run, &budget, self.runner.cfg().limit_minute_ms) {
            return Some(v);
        }
        if waiting {
            return None;
        }
        if claim.pr_url.is_none() {
            // lab refused its pull request for paths out of its scope more
            // often than it has rounds: a person looks.
            let refused = self
                .claims
                .peek(claim.id, |c| c.scope.clone().map(|b| (b, c.scope_refusals)));
            if let Some(Some((b, n))) = refused
                && n > settings.afk.max_rounds
            {
                return Some((
                    StopCause::Scope,
                    format!(
                        "scope: {}; lab refused its pull request {n} times (afk.max_rounds is {})",
                        b.named(),
                        settings.afk.max_rounds
                    ),
                ));
            }
        }
        if claim.pr_url.is_none() {
            return self.without_pull_request(claim, run).await;
        }
        let repo = repo?;
        if repo.issues.source != SourceKind::Builtin
            && let Some(number) = claim.pr_number
        {
            return self.follow_forge(claim, run, repo, settings, number).await;
        }
        match repo.effective_check_command() {
            None => self.without_checks(claim, repo).await,
            Some(command) => {
                self.with_check(claim, run, repo, command, settings.afk.max_rounds)
                    .await
            }
        }
    }

    /// A work run with no pull request yet (issue 40 §2): working, it is
    /// left alone; its turn over, it is reminded once, and a second turn
    /// that ends without one ends the run for a person, freeing its slot.
    async fn without_pull_request(&self, claim: &Claim, run: &Run) -> Verdict {
        if !run.state.is_active() || !super::turn_ended(run) {
            return None;
        }
        if !self
            .claims
            .with(claim.id, |c| std::mem::replace(&mut c.work_nudged, true))
        {
            return self
                .tell(claim, run, super::prompt::PR_MISSING, "no pull request yet")
                .await;
        }
        Some((
            StopCause::NoPullRequest,
            "its agent ended its turn twice without opening a pull request (lab reminded it once)"
                .to_owned(),
        ))
    }

    /// A pull request with no check command: the run gets a grace period to
    /// finish talking, then ends. The built-in tracker has no other checks,
    /// so the pull request is green; a forge's own checks are its own.
    async fn without_checks(&self, claim: &Claim, repo: &Repo) -> Verdict {
        let seen = self
            .claims
            .with(claim.id, |c| *c.pr_seen.get_or_insert_with(Instant::now));
        if seen.elapsed() < PR_GRACE {
            return None;
        }
        if repo.issues.source == SourceKind::Builtin {
            self.note_checks(claim, &ChecksState::None).await;
        }
        Some((
            StopCause::PullRequest,
            "its pull request is open; lab ended the run".to_owned(),
        ))
    }

    pub(super) async fn with_check(
        &self,
        claim: &Claim,
        run: &Run,
        repo: &Repo,
        command: &str,
        max_rounds: i64,
    ) -> Verdict {
        let idle = !run.state.is_active()
            || run
                .agent
                .as_ref()
                .is_some_and(|a| a.state == AgentState::Idle);
        let next = self.claims.with(claim.id, |c| match c.check.take() {
            Some(Slot::Running { round }) => {
                c.check = Some(Slot::Running { round });
                Next::Wait
            }
            Some(Slot::Done {
                round,
                head,
                result,
                scope,
            }) if round == claim.rounds => {
                c.check = Some(Slot::Seen { round });
                Next::Judge {
                    head,
                    result,
                    scope,
                }
            }
            Some(Slot::Seen { round }) if round == claim.rounds => {
                c.check = Some(Slot::Seen { round });
                Next::Wait
            }
            _ if idle => {
                c.check = Some(Slot::Running {
                    round: claim.rounds,
                });
                Next::Start
            }
            _ => Next::Wait,
        });
        match next {
            Next::Wait => None,
            Next::Judge {
                head,
                scope: Some(b),
                ..
            } => {
                self.scope_round(claim, run, max_rounds, &b, head.as_deref(), Then::Check)
                    .await
            }
            Next::Judge {
                head,
                result,
                scope: None,
            } => {
                self.judge_check(claim, run, command, max_rounds, head, result)
                    .await
            }
            Next::Start => {
                self.start_check(claim, run, repo, command);
                None
            }
        }
    }

    /// A run that ended after opening its pull request: its check runs. A
    /// red check of an agent that ended its session on its own starts the
    /// next round by resuming that session (`Runner::resume_round`), while
    /// rounds are left. True once the checks are noted (or there is nothing
    /// to check); false while the check runs or a round goes on.
    pub(super) async fn check_after_end(
        &self,
        claim: &Claim,
        run: &Run,
        repo: Option<&Repo>,
        max_rounds: i64,
    ) -> bool {
        let Some(repo) = repo else { return true };
        let Some(command) = repo.effective_check_command() else {
            if repo.issues.source == SourceKind::Builtin {
                self.note_checks(claim, &ChecksState::None).await;
            }
            return true;
        };
        let next = self.claims.with(claim.id, |c| match c.check.take() {
            Some(Slot::Running { round }) => {
                c.check = Some(Slot::Running { round });
                Some(Next::Wait)
            }
            Some(Slot::Done {
                round,
                head,
                result,
                scope,
            }) => {
                c.check = Some(Slot::Seen { round });
                Some(Next::Judge {
                    head,
                    result,
                    scope,
                })
            }
            Some(Slot::Seen { round }) if round == claim.rounds => {
                c.check = Some(Slot::Seen { round });
                None
            }
            _ => {
                c.check = Some(Slot::Running {
                    round: claim.rounds,
                });
                Some(Next::Start)
            }
        });
        let Some(next) = next else { return true };
        match next {
            Next::Wait => false,
            Next::Start => {
                self.start_check(claim, run, repo, command);
                false
            }
            Next::Judge {
                head,
                scope: Some(b),
                ..
            } => {
                // A round resumes the session (or the run ends for a
                // person: the claim's scope says so to the judge).
                let on_its_own = run.state == RunState::Exited && run.stop_cause.is_none();
                if on_its_own
                    && self
                        .scope_round(claim, run, max_rounds, &b, head.as_deref(), Then::Check)
                        .await
                        .is_none()
                {
                    return false;
                }
                self.claims.with(claim.id, |c| c.scope = Some(b));
                self.note_checks(claim, &ChecksState::Failed("out of scope".to_owned()))
                    .await;
                true
            }
            Next::Judge {
                head,
                result,
                scope: None,
            } => {
                let on_its_own = run.state == RunState::Exited && run.stop_cause.is_none();
                if !result.passed() && on_its_own && claim.rounds < max_rounds {
                    let head = head.unwrap_or_default();
                    let prompt = check_round(command, &head, &result, claim.rounds + 1, max_rounds);
                    match self
                        .runner
                        .store()
                        .start_round(claim.id, &format!("{head}:check"), RoundCause::Check)
                        .await
                    {
                        Ok(true) => match self.runner.resume_round(run.id, prompt).await {
                            Ok(r) if r.state.is_active() => {
                                tracing::info!(
                                    run = run.id,
                                    round = claim.rounds + 1,
                                    "the check failed: the session resumes for a new round"
                                );
                                return false;
                            }
                            Ok(_) => {}
                            Err(e) => {
                                tracing::warn!(run = run.id, error = %e, "could not resume the session for a round")
                            }
                        },
                        Ok(false) => {}
                        Err(e) => {
                            tracing::warn!(claim = claim.id, error = %e, "could not start a round")
                        }
                    }
                }
                let checks = if result.passed() {
                    ChecksState::Passed
                } else {
                    ChecksState::Failed(result.summary())
                };
                self.note_checks(claim, &checks).await;
                true
            }
        }
    }

    /// Brings the run's branch into the repo, then runs the check, in a
    /// task of its own (its slot already says it runs); its result lands in
    /// the claim's slot, unless the claim was forgotten meanwhile.
    fn start_check(&self, claim: &Claim, run: &Run, repo: &Repo, command: &str) {
        let (runner, claims, run, repo) = (
            self.runner.clone(),
            self.claims.clone(),
            run.clone(),
            repo.clone(),
        );
        let (claim_id, round, command) = (claim.id, claim.rounds, command.to_owned());
        tracing::info!(run = run.id, round, "running the repo's check");
        tokio::spawn(async move {
            let (mut head, mut scope) = (None, None);
            if let (Some(ws), Some(branch)) = (run.workspace.as_deref(), run.branch.as_deref()) {
                let ws = std::path::Path::new(ws);
                let jail = runner.jail(&run, Some(&repo));
                if let Err(e) = runner
                    .workspaces()
                    .collect(&repo, ws, branch, jail.as_ref())
                    .await
                {
                    tracing::warn!(run = run.id, error = %e, "could not take the run's branch");
                }
                head = runner.workspaces().branch_head(&repo, branch).await;
                // A branch out of its scope is not checked: the round
                // undoes that first (issue 28 §4).
                match super::scope::breach_of(&runner, &repo, &run, branch).await {
                    Ok(b) => scope = b,
                    Err(e) => {
                        tracing::warn!(run = run.id, error = %e, "could not read the branch's paths")
                    }
                }
            }
            let result = match &scope {
                Some(b) => CheckResult {
                    status: None,
                    output: b.told(),
                },
                None => {
                    let began = Instant::now();
                    let result = runner.check(&run, &repo, &command, CHECK_LIMIT).await;
                    let step = Step::Check(CheckStep {
                        round,
                        command: command.clone(),
                        status: result.status,
                        duration_ms: began.elapsed().as_millis() as i64,
                        output_tail: CheckStep::tail(&result.output),
                    });
                    if let Err(e) = runner.store().note_step(claim_id, &step).await {
                        tracing::warn!(claim = claim_id, error = %e, "could not record the check");
                    }
                    result
                }
            };
            claims.land(claim_id, |c| {
                if matches!(c.check, Some(Slot::Running { round: r }) if r == round) {
                    c.check = Some(Slot::Done {
                        round,
                        head,
                        result,
                        scope,
                    });
                }
            });
        });
    }

    /// A finished check: green ends the run; red starts the next round, or
    /// ends the run for a person when the rounds are used up or the agent's
    /// round changed nothing.
    async fn judge_check(
        &self,
        claim: &Claim,
        run: &Run,
        command: &str,
        max_rounds: i64,
        head: Option<String>,
        result: CheckResult,
    ) -> Verdict {
        if result.passed() {
            self.note_checks(claim, &ChecksState::Passed).await;
            return Some((
                StopCause::PullRequest,
                "its pull request's check passed; lab ended the run".to_owned(),
            ));
        }
        self.note_checks(claim, &ChecksState::Failed(result.summary()))
            .await;
        if claim.rounds >= max_rounds {
            return Some((
                StopCause::Rounds,
                format!(
                    "the check still fails after {} round(s), the limit (afk.max_rounds)",
                    claim.rounds
                ),
            ));
        }
        let head = head.unwrap_or_default();
        let key = format!("{head}:check");
        match self
            .runner
            .store()
            .start_round(claim.id, &key, RoundCause::Check)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                return Some((
                    StopCause::Rounds,
                    "the check fails on the same commit as before: the agent's round changed nothing"
                        .to_owned(),
                ));
            }
            Err(e) => {
                tracing::warn!(claim = claim.id, error = %e, "could not start a round");
                return None;
            }
        }
        let text = check_round(command, &head, &result, claim.rounds + 1, max_rounds);
        self.tell(claim, run, &text, "the check failed").await
    }

    /// Types a round's prompt into the run's live session, which is then
    /// working again; a session lab cannot type into ends the run for a
    /// person.
    pub(super) async fn tell(&self, claim: &Claim, run: &Run, text: &str, why: &str) -> Verdict {
        if !run.state.is_active() {
            // Its agent ended its session: the CLI resumes it for the round.
            return match self.runner.resume_round(run.id, text.to_owned()).await {
                Ok(r) if r.state.is_active() => {
                    tracing::info!(
                        run = run.id,
                        round = claim.rounds + 1,
                        "{why}: the session resumes for a new round"
                    );
                    None
                }
                Ok(r) => Some((
                    StopCause::Rounds,
                    format!(
                        "{why} and the session could not be resumed: {}",
                        r.state_reason.unwrap_or_default()
                    ),
                )),
                Err(e) => Some((
                    StopCause::Rounds,
                    format!("{why} and lab could not resume the session: {e}"),
                )),
            };
        }
        let sent_at = now_ms();
        match self
            .runner
            .tmux()
            .send_input(&run.session, text, &["Enter"])
            .await
        {
            Ok(()) => {
                let _ = self
                    .runner
                    .store()
                    .working_after_input(run.id, sent_at)
                    .await;
                // The next usage pass reads the round's turn in the rollout.
                self.runner.look_again(run.id);
                tracing::info!(run = run.id, round = claim.rounds + 1, "{why}: a new round");
                None
            }
            Err(e) => Some((
                StopCause::Rounds,
                format!("{why} and lab could not tell the agent: {e}"),
            )),
        }
    }

    pub(super) async fn note_checks(&self, claim: &Claim, checks: &ChecksState) {
        if let Err(e) = self
            .runner
            .store()
            .set_claim_checks(claim.id, &checks.text())
            .await
        {
            tracing::warn!(claim = claim.id, error = %e, "could not record the checks");
        }
    }
}

/// What the agent is told when its pull request's check failed.
fn check_round(command: &str, head: &str, result: &CheckResult, round: i64, max: i64) -> String {
    super::prompt::round(&super::prompt::Round {
        head,
        round,
        max,
        red: Some(super::prompt::Red::Command { command, result }),
        feedback: Vec::new(),
        then: super::prompt::Then::Check,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_round_prompt_names_the_failure_and_the_round() {
        let r = CheckResult {
            status: Some(1),
            output: "test x ... FAILED\n".into(),
        };
        let p = check_round("cargo test", "0123456789abcdef", &r, 2, 3);
        assert!(
            p.starts_with(
                "lab: your pull request needs another round (round 2 of 3). Its check failed on \
                 0123456789ab (failed with exit status 1). The check command is: cargo test"
            ),
            "{p}"
        );
        assert!(
            p.ends_with(
                "test x ... FAILED\n\nFix the cause, commit on this branch, and end your turn; \
                 lab runs the check again."
            ),
            "{p}"
        );
    }
}
