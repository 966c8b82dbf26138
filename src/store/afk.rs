//! AFK claims: which issue an AFK run works on, and how it ended.
//!
//! A claim is taken in one serialised write transaction that checks the
//! caps and the issue; the partial unique index on active claims is the
//! backstop when several lab nodes share one database.

use super::Written;
use sqlx::FromRow;

use super::{Result, Store, StoreError, in_tx, now_ms, on_db};
use crate::domain::{Outcome, RoundCause, RoundStep, Step};

pub(super) const COLUMNS: &str = "id, repo_id, repo_name, issue_number, run_id, node, active, model, effort, pr_url, outcome, \
     detail, relabelled, claimed_at, started_at, ended_at, attempt, rounds, retry_at, round_key, checks, pr_number, \
     stage, plan_run_id, plan_rounds, review_run_id";

#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct Claim {
    pub id: i64,
    pub repo_id: i64,
    pub repo_name: String,
    pub issue_number: i64,
    pub run_id: Option<i64>,
    pub node: String,
    pub active: bool,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub pr_url: Option<String>,
    /// How the run ended, once it did.
    pub outcome: Option<Outcome>,
    pub detail: Option<String>,
    /// Whether the issue was relabelled (and commented) after the outcome.
    pub relabelled: bool,
    pub claimed_at: i64,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    /// Which attempt at its issue (1 for the first).
    pub attempt: i64,
    /// Rounds its run had on its pull request (1 until sent back to work).
    pub rounds: i64,
    /// For a failed attempt that will be tried again: not before then (ms).
    pub retry_at: Option<i64>,
    /// What the last round was started for (head and check), so one
    /// failure starts one round.
    pub round_key: Option<String>,
    /// What the pull request's checks said last.
    pub checks: Option<String>,
    /// Its pull request's number, as the source answered when lab opened
    /// it.
    pub pr_number: Option<i64>,
    /// Where it stands: planning, its plan waiting, or the work (issue 28).
    pub stage: crate::domain::Stage,
    /// Its planning run, once the work run took its place.
    pub plan_run_id: Option<i64>,
    /// Times its plan was sent back.
    pub plan_rounds: i64,
    /// Its review run, while one judges its pull request (issue 28 §3).
    pub review_run_id: Option<i64>,
}

/// What a claim attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimResult {
    Claimed(Box<Claim>),
    /// The issue has an active run, or an outcome not yet on the issue.
    IssueTaken,
    RepoCap,
    GlobalCap,
}

/// How far apart lab nodes' clocks may be for the stale-listing check.
const CLOCK_SKEW_MS: i64 = 5_000;

