//! The AFK ledger, as the API and the AFK page both show it.

use serde::Serialize;
use utoipa::ToSchema;

use crate::store::{LedgerBy, LedgerCount, Store, StoreError};

/// Outcomes of one group of AFK runs.
#[derive(Serialize, ToSchema, Default, Clone, PartialEq, Debug)]
pub struct LedgerRow {
    pub repo: Option<String>,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub runs: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub timed_out: usize,
    /// Median duration of the ended runs, in seconds.
    pub median_seconds: Option<f64>,
}

#[derive(Serialize, ToSchema)]
pub struct LedgerBody {
    pub by_repo: Vec<LedgerRow>,
    pub by_model: Vec<LedgerRow>,
}

/// The ledger: AFK runs grouped by repo and by model/effort, counted by the
/// database over every AFK run, each list sorted by its group.
pub async fn ledger(store: &Store) -> Result<LedgerBody, StoreError> {
    let (repos, models) = tokio::try_join!(
        store.afk_ledger(LedgerBy::Repo),
        store.afk_ledger(LedgerBy::Model)
    )?;
    let row = |c: LedgerCount, by: LedgerBy| {
        let (repo, model, effort) = match by {
            LedgerBy::Repo => (Some(c.name), None, None),
            LedgerBy::Model => (None, Some(c.name), Some(c.sub)),
        };
        let n = |v: i64| usize::try_from(v).unwrap_or(0);
        LedgerRow {
            repo,
            model,
            effort,
            runs: n(c.runs),
            succeeded: n(c.succeeded),
            failed: n(c.failed),
            timed_out: n(c.timed_out),
            median_seconds: c.median_ms.map(|ms| ms / 1000.0),
        }
    };
    let mut by_repo: Vec<LedgerRow> = repos.into_iter().map(|c| row(c, LedgerBy::Repo)).collect();
    let mut by_model: Vec<LedgerRow> = models
        .into_iter()
        .map(|c| row(c, LedgerBy::Model))
        .collect();
    by_repo.sort_by(|a, b| a.repo.cmp(&b.repo));
    by_model.sort_by(|a, b| (&a.model, &a.effort).cmp(&(&b.model, &b.effort)));
    Ok(LedgerBody { by_repo, by_model })
}
