//! The AFK ledger, counted by the database: runs, outcomes, the median
//! duration, tokens and cost per repo, per model/effort and per outcome,
//! over every AFK run there ever was. Nothing is capped, and no claim row
//! leaves the database. Tokens and cost are the runs' usage (`run_usage`,
//! kept after a run is removed).
//!
//! The median is portable SQL (window functions, which SQLite and
//! PostgreSQL both have): the durations of a group are numbered in order,
//! runs without one last, and the one or two in the middle are averaged.
//! Both window functions share one window, so each grouping is one sort.

use sqlx::FromRow;

use super::{Result, Store, on_db};
use crate::domain::Outcome;

/// One group of the ledger.
#[derive(Debug, Clone, PartialEq, FromRow)]
pub struct LedgerCount {
    /// The repo name, or the model.
    pub name: String,
    /// Empty for a repo; the effort for a model.
    pub sub: String,
    pub runs: i64,
    /// Runs that left a pull request (`pr-green`, `pr-opened`,
    /// `needs-human`).
    pub succeeded: i64,
    /// Runs that ended without one and not by the time limit (`failed`,
    /// `over-budget`, and any outcome lab does not know); not those an
    /// operator stopped.
    pub failed: i64,
    pub timed_out: i64,
    /// Runs an operator stopped (`stopped`): neither a success nor a
    /// failure of the run's.
    pub stopped: i64,
    /// Runs whose pull request was merged: the run ended `pr-merged`, or a
    /// person merged its built-in pull request (issue 28 §5).
    pub merged: i64,
    /// Rounds on pull requests, over the group's runs.
    pub rounds: i64,
    /// Runs that were a second (or later) attempt at their issue.
    pub retries: i64,
    /// Median of `ended_at - started_at` over the group's ended runs.
    pub median_ms: Option<f64>,
    /// Every token the group's runs used, as far as read.
    pub tokens: i64,
    /// Their cost in billionths of a dollar; `None` when a run of the group
    /// used a model without a price (or none has a known usage).
    pub cost_nano: Option<i64>,
}

/// Which grouping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerBy {
    Repo,
    Model,
    /// By outcome (`''` for runs that have none yet).
    Outcome,
}

impl LedgerBy {
    fn columns(self) -> (&'static str, &'static str) {
        match self {
            LedgerBy::Repo => ("repo_name", "''"),
            LedgerBy::Model => ("COALESCE(model, '')", "COALESCE(effort, '')"),
            LedgerBy::Outcome => ("COALESCE(outcome, '')", "''"),
        }
    }
}

impl Store {
    /// The ledger's groups (in no particular order). Only claims that got a
    /// run count; a run that has not ended counts in `runs` only.
    pub async fn afk_ledger(&self, by: LedgerBy) -> Result<Vec<LedgerCount>> {
        let (k, s) = by.columns();
        // The outcomes as stored (SQL literals: the spellings are lab's own).
        let ok = Outcome::ALL
            .iter()
            .filter(|o| o.has_pull())
            .map(|o| format!("'{}'", o.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        let late = Outcome::TimedOut.as_str();
        let stopped = Outcome::Stopped.as_str();
        let merged = Outcome::PrMerged.as_str();
        let sql = format!(
            "SELECT name, sub, COUNT(*) AS runs, \
               SUM(CASE WHEN outcome IN ({ok}) THEN 1 ELSE 0 END) AS succeeded, \
               SUM(CASE WHEN outcome IS NOT NULL AND outcome NOT IN ({ok}, '{late}', '{stopped}') \
                   THEN 1 ELSE 0 END) AS failed, \
               SUM(CASE WHEN outcome = '{late}' THEN 1 ELSE 0 END) AS timed_out, \
               SUM(CASE WHEN outcome = '{stopped}' THEN 1 ELSE 0 END) AS stopped, \
               CAST(SUM(merged) AS BIGINT) AS merged, \
               CAST(SUM(rounds) AS BIGINT) AS rounds, \
               SUM(CASE WHEN attempt > 1 THEN 1 ELSE 0 END) AS retries, \
               CAST(AVG(CASE WHEN rn * 2 BETWEEN n AND n + 2 THEN d END) AS DOUBLE PRECISION) AS median_ms, \
               CAST(COALESCE(SUM(tokens), 0) AS BIGINT) AS tokens, \
               CASE WHEN SUM(unpriced) > 0 THEN NULL ELSE CAST(SUM(cost) AS BIGINT) END AS cost_nano \
             FROM (SELECT {k} AS name, {s} AS sub, outcome, rounds, attempt, ended_at - started_at AS d, \
                     CASE WHEN outcome = '{merged}' OR EXISTS (SELECT 1 FROM pulls p \
                       WHERE p.run_id = c.run_id AND p.merged_at IS NOT NULL) THEN 1 ELSE 0 END AS merged, \
                     u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_creation_tokens AS tokens, \
                     CASE WHEN u.transcript IS NOT NULL THEN u.cost_nano_usd END AS cost, \
                     CASE WHEN u.transcript IS NOT NULL AND u.cost_nano_usd IS NULL THEN 1 ELSE 0 END AS unpriced, \
                     ROW_NUMBER() OVER w AS rn, \
                     COUNT(ended_at - started_at) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING \
                                                          AND UNBOUNDED FOLLOWING) AS n \
                   FROM afk_claims c LEFT JOIN run_usage u ON u.run_id = c.run_id \
                   WHERE c.run_id IS NOT NULL \
                   WINDOW w AS (PARTITION BY {k}, {s} ORDER BY ended_at - started_at NULLS LAST)) AS t \
             GROUP BY name, sub"
        );
        Ok(on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_all(pool).await?
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Change;
    use crate::repo::{self, RepoPatch};
    use crate::store::ClaimResult;

    /// lab writes only [`Outcome`]s; a spelling it does not know (a hand
    /// edit) is counted as failed by the ledger, as it always was, and
    /// refused when the claim is read.
    #[tokio::test]
    async fn an_unknown_stored_outcome_counts_as_failed_and_is_not_read_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite_file(&dir.path().join("lab.db"))
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let r = repo::create(&RepoPatch {
            name: Change::Set("a".into()),
            path: Change::Set("/srv/a".into()),
            ..RepoPatch::default()
        })
        .unwrap();
        let r = store.create_repo(&r).await.unwrap();
        for (issue, outcome) in [
            (1, Outcome::PrGreen),
            (2, Outcome::TimedOut),
            (3, Outcome::Failed),
            (4, Outcome::Stopped),
        ] {
            let ClaimResult::Claimed(c) = store
                .claim_issue(r.id, "a", issue, "n", 9, 9, crate::store::now_ms())
                .await
                .unwrap()
            else {
                panic!("issue {issue} not claimed");
            };
            store.attach_run(c.id, issue, "m", "e").await.unwrap();
            assert!(store.finish_claim(c.id, outcome, "").await.unwrap());
        }
        on_db!(store.db(), pool => {
            sqlx::query("UPDATE afk_claims SET outcome = 'cancelled' WHERE issue_number = 3")
                .execute(pool)
                .await
                .unwrap();
        });
        let l = store.afk_ledger(LedgerBy::Repo).await.unwrap();
        let counts: Vec<_> = l
            .iter()
            .map(|c| (c.runs, c.succeeded, c.failed, c.timed_out, c.stopped))
            .collect();
        assert_eq!(counts, [(4, 1, 1, 1, 1)], "a stop is not a failure");
        assert!(store.claims(10).await.is_err());
    }
}