impl Store {
    /// Claims `issue` of a repo for an AFK run on `node`, when neither cap is
    /// reached and the issue is free. `listed_at` is when the listing that
    /// showed the issue ready began: an issue whose outcome went on it
    /// since then (give or take the nodes' clock skew) may still be ready in
    /// that stale list, and is not taken again from it.
    #[allow(clippy::too_many_arguments)]
    pub async fn claim_issue(
        &self,
        repo_id: i64,
        repo_name: &str,
        issue: i64,
        node: &str,
        repo_cap: i64,
        global_cap: i64,
        listed_at: i64,
    ) -> Result<ClaimResult> {
        let _counted = self.writing(Written::Claims);
        let now = now_ms();
        let insert = format!(
            "INSERT INTO afk_claims (repo_id, repo_name, issue_number, node, active, claimed_at, attempt) \
             VALUES ($1, $2, $3, $4, TRUE, $5, $6) RETURNING {COLUMNS}"
        );
        let r: Result<ClaimResult> = in_tx!(self.db(), tx, pg_lock: "SELECT id FROM global_settings WHERE id = 1 FOR UPDATE" => {
            let (global,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM afk_claims WHERE active").fetch_one(&mut *tx).await?;
            let (repo,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM afk_claims WHERE active AND repo_id = $1")
                .bind(repo_id)
                .fetch_one(&mut *tx)
                .await?;
            let (taken,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM afk_claims WHERE repo_id = $1 AND issue_number = $2 \
                 AND (active OR (outcome IS NOT NULL AND NOT relabelled) OR relabelled_at >= $3 OR retry_at > $4)",
            )
            .bind(repo_id)
            .bind(issue)
            .bind(listed_at - CLOCK_SKEW_MS)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            // The attempt: the next of a lineage whose last attempt is to be
            // tried again, else a new lineage's first.
            let last: Option<(i64, Option<i64>)> = sqlx::query_as(
                "SELECT attempt, retry_at FROM afk_claims WHERE repo_id = $1 AND issue_number = $2 \
                 ORDER BY id DESC LIMIT 1",
            )
            .bind(repo_id)
            .bind(issue)
            .fetch_optional(&mut *tx)
            .await?;
            let attempt = match last {
                Some((n, Some(_))) => n + 1,
                _ => 1,
            };
            if global >= global_cap {
                Ok::<_, StoreError>(ClaimResult::GlobalCap)
            } else if repo >= repo_cap {
                Ok(ClaimResult::RepoCap)
            } else if taken > 0 {
                Ok(ClaimResult::IssueTaken)
            } else {
                let claim: std::result::Result<Claim, sqlx::Error> = sqlx::query_as(sqlx::AssertSqlSafe(insert))
                    .bind(repo_id)
                    .bind(repo_name)
                    .bind(issue)
                    .bind(node)
                    .bind(now)
                    .bind(attempt)
                    .fetch_one(&mut *tx)
                    .await;
                match claim {
                    Ok(c) => Ok(ClaimResult::Claimed(Box::new(c))),
                    Err(sqlx::Error::Database(d)) if d.is_unique_violation() => Ok(ClaimResult::IssueTaken),
                    Err(e) => Err(e.into()),
                }
            }
        });
        r
    }

    /// Ties a claim to the run that works on it.
    pub async fn attach_run(&self, claim: i64, run: i64, model: &str, effort: &str) -> Result<()> {
        let _counted = self.writing(Written::Claims);
        on_db!(self.db(), pool => {
            sqlx::query("UPDATE afk_claims SET run_id = $1, model = $2, effort = $3, started_at = $4 WHERE id = $5")
                .bind(run)
                .bind(model)
                .bind(effort)
                .bind(now_ms())
                .bind(claim)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Gives up a claim whose run could not start.
    pub async fn release_claim(&self, claim: i64) -> Result<()> {
        let _counted = self.writing(Written::Claims);
        on_db!(self.db(), pool => {
            sqlx::query("DELETE FROM afk_claims WHERE id = $1").bind(claim).execute(pool).await?;
        });
        Ok(())
    }

    async fn claims_where(&self, cond: &str, node: &str) -> Result<Vec<Claim>> {
        let sql =
            format!("SELECT {COLUMNS} FROM afk_claims WHERE node = $1 AND {cond} ORDER BY id");
        Ok(on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(node).fetch_all(pool).await?
        }))
    }

    /// Active claims of this node.
    pub async fn active_claims(&self, node: &str) -> Result<Vec<Claim>> {
        self.claims_where("active", node).await
    }

    /// Ended claims of this node whose issue was not relabelled yet.
    pub async fn claims_to_relabel(&self, node: &str) -> Result<Vec<Claim>> {
        self.claims_where("outcome IS NOT NULL AND NOT relabelled", node)
            .await
    }

    pub async fn claim_of_run(&self, run: i64) -> Result<Option<Claim>> {
        let sql = format!("SELECT {COLUMNS} FROM afk_claims WHERE run_id = $1");
        Ok(on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(run).fetch_optional(pool).await?
        }))
    }

    /// The AFK claims of one issue of a repo, oldest first: the runs that
    /// worked on it.
    pub async fn claims_of_issue(&self, repo_id: i64, number: i64) -> Result<Vec<Claim>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM afk_claims WHERE repo_id = $1 AND issue_number = $2 ORDER BY id"
        );
        Ok(on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(repo_id).bind(number).fetch_all(pool).await?
        }))
    }

    /// Records a run's pull request, its page and its number; false when
    /// it already had one.
    pub async fn set_claim_pr(&self, claim: i64, url: &str, number: i64) -> Result<bool> {
        let _counted = self.writing(Written::Claims);
        let n = on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE afk_claims SET pr_url = $1, pr_number = $2 WHERE id = $3 AND pr_url IS NULL",
            )
                .bind(url)
                .bind(number)
                .bind(claim)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(n == 1)
    }

    /// Records how an active claim's run ended; false when it had already.
    pub async fn finish_claim(&self, claim: i64, outcome: Outcome, detail: &str) -> Result<bool> {
        self.finish_claim_retry(claim, outcome, detail, None).await
    }

    /// [`finish_claim`](Self::finish_claim), and when `retry_at` is given,
    /// the issue is tried again from then by the lineage's next attempt (in
    /// the same write: no crash leaves a failed attempt neither retried nor
    /// told).
    pub async fn finish_claim_retry(
        &self,
        claim: i64,
        outcome: Outcome,
        detail: &str,
        retry_at: Option<i64>,
    ) -> Result<bool> {
        let _counted = self.writing(Written::Claims);
        let n = on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE afk_claims SET active = FALSE, outcome = $1, detail = $2, ended_at = $3, retry_at = $5 \
                 WHERE id = $4 AND active",
            )
            .bind(outcome)
            .bind(detail)
            .bind(now_ms())
            .bind(claim)
            .bind(retry_at)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(n == 1)
    }

    /// Records a new round of a claim's run, started for `key` (the head
    /// and the check that failed); false when a round for `key` was
    /// started already.
    pub async fn start_round(&self, claim: i64, key: &str, cause: RoundCause) -> Result<bool> {
        let _counted = self.writing(Written::Claims);
        let started = in_tx!(self.db(), tx => {
            let round: Option<i64> = sqlx::query_scalar(
                "UPDATE afk_claims SET rounds = rounds + 1, round_key = $1 WHERE id = $2 AND active \
                 AND (round_key IS NULL OR round_key <> $1) RETURNING rounds",
            )
            .bind(key)
            .bind(claim)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(round) = round {
                let step = Step::Round(RoundStep { round, cause });
                sqlx::query("INSERT INTO claim_steps (claim_id, at, step) VALUES ($1, $2, $3)")
                    .bind(claim)
                    .bind(now_ms())
                    .bind(serde_json::to_string(&step).expect("a step is JSON"))
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<_, StoreError>(round.is_some())
        })?;
        Ok(started)
    }

    /// Records a step lab took for a claim (a check it ran).
    pub async fn note_step(&self, claim: i64, step: &Step) -> Result<()> {
        on_db!(self.db(), pool => {
            sqlx::query("INSERT INTO claim_steps (claim_id, at, step) VALUES ($1, $2, $3)")
                .bind(claim)
                .bind(now_ms())
                .bind(serde_json::to_string(step).expect("a step is JSON"))
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// A claim's steps, oldest first, each with when it was taken (ms).
    /// A row lab cannot read (a later lab's kind of step) is left out.
    pub async fn claim_steps(&self, claim: i64) -> Result<Vec<(i64, Step)>> {
        let rows: Vec<(i64, String)> = on_db!(self.db(), pool => {
            sqlx::query_as("SELECT at, step FROM claim_steps WHERE claim_id = $1 ORDER BY id")
                .bind(claim)
                .fetch_all(pool)
                .await?
        });
        Ok(rows
            .into_iter()
            .filter_map(|(at, s)| serde_json::from_str(&s).ok().map(|s| (at, s)))
            .collect())
    }

    /// Records what a claim's pull request's checks said last.
    pub async fn set_claim_checks(&self, claim: i64, checks: &str) -> Result<()> {
        let _counted = self.writing(Written::Claims);
        on_db!(self.db(), pool => {
            sqlx::query("UPDATE afk_claims SET checks = $1 WHERE id = $2")
                .bind(checks)
                .bind(claim)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    pub async fn mark_relabelled(&self, claim: i64) -> Result<()> {
        let _counted = self.writing(Written::Claims);
        on_db!(self.db(), pool => {
            sqlx::query("UPDATE afk_claims SET relabelled = TRUE, relabelled_at = $2 WHERE id = $1")
                .bind(claim)
                .bind(now_ms())
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Every claim (newest first), for the ledger and the status.
    pub async fn claims(&self, limit: i64) -> Result<Vec<Claim>> {
        let sql = format!("SELECT {COLUMNS} FROM afk_claims ORDER BY id DESC LIMIT $1");
        Ok(on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(limit).fetch_all(pool).await?
        }))
    }

    /// Live AFK runs (active claims, on every node) per repo id.
    pub async fn live_claim_counts(&self) -> Result<std::collections::HashMap<i64, i64>> {
        let rows: Vec<(i64, i64)> = on_db!(self.db(), pool => {
            sqlx::query_as("SELECT repo_id, COUNT(*) FROM afk_claims WHERE active GROUP BY repo_id")
                .fetch_all(pool)
                .await?
        });
        Ok(rows.into_iter().collect())
    }

    /// Issue numbers of a repo the scheduler must not take now.
    pub async fn blocked_issues(&self, repo_id: i64) -> Result<Vec<i64>> {
        let rows: Vec<(i64,)> = on_db!(self.db(), pool => {
            sqlx::query_as(
                "SELECT issue_number FROM afk_claims WHERE repo_id = $1 \
                 AND (active OR (outcome IS NOT NULL AND NOT relabelled) OR retry_at > $2)",
            )
            .bind(repo_id)
            .bind(now_ms())
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(|(n,)| n).collect())
    }

    /// Pauses or resumes the AFK scheduler on every node.
    pub async fn set_afk_paused(&self, paused: bool) -> Result<()> {
        let _announce = self.writing(Written::Settings);
        on_db!(self.db(), pool => {
            sqlx::query("UPDATE global_settings SET afk_paused = $1 WHERE id = 1").bind(paused).execute(pool).await?;
        });
        Ok(())
    }

    pub async fn afk_paused(&self) -> Result<bool> {
        let (p,): (bool,) = on_db!(self.db(), pool => {
            sqlx::query_as("SELECT afk_paused FROM global_settings WHERE id = 1").fetch_one(pool).await?
        });
        Ok(p)
    }
}
