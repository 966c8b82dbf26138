//! AFK runs whose model API does not answer (issue 40 §3): the CLI retries
//! (agent state `retrying`, from its screen) or gives up on a turn (Claude
//! Code's `StopFailure` hook: `the turn ended on an error: server_error`;
//! Codex's rollout, a `task_complete` with an `error`: `the turn ended on an
//! error: internal_server_error`, `usage/codex.rs`).
//!
//! Such a run's turn is no turn without a pull request: lab asks again
//! (`continue`, once per given-up turn, after a pause) instead of reminding
//! it of its pull request. A run that gets no answer for
//! [`NO_ANSWER_MINUTES`] ends `cli-unusable` (tried again later). The
//! episode is over once the model answers: output tokens counted, a turn
//! that ends without an error, or a question to a person.
//!
//! Trust: a run's screen and hooks are its agent's to forge, so one run's
//! word ends that run only, and what lab says of the error (on the issue,
//! in the hold) is in lab's words: an HTTP status, or a `StopFailure` error
//! name lab knows. The provider is held back (no new AFK run, for
//! [`HOLD_SECS`]) only when a second run of it has no answer either, as a
//! usage limit is (`limits.rs`).

use super::Scheduler;
use super::limits::{HoldKind, Limited};
use crate::domain::{AgentState, Run};
use crate::store::{Claim, now_ms};

/// How long, in minutes of the time-limit clock, a run may get no answer
/// before lab ends it.
pub const NO_ANSWER_MINUTES: i64 = 10;

/// How long a provider is held back when two of its runs got no answer.
pub const HOLD_SECS: i64 = 15 * 60;

/// Why a run got no answer, while it gets none (`None`: it is answered,
/// or it does something else).
pub(super) fn trouble(run: &Run) -> Option<String> {
    let a = run.agent.as_ref()?;
    let why = a.reason.as_deref().unwrap_or("");
    match a.state {
        AgentState::Retrying => Some(why.to_owned()),
        // A rate limit is a usage limit (`limits.rs`).
        AgentState::Idle
            if gave_up(why) && !why.contains("rate_limit") && !why.contains("usage_limit") =>
        {
            Some(why.to_owned())
        }
        _ => None,
    }
}

/// Whether the run's agent says its model answered: a turn that ended
/// without an error, or a question to a person.
fn answered(run: &Run) -> bool {
    run.agent.as_ref().is_some_and(|a| match a.state {
        AgentState::Waiting => true,
        AgentState::Idle => !a.reason.as_deref().is_some_and(gave_up),
        _ => false,
    })
}

/// Whether an idle agent's reason says its turn ended on an API error.
fn gave_up(why: &str) -> bool {
    why.starts_with("the turn ended on an error")
}

/// What the CLI said of the error, in lab's words only: the reason is the
/// agent's screen or hook call, so nothing of it but an HTTP status or one
/// of Claude Code's `StopFailure` error names goes on (the ending is told to
/// the issue, on a forge too).
fn in_lab_s_words(why: &str) -> String {
    const NAMED: &[&str] = &[
        "server_error",
        "authentication_failed",
        "billing_error",
        "invalid_request",
        "max_output_tokens",
        "unknown",
    ];
    let status = why
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|d| d.parse::<u16>().ok())
        .find(|n| (400..600).contains(n));
    let named = NAMED
        .iter()
        .chain(crate::usage::codex::ERROR_NAMES)
        .filter(|n| why.ends_with(*n))
        .max_by_key(|n| n.len());
    match (status, named) {
        (Some(n), _) if gave_up(why) => format!("HTTP {n}; its CLI gave up"),
        (Some(n), _) => format!("HTTP {n}; its CLI kept retrying"),
        (None, Some(e)) => format!("its CLI gave up: {e}"),
        (None, None) if gave_up(why) => "its CLI gave up".to_owned(),
        (None, None) => "its CLI kept retrying".to_owned(),
    }
}

/// One claim's run with no answer (its `ClaimState::no_answer`).
#[derive(Debug, Clone)]
pub(super) struct NoAnswer {
    pub provider: String,
    pub run: i64,
    /// Since when (ms): the agent state's `since` when lab first saw it.
    since_ms: i64,
    /// Its output tokens then: more later means the model answered.
    output_tokens: i64,
    /// The given-up turn lab last asked again after (its `since`).
    asked_after: Option<i64>,
}

/// What lab does with a live AFK run about its model's answers.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Answers {
    /// Answered (or nothing says otherwise): followed as usual.
    Fine,
    /// No answer yet: its turns are not judged meanwhile.
    Awaited,
    /// No answer for too long: lab ends it, for this reason.
    End(String),
}

