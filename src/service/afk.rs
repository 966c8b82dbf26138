//! The AFK scheduler's state and ledger, as the API and the AFK page both
//! show them, and the one way either pauses or resumes it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::afk::Scheduler;
use crate::afk::limits::Limited;
use crate::domain::nano_to_usd;
use crate::settings::AfkLimits;
use crate::store::{Claim, LedgerBy, LedgerCount, Store, StoreError};

/// What the scheduler is doing, read once for both front ends.
pub struct AfkStatus {
    pub paused: bool,
    /// Active claims on every node.
    pub live: usize,
    pub afk: AfkLimits,
    /// Why AFK launches wait for memory, when they do.
    pub admission: Option<String>,
    /// Providers held back: by a usage limit, or a CLI that cannot work.
    pub limited: Vec<Limited>,
    pub repos: Vec<RepoAfk>,
    /// The most recent AFK runs, newest first.
    pub recent: Vec<Claim>,
}

/// One repo as the scheduler sees it.
pub struct RepoAfk {
    pub repo: String,
    pub enabled: bool,
    pub paused: bool,
    pub label: String,
    /// Its active claims on every node.
    pub live: usize,
    pub max_concurrent: i64,
    /// The last thing that kept the scheduler from this repo's issues.
    pub problem: Option<String>,
}

/// How many recent AFK runs the status lists.
const RECENT: i64 = 50;

/// The scheduler's state now: settings, pause, live claims by repo, holds,
/// admission and the most recent claims.
pub async fn status(store: &Store, scheduler: &Scheduler) -> Result<AfkStatus, StoreError> {
    let (s, paused, live, claims, repos) = tokio::try_join!(
        store.settings(),
        store.afk_paused(),
        // Live counts from every active claim, not only the recent ones.
        store.live_claim_counts(),
        store.claims(RECENT),
        store.repos(),
    )?;
    let problems = scheduler.problems();
    let count = |n: i64| usize::try_from(n).unwrap_or(0);
    Ok(AfkStatus {
        paused,
        live: count(live.values().sum()),
        afk: s.afk,
        admission: scheduler.admission(),
        limited: scheduler.limited(),
        repos: repos
            .into_iter()
            .map(|r| RepoAfk {
                label: r.effective_label().to_owned(),
                live: count(live.get(&r.id).copied().unwrap_or(0)),
                problem: problems.get(&r.name).cloned(),
                repo: r.name,
                enabled: r.afk_enabled,
                paused: r.afk_paused,
                max_concurrent: r.afk_max_concurrent,
            })
            .collect(),
        recent: claims,
    })
}

/// Pauses (or resumes) the scheduler on every node; live runs go on.
pub async fn set_paused(store: &Store, paused: bool) -> Result<(), StoreError> {
    store.set_afk_paused(paused).await
}

/// Outcomes, tokens and cost of one group of AFK runs.
#[derive(Serialize, Deserialize, ToSchema, Default, Clone, PartialEq, Debug)]
pub struct LedgerRow {
    pub repo: Option<String>,
    pub model: Option<String>,
    pub effort: Option<String>,
    /// The group's outcome, in `by_outcome` (`null` there for runs that have
    /// none yet).
    pub outcome: Option<String>,
    pub runs: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub timed_out: usize,
    /// Runs an operator stopped (outcome `stopped`): counted neither as a
    /// success nor as a failure.
    #[serde(default)]
    pub stopped: usize,
    /// Rounds on pull requests (each run has at least one).
    pub rounds: i64,
    /// Runs that were a second or later attempt at their issue.
    pub retries: i64,
    /// Median duration of the ended runs, in seconds.
    pub median_seconds: Option<f64>,
    /// Every token the runs used (input, output, cache read and written), as
    /// far as lab has read their transcripts.
    pub tokens: i64,
    /// What the runs cost, in US dollars (those whose transcript was read);
    /// `null` when one of them used a model without a price, or none was
    /// read.
    pub cost_usd: Option<f64>,
    /// What a resolved issue costs: the group's whole cost over its
    /// successes; `null` without a success or a known cost.
    pub cost_per_success_usd: Option<f64>,
    /// Runs whose pull request was merged (the run ended `pr-merged`, or
    /// its built-in pull request was merged after).
    pub merged: usize,
    /// What a merged pull request costs: the group's whole cost (failed
    /// attempts included) over its merged pull requests; `null` without a
    /// merge or a known cost.
    pub cost_per_merged_usd: Option<f64>,
}

