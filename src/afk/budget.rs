//! An AFK run's limits while it lives: its time limit and its token and
//! cost budgets (its repo's, else the AFK settings', lowered by its issue's),
//! and the verdict that ends a run past them. The settle loop
//! (`follow::watch`) asks; the outcome's `until` names when the time limit
//! falls.

use super::follow::Verdict;
use crate::domain::{Run, StopCause};
use crate::repo::{Budget, Repo};
use crate::settings::Settings;
use crate::store::now_ms;

/// A run's budgets: its repo's (else the global ones), lowered by what its
/// issue set (issue 27).
pub(super) fn of(run: &Run, repo: Option<&Repo>, settings: &Settings) -> Budget {
    let b = repo
        .map(|r| r.budget.over(&settings.afk))
        .unwrap_or(Budget {
            max_tokens: settings.afk.max_tokens,
            max_cost_nano_usd: settings.afk.max_cost_nano_usd,
            run_timeout_minutes: settings.afk.run_timeout_minutes,
        });
    match &run.issue_budget {
        Some(i) => b.lowered(i),
        None => b,
    }
}

/// When a live run passes its time limit (ms): the settle that ends it
/// is due then, whatever else wakes the loop.
/// `minute_ms` is how long a minute of it lasts (60 000 but in tests).
pub(super) fn time_limit_at(
    run: &Run,
    repo: Option<&Repo>,
    settings: &Settings,
    minute_ms: i64,
) -> i64 {
    let started = run.started_at.unwrap_or(run.created_at);
    started.saturating_add(
        of(run, repo, settings)
            .run_timeout_minutes
            .saturating_mul(minute_ms),
    ) + 1
}

/// Past its time limit, or over its token or cost budget. The time a run
/// waited on a usage limit counts: the limit is the run's own word.
pub(super) fn over(run: &Run, b: &Budget, minute_ms: i64) -> Verdict {
    let started = run.started_at.unwrap_or(run.created_at);
    if now_ms() - started > b.run_timeout_minutes.saturating_mul(minute_ms) {
        return Some((
            StopCause::TimeLimit,
            format!(
                "timed out: the run took longer than {} minute(s)",
                b.run_timeout_minutes
            ),
        ));
    }
    let u = run.usage.as_ref()?;
    if let Some(max) = b.max_tokens
        && u.tokens() > max
    {
        return Some((
            StopCause::Budget,
            format!(
                "over budget: it used {} tokens, more than its budget of {max}",
                u.tokens()
            ),
        ));
    }
    if let (Some(max), Some(cost)) = (b.max_cost_nano_usd, u.cost_nano_usd)
        && cost > max
    {
        // The cost of what lab can price; tokens of unpriced models are
        // under the token budget alone, never guessed at.
        let unpriced = match u.unpriced_tokens {
            0 => String::new(),
            n => format!(" (and {n} tokens of models lab has no price for)"),
        };
        return Some((
            StopCause::Budget,
            format!(
                "over budget: it cost ${:.2}{unpriced}, more than its budget of ${:.2}",
                crate::domain::nano_to_usd(cost),
                crate::domain::nano_to_usd(max)
            ),
        ));
    }
    None
}