impl Scheduler {
    /// Follows live AFK run `run`'s model answers (see the module's doc).
    pub(super) async fn follow_answers(&self, claim: &Claim, run: &Run) -> Answers {
        let tokens = run.usage.as_ref().map_or(0, |u| u.output_tokens);
        if answered(run) {
            self.claims.with(claim.id, |c| c.no_answer = None);
            return Answers::Fine;
        }
        // Working again (lab asked again, or the CLI's retry got through)
        // ends nothing yet: only an answer does.
        let Some(why) = trouble(run) else {
            return Answers::Fine;
        };
        let since = run.agent.as_ref().map_or(now_ms(), |a| a.since);
        let episode = self.claims.with(claim.id, |c| {
            match &c.no_answer {
                // The same run's episode, while its model still says
                // nothing (the claim's next run starts its own).
                Some(e) if e.run == run.id && tokens <= e.output_tokens => {}
                _ => {
                    c.no_answer = Some(NoAnswer {
                        provider: run.provider.clone(),
                        run: run.id,
                        since_ms: since,
                        output_tokens: tokens,
                        asked_after: None,
                    });
                }
            }
            c.no_answer.clone().expect("set above")
        });
        let minute = self.runner.cfg().limit_minute_ms;
        let now = now_ms();
        if now - episode.since_ms >= NO_ANSWER_MINUTES * minute {
            self.hold_if_another(claim, &episode, &why);
            return Answers::End(format!(
                "its CLI got no answer from the model API for {NO_ANSWER_MINUTES} minutes ({})",
                in_lab_s_words(&why)
            ));
        }
        // A turn its CLI gave up on is asked again after a pause, once.
        let idle = run
            .agent
            .as_ref()
            .is_some_and(|a| a.state == AgentState::Idle);
        if idle && episode.asked_after != Some(since) && now - since >= minute / 2 {
            self.claims.with(claim.id, |c| {
                if let Some(e) = c.no_answer.as_mut() {
                    e.asked_after = Some(since);
                }
            });
            if let Some(v) = self
                .tell(claim, run, "continue", "the model API gave no answer")
                .await
            {
                return Answers::End(v.1);
            }
        }
        Answers::Awaited
    }

    /// Holds `episode`'s provider back when another run of it (another
    /// claim's) has no answer either: two runs' word.
    fn hold_if_another(&self, claim: &Claim, episode: &NoAnswer, why: &str) {
        let another = self
            .claims
            .no_answers(claim.id)
            .iter()
            .any(|o| o.provider == episode.provider && o.run != episode.run);
        if !another {
            return;
        }
        tracing::info!(provider = %episode.provider, "two runs got no answer from the model API: the provider is held back");
        self.holds.limits().hold(Limited {
            provider: episode.provider.clone(),
            until_ms: now_ms() + HOLD_SECS * 1000,
            reason: format!(
                "the model API gives its runs no answer ({})",
                in_lab_s_words(why)
            ),
            kind: HoldKind::NoAnswer,
            fix: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{AgentBy, AgentStatus, RunState};

    fn with(state: AgentState, reason: Option<&str>) -> Run {
        let mut r = crate::run::test_run(RunState::Running, None, None);
        r.agent = Some(AgentStatus {
            state,
            reason: reason.map(str::to_owned),
            since: 0,
            by: AgentBy::Hook,
        });
        r
    }

    #[test]
    fn the_error_is_told_in_lab_s_words_only() {
        assert_eq!(
            in_lab_s_words("retrying: 529 Overloaded"),
            "HTTP 529; its CLI kept retrying"
        );
        assert_eq!(
            in_lab_s_words("the turn ended on an error: server_error"),
            "its CLI gave up: server_error"
        );
        // Codex's give-up, as its rollout's reader words it.
        assert_eq!(
            in_lab_s_words("the turn ended on an error: internal_server_error"),
            "its CLI gave up: internal_server_error"
        );
        assert_eq!(
            in_lab_s_words(
                "the turn ended on an error: HTTP 503 response_too_many_failed_attempts"
            ),
            "HTTP 503; its CLI gave up"
        );
        assert_eq!(
            in_lab_s_words("the turn ended on an error: other"),
            "its CLI gave up"
        );
        // Whatever else the agent's screen says stays out.
        assert_eq!(
            in_lab_s_words("retrying: see https://evil.example/@everyone"),
            "its CLI kept retrying"
        );
    }

    #[test]
    fn retries_and_given_up_turns_are_trouble_but_a_rate_limit_is_not() {
        use AgentState::{Idle, Retrying, Waiting, Working};
        let table = [
            (with(Retrying, Some("retrying: 529 Overloaded")), true),
            (
                with(Idle, Some("the turn ended on an error: server_error")),
                true,
            ),
            (
                with(
                    Idle,
                    Some("the turn ended on an error: authentication_failed"),
                ),
                true,
            ),
            (
                with(Idle, Some("the turn ended on an error: rate_limit")),
                false,
            ),
            // Codex's, from its rollout (`usage/codex.rs`).
            (
                with(
                    Idle,
                    Some("the turn ended on an error: internal_server_error"),
                ),
                true,
            ),
            (
                with(
                    Idle,
                    Some("the turn ended on an error: usage_limit_exceeded"),
                ),
                false,
            ),
            (with(Idle, None), false),
            (with(Working, None), false),
            (with(Waiting, Some("Allow Bash?")), false),
        ];
        for (i, (run, want)) in table.into_iter().enumerate() {
            assert_eq!(trouble(&run).is_some(), want, "row {i}");
        }
    }
}