impl LedgerRow {
    /// The cost per success as shown: `-` when nothing succeeded (there is
    /// no such cost), `?` when a run's model has no price.
    pub fn per_success_shown(&self) -> String {
        if self.succeeded == 0 {
            "-".to_owned()
        } else {
            crate::domain::compact_cost(self.cost_per_success_usd)
        }
    }

    /// The cost per merged pull request as shown: `-` without a merge,
    /// `?` when a run's model has no price.
    pub fn per_merged_shown(&self) -> String {
        if self.merged == 0 {
            "-".to_owned()
        } else {
            crate::domain::compact_cost(self.cost_per_merged_usd)
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct LedgerBody {
    pub by_repo: Vec<LedgerRow>,
    pub by_model: Vec<LedgerRow>,
    /// By outcome: what succeeded, failed and timed-out runs used.
    pub by_outcome: Vec<LedgerRow>,
}

/// The ledger: AFK runs grouped by repo, by model/effort and by outcome,
/// counted by the database over every AFK run, each list sorted by its
/// group.
pub async fn ledger(store: &Store) -> Result<LedgerBody, StoreError> {
    let (repos, models, outcomes) = tokio::try_join!(
        store.afk_ledger(LedgerBy::Repo),
        store.afk_ledger(LedgerBy::Model),
        store.afk_ledger(LedgerBy::Outcome),
    )?;
    let row = |c: LedgerCount, by: LedgerBy| {
        let (mut repo, mut model, mut effort, mut outcome) = (None, None, None, None);
        match by {
            LedgerBy::Repo => repo = Some(c.name),
            LedgerBy::Model => (model, effort) = (Some(c.name), Some(c.sub)),
            LedgerBy::Outcome => outcome = Some(c.name).filter(|o| !o.is_empty()),
        }
        let n = |v: i64| usize::try_from(v).unwrap_or(0);
        let cost_usd = c.cost_nano.map(nano_to_usd);
        LedgerRow {
            repo,
            model,
            effort,
            outcome,
            runs: n(c.runs),
            succeeded: n(c.succeeded),
            failed: n(c.failed),
            timed_out: n(c.timed_out),
            stopped: n(c.stopped),
            rounds: c.rounds,
            retries: c.retries,
            median_seconds: c.median_ms.map(|ms| ms / 1000.0),
            tokens: c.tokens,
            cost_usd,
            cost_per_success_usd: cost_usd
                .filter(|_| c.succeeded > 0)
                .map(|usd| usd / c.succeeded as f64),
            merged: n(c.merged),
            cost_per_merged_usd: cost_usd
                .filter(|_| c.merged > 0)
                .map(|usd| usd / c.merged as f64),
        }
    };
    let rows = |counts: Vec<LedgerCount>, by| -> Vec<LedgerRow> {
        counts.into_iter().map(|c| row(c, by)).collect()
    };
    let mut by_repo = rows(repos, LedgerBy::Repo);
    let mut by_model = rows(models, LedgerBy::Model);
    let mut by_outcome = rows(outcomes, LedgerBy::Outcome);
    by_repo.sort_by(|a, b| a.repo.cmp(&b.repo));
    by_model.sort_by(|a, b| (&a.model, &a.effort).cmp(&(&b.model, &b.effort)));
    by_outcome.sort_by(|a, b| a.outcome.cmp(&b.outcome));
    Ok(LedgerBody {
        by_repo,
        by_model,
        by_outcome,
    })
}
