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

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::follow::{CHECKS_NONE, CHECKS_PASSED, Verdict};
use super::{PR_GRACE, Scheduler};
use crate::domain::{AgentState, Run, StopCause};
use crate::issues::SourceError;
use crate::issues::pull_status::{CheckState, PullStatus};
use crate::repo::Repo;
use crate::settings::Settings;
use crate::store::Claim;

/// The words in a reviewer's text that ask for a person.
pub const ASK_FOR_A_PERSON: &str = "needs-human";

/// How the AFK status says a forge's rate limit holds the reads back.
const RATE_LIMITED: &str = "the forge's rate limit: following pull requests waits";

/// Where a claim's following stands on this node.
#[derive(Debug, Default)]
struct Follow {
    /// No poll before then.
    next: Option<Instant>,
    /// A push and poll runs.
    busy: bool,
    /// Its answer, for the round it was read in, not yet acted on.
    polled: Option<(i64, Result<PullStatus, SourceError>)>,
    /// The last round whose commits were pushed, and when.
    pushed: Option<(i64, Instant)>,
    /// Feedback already answered with a round: `review:{id}`, `comment:{id}`.
    answered: HashSet<String>,
}

/// The forge pull requests this node follows.
#[derive(Debug, Default, Clone)]
pub struct Follows(Arc<Mutex<HashMap<i64, Follow>>>);

impl Follows {
    pub fn forget(&self, claim: i64) {
        self.0.lock().expect("poisoned").remove(&claim);
    }
}

/// The pull request's number, the last segment of its URL (GitHub's
/// `/pull/N`, Gitea's `/pulls/N`).
pub fn pull_number(url: &str) -> Option<i64> {
    url.trim_end_matches('/').rsplit('/').next()?.parse().ok()
}

/// Feedback not answered yet: its key, who, what.
struct Feedback {
    key: String,
    author: String,
    text: String,
}

fn feedback(s: &PullStatus, answered: &HashSet<String>) -> Vec<Feedback> {
    let others = |a: &str| !a.is_empty() && !a.eq_ignore_ascii_case(&s.author);
    let reviews = s
        .reviews
        .iter()
        .filter(|r| others(&r.author) && (r.changes_requested || asks_for_a_person(&r.body)))
        .map(|r| Feedback {
            key: format!("review:{}", r.id),
            author: r.author.clone(),
            text: r.body.clone(),
        });
    let comments = s.comments.iter().filter(|c| others(&c.author)).map(|c| {
        let at = match (&c.path, c.line) {
            (Some(p), Some(l)) => format!(" on {p}:{l}"),
            (Some(p), None) => format!(" on {p}"),
            _ => String::new(),
        };
        Feedback {
            key: format!("comment:{}", c.id),
            author: format!("{}{at}", c.author),
            text: c.body.clone(),
        }
    });
    reviews
        .chain(comments)
        .filter(|f| !answered.contains(&f.key))
        .collect()
}

