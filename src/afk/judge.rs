//! What an ended AFK run's outcome is, and what lab says of it: pure, from
//! its claim, its run and why it ended (`outcome.rs` records it and tells
//! its issue). What it says is in lab's words: exit statuses, stop causes,
//! scope paths escaped, never the agent's own text.

use crate::domain::{ChecksState, Outcome, Run, StopCause};
use crate::store::Claim;

/// The page of a run, where a person reads what its agent printed.
fn run_page(lab_url: &str, run: i64) -> String {
    format!("{}/runs/{run}", lab_url.trim_end_matches('/'))
}

/// Whether the run ended on its own, without a pull request, right after
/// it started.
pub(super) fn quick_exit(run: &Run) -> bool {
    run.state == crate::domain::RunState::Exited
        && run.stop_cause.is_none()
        && matches!((run.started_at, run.ended_at), (Some(s), Some(e)) if e - s < super::cli_hold::QUICK_EXIT_MS)
}

/// The breach an ended run is judged by, if its scope decides its outcome:
/// its rounds to undo it ran out, it ended without a pull request, or its
/// last check was refused for it.
pub(super) fn judged_by_scope<'a>(
    claim: &Claim,
    cause: Option<StopCause>,
    scope: Option<&'a super::scope::Breach>,
) -> Option<&'a super::scope::Breach> {
    scope.filter(|_| {
        cause == Some(StopCause::Scope)
            || claim.pr_url.is_none()
            || claim
                .checks
                .as_deref()
                .is_some_and(|c| c.ends_with("out of scope"))
    })
}

/// How a run ended, in lab's words (its exit status or signal, or its
/// reason).
pub(super) fn ended_how(run: &Run) -> String {
    match (run.exit_status, run.exit_signal) {
        (Some(c), _) => format!("the agent exited with status {c}"),
        (None, Some(s)) => format!("the agent was killed by signal {s}"),
        _ => match run.state_reason.as_deref() {
            Some(r) if !r.is_empty() => format!("the run ended: {r}"),
            _ => "the run ended".to_owned(),
        },
    }
}

/// The outcome of an ended run, and what to say about it.
pub(super) fn judge(
    claim: &Claim,
    run: &Run,
    max_rounds: i64,
    ended_cause: Option<StopCause>,
    scope: Option<&super::scope::Breach>,
    lab_url: &str,
) -> (Outcome, String) {
    let reason = run.state_reason.clone().unwrap_or_default();
    // Out of its scope: the paths are the agent's bytes, named on the run's
    // page only; the issue hears the count and the operator's globs.
    let cause = run.stop_cause.or(ended_cause);
    if let Some(b) = judged_by_scope(claim, cause, scope) {
        let pr = match &claim.pr_url {
            Some(url) => format!("{url}: "),
            None => "It opened no pull request: ".to_owned(),
        };
        let ran_out = if cause == Some(StopCause::Scope) {
            ", and its rounds to undo that ran out"
        } else {
            ""
        };
        return (
            Outcome::NeedsHuman,
            format!(
                "scope: {pr}{}{ran_out}; lab pushed none of it. Its changes are on the run's page: {}",
                b.told(),
                run_page(lab_url, run.id)
            ),
        );
    }
    match cause {
        Some(StopCause::Operator) => {
            let pr = match &claim.pr_url {
                Some(url) => format!(" Its pull request stays open: {url}."),
                None => String::new(),
            };
            return (
                Outcome::Stopped,
                format!(
                    "An operator stopped the run.{pr} lab tries this issue again when a person puts \
                     its ready label back."
                ),
            );
        }
        Some(StopCause::Budget) => return (Outcome::OverBudget, format!("{reason}.")),
        Some(StopCause::CliUnusable) => return (Outcome::CliUnusable, format!("{reason}.")),
        Some(StopCause::Rounds) => {
            let url = claim.pr_url.clone().unwrap_or_default();
            return (Outcome::NeedsHuman, format!("{url} ({reason})"));
        }
        _ => {}
    }
    if let Some(url) = &claim.pr_url {
        let checks = claim.checks.as_deref().map(ChecksState::parse);
        return match checks {
            Some(ChecksState::Merged) => (Outcome::PrMerged, format!("{url} (merged)")),
            Some(ChecksState::Closed) => (
                Outcome::PrClosed,
                format!("{url} (closed without being merged)"),
            ),
            Some(ChecksState::Passed) => (Outcome::PrGreen, format!("{url} (its check passed)")),
            Some(ChecksState::None) => (Outcome::PrGreen, format!("{url} (no checks to pass)")),
            Some(other) if claim.rounds >= max_rounds => (
                Outcome::NeedsHuman,
                format!(
                    "{url} (its check: {other}, after {} round(s))",
                    claim.rounds
                ),
            ),
            Some(other) => (Outcome::PrOpened, format!("{url} (its check: {other})")),
            None => (Outcome::PrOpened, url.clone()),
        };
    }
    // What the agent printed stays on the run's page: an issue comment (on
    // a forge, public) never carries the agent's bytes (the trust boundary).
    let tail = format!(
        "\n\nIts screen and log are on the run's page: {}",
        run_page(lab_url, run.id)
    );
    match run.stop_cause {
        Some(StopCause::TimeLimit) => return (Outcome::TimedOut, format!("{reason}.{tail}")),
        Some(StopCause::NoPullRequest) => {
            return (
                Outcome::NeedsHuman,
                format!("It opened no pull request: {reason}; lab ended the run.{tail}"),
            );
        }
        _ => {}
    }
    let how = {
        let how = ended_how(run);
        let mut c = how.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect::<String>())
            .unwrap_or_default()
            + "."
    };
    (
        Outcome::Failed,
        format!(
            "{how} It opened no pull request (lab opens none for a branch without a commit \
             of its own).{tail}"
        ),
    )
}
