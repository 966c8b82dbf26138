//! The AFK ledger, counted by the database: runs, outcomes and the median
//! duration per repo and per model/effort, over every AFK run there ever
//! was. Nothing is capped, and no claim row leaves the database.
//!
//! The median is portable SQL (window functions, which SQLite and
//! PostgreSQL both have): the durations of a group are numbered in order,
//! runs without one last, and the one or two in the middle are averaged.
//! Both window functions share one window, so each grouping is one sort.

use sqlx::FromRow;

use super::{Result, Store, on_db};

/// One group of the ledger.
#[derive(Debug, Clone, PartialEq, FromRow)]
pub struct LedgerCount {
    /// The repo name, or the model.
    pub name: String,
    /// Empty for a repo; the effort for a model.
    pub sub: String,
    pub runs: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub timed_out: i64,
    /// Median of `ended_at - started_at` over the group's ended runs.
    pub median_ms: Option<f64>,
}

/// Which grouping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerBy {
    Repo,
    Model,
}

impl LedgerBy {
    fn columns(self) -> (&'static str, &'static str) {
        match self {
            LedgerBy::Repo => ("repo_name", "''"),
            LedgerBy::Model => ("COALESCE(model, '')", "COALESCE(effort, '')"),
        }
    }
}

impl Store {
    /// The ledger's groups (in no particular order). Only claims that got a
    /// run count; a run that has not ended counts in `runs` only.
    pub async fn afk_ledger(&self, by: LedgerBy) -> Result<Vec<LedgerCount>> {
        let (k, s) = by.columns();
        let sql = format!(
            "SELECT name, sub, COUNT(*) AS runs, \
               SUM(CASE WHEN outcome = 'succeeded' THEN 1 ELSE 0 END) AS succeeded, \
               SUM(CASE WHEN outcome IS NOT NULL AND outcome NOT IN ('succeeded', 'timed_out') \
                   THEN 1 ELSE 0 END) AS failed, \
               SUM(CASE WHEN outcome = 'timed_out' THEN 1 ELSE 0 END) AS timed_out, \
               CAST(AVG(CASE WHEN rn * 2 BETWEEN n AND n + 2 THEN d END) AS DOUBLE PRECISION) AS median_ms \
             FROM (SELECT {k} AS name, {s} AS sub, outcome, ended_at - started_at AS d, \
                     ROW_NUMBER() OVER w AS rn, \
                     COUNT(ended_at - started_at) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING \
                                                          AND UNBOUNDED FOLLOWING) AS n \
                   FROM afk_claims WHERE run_id IS NOT NULL \
                   WINDOW w AS (PARTITION BY {k}, {s} ORDER BY ended_at - started_at NULLS LAST)) AS t \
             GROUP BY name, sub"
        );
        Ok(on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_all(pool).await?
        }))
    }

    /// How many AFK runs are live, on every node.
    pub async fn live_claims(&self) -> Result<i64> {
        let (n,): (i64,) = on_db!(self.db(), pool => {
            sqlx::query_as("SELECT COUNT(*) FROM afk_claims WHERE active").fetch_one(pool).await?
        });
        Ok(n)
    }
}