fn asks_for_a_person(text: &str) -> bool {
    text.to_ascii_lowercase().contains(ASK_FOR_A_PERSON)
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
        let polled = {
            let mut all = self.forge.0.lock().expect("poisoned");
            let f = all.entry(claim.id).or_default();
            if f.answered.is_empty()
                && let Some(k) = &claim.round_key
            {
                f.answered.insert(k.clone());
            }
            match f.polled.take() {
                Some((round, r)) if round == claim.rounds => Some(r),
                _ => {
                    let due = f.next.is_none_or(|at| Instant::now() >= at);
                    if idle && due && !f.busy {
                        f.busy = true;
                        f.next = Some(Instant::now() + self.runner.cfg.forge_poll);
                        let push = f.pushed.is_none_or(|(r, _)| r < claim.rounds);
                        drop(all);
                        self.poll(claim, run, repo, number, push);
                    }
                    None
                }
            }
        };
        match polled? {
            Ok(s) => {
                self.clear_rate_limit_note(&repo.name);
                self.judge_forge(claim, run, repo, settings, s).await
            }
            Err(SourceError::RateLimited { retry_after }) => {
                if let Some(f) = self.forge.0.lock().expect("poisoned").get_mut(&claim.id) {
                    f.next = Some(Instant::now() + retry_after.max(self.runner.cfg.forge_poll));
                }
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

    /// A read went through: the repo's rate-limit note, if it is this
    /// module's, is over.
    fn clear_rate_limit_note(&self, repo: &str) {
        let ours = self
            .problems
            .lock()
            .expect("poisoned")
            .get(repo)
            .is_some_and(|p| p.starts_with(RATE_LIMITED));
        if ours {
            self.note(repo, None);
        }
    }

    /// Pushes the round's commits (when not yet) and reads the pull
    /// request, in a task of its own; the answer waits in the claim's slot.
    fn poll(&self, claim: &Claim, run: &Run, repo: &Repo, number: i64, push: bool) {
        let (runner, follows, source) = (
            self.runner.clone(),
            self.forge.clone(),
            self.sources.of(repo),
        );
        let (run, repo, claim_id, round) = (run.clone(), repo.clone(), claim.id, claim.rounds);
        tokio::spawn(async move {
            if push && let Some(branch) = run.branch.as_deref() {
                if let Err(e) = super::pull::deliver(&runner, &repo, &run, branch).await {
                    tracing::warn!(run = run.id, error = %e, "could not push the round's commits");
                }
                if let Some(f) = follows.0.lock().expect("poisoned").get_mut(&claim_id) {
                    f.pushed = Some((round, Instant::now()));
                }
            }
            let r = source.pull_status(number).await;
            if let Some(f) = follows.0.lock().expect("poisoned").get_mut(&claim_id) {
                f.busy = false;
                f.polled = Some((round, r));
            }
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
            let how = if s.merged { "merged" } else { "closed" };
            self.note_checks(claim, how).await;
            return Some((
                StopCause::PullRequest,
                format!("its pull request was {how}; lab ended the run"),
            ));
        }
        let answered = self
            .forge
            .0
            .lock()
            .expect("poisoned")
            .get(&claim.id)
            .map(|f| f.answered.clone())
            .unwrap_or_default();
        let new = feedback(&s, &answered);
        if let Some(f) = new.iter().find(|f| asks_for_a_person(&f.text)) {
            return Some((
                StopCause::Rounds,
                format!("{} asked for a person ({ASK_FOR_A_PERSON})", f.author),
            ));
        }
        let since_push = self
            .forge
            .0
            .lock()
            .expect("poisoned")
            .get(&claim.id)
            .and_then(|f| f.pushed.map(|(_, at)| at.elapsed()));
        let red = match &s.checks {
            CheckState::Red(fails) => Some(fails.clone()),
            CheckState::Pending => {
                self.note_checks(claim, "pending").await;
                None
            }
            CheckState::None if since_push.is_some_and(|e| e < PR_GRACE) => None,
            CheckState::None | CheckState::Green if new.is_empty() => {
                let checks = if s.checks == CheckState::Green {
                    CHECKS_PASSED
                } else {
                    CHECKS_NONE
                };
                if let Some(command) = repo.check_command.as_deref() {
                    // Beside the forge's checks, the repo's own must pass.
                    return self
                        .with_check(claim, run, repo, command, settings.afk.max_rounds)
                        .await;
                }
                self.note_checks(claim, checks).await;
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
            self.note_checks(claim, &format!("failed: {}", names.join(", ")))
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
        match self.runner.store.start_round(claim.id, &key).await {
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
        if let Some(f) = self.forge.0.lock().expect("poisoned").get_mut(&claim.id) {
            f.answered.extend(new.iter().map(|n| n.key.clone()));
        }
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

/// What the agent is told: the failing checks, then each new piece of
/// feedback, then what to do.
fn round_prompt(
    head: &str,
    red: Option<&[crate::issues::pull_status::Failure]>,
    new: &[Feedback],
    round: i64,
    max: i64,
) -> String {
    let short: String = head.chars().take(12).collect();
    let mut out = format!("lab: your pull request needs another round (round {round} of {max}).");
    if let Some(fails) = red {
        out.push_str(&format!("\n\nIts checks failed on {short}:"));
        for f in fails {
            out.push_str(&format!("\n- {}: {}", f.name, f.text));
        }
    }
    for f in new {
        out.push_str(&format!(
            "\n\nReview by {}:\n{}",
            f.author,
            f.text.trim_end()
        ));
    }
    out.push_str(
        "\n\nFix what they ask, commit on this branch, and end your turn; lab pushes it and \
         reads the checks again.",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::issues::pull_status::{Failure, PullComment, Review};

    fn status() -> PullStatus {
        PullStatus {
            head_sha: "0123456789abcdef".into(),
            author: "lab-bot".into(),
            checks: CheckState::None,
            reviews: vec![
                Review {
                    id: 1,
                    author: "ana".into(),
                    body: "Please rename x".into(),
                    changes_requested: true,
                },
                Review {
                    id: 2,
                    author: "bo".into(),
                    body: "LGTM".into(),
                    changes_requested: false,
                },
            ],
            comments: vec![
                PullComment {
                    id: 7,
                    author: "lab-bot".into(),
                    body: "mine".into(),
                    path: None,
                    line: None,
                },
                PullComment {
                    id: 8,
                    author: "cy".into(),
                    body: "off by one".into(),
                    path: Some("src/a.rs".into()),
                    line: Some(3),
                },
            ],
            merged: false,
            closed: false,
        }
    }

    #[test]
    fn feedback_is_others_changes_and_comments_once() {
        let s = status();
        let f = feedback(&s, &HashSet::new());
        let keys: Vec<&str> = f.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(keys, ["review:1", "comment:8"]);
        assert_eq!(f[1].author, "cy on src/a.rs:3");
        let f = feedback(&s, &["review:1".to_owned()].into());
        assert_eq!(f.len(), 1);
    }

    #[test]
    fn the_prompt_names_the_failures_and_the_reviews() {
        let s = status();
        let f = feedback(&s, &HashSet::new());
        let fails = [Failure {
            name: "ci/test".into(),
            text: "failure: 2 tests failed".into(),
        }];
        let p = round_prompt(&s.head_sha, Some(&fails), &f, 2, 3);
        assert!(p.starts_with("lab: your pull request needs another round (round 2 of 3)."));
        assert!(
            p.contains("Its checks failed on 0123456789ab:\n- ci/test: failure: 2 tests failed")
        );
        assert!(p.contains("Review by ana:\nPlease rename x"), "{p}");
        assert!(asks_for_a_person("Stop here, NEEDS-HUMAN please"));
    }

    #[test]
    fn the_number_is_the_urls_last_segment() {
        assert_eq!(pull_number("https://github.com/o/r/pull/42"), Some(42));
        assert_eq!(pull_number("https://gitea.example/o/r/pulls/7/"), Some(7));
        assert_eq!(pull_number("https://gitea.example/o/r"), None);
    }
}
