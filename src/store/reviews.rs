//! The review phase's records (issue 28 §3): each verdict a claim's review
//! runs submitted, and the claim's review run while one judges it.

use sqlx::FromRow;

use super::afk::COLUMNS as CLAIM_COLUMNS;
use super::{Claim, Result, Store, StoreError, Written, now_ms, on_db};
use crate::domain::{Checked, Finding, Review, Stage, Verdict};

const COLUMNS: &str = "claim_id, run_id, round, head, verdict, summary, findings, created_at";

#[derive(FromRow)]
struct ReviewRow {
    claim_id: i64,
    run_id: i64,
    round: i64,
    head: String,
    verdict: Verdict,
    summary: String,
    findings: String,
    created_at: i64,
}

impl From<ReviewRow> for Review {
    fn from(r: ReviewRow) -> Review {
        Review {
            claim_id: r.claim_id,
            run_id: r.run_id,
            round: r.round,
            head: r.head,
            verdict: r.verdict,
            summary: r.summary,
            // Written by lab from checked findings; a row lab cannot read
            // shows none rather than failing the read.
            findings: serde_json::from_str::<Vec<Finding>>(&r.findings).unwrap_or_default(),
            created_at: r.created_at,
        }
    }
}

/// Where a verdict is recorded: its claim, issue, run, round and head.
#[derive(Debug, Clone, Copy)]
pub struct ReviewOf<'a> {
    pub claim: &'a Claim,
    pub run: i64,
    pub head: &'a str,
}

impl Store {
    /// Ties a claim in review to its review run (at the run's launch, as
    /// `attach_run` does a work run).
    pub async fn attach_review_run(&self, claim: i64, run: i64) -> Result<()> {
        let _counted = self.writing(Written::Claims);
        on_db!(self.db(), pool => {
            sqlx::query("UPDATE afk_claims SET review_run_id = $1 WHERE id = $2")
                .bind(run)
                .bind(claim)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// The active claim a review run judges for.
    pub async fn claim_of_review_run(&self, run: i64) -> Result<Option<Claim>> {
        let sql =
            format!("SELECT {CLAIM_COLUMNS} FROM afk_claims WHERE review_run_id = $1 AND active");
        Ok(on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(run).fetch_optional(pool).await?
        }))
    }

    /// A claim leaves its review for the work (a round, or its judgement):
    /// `false` when it was not in review (another move came first).
    pub async fn end_review(&self, claim: i64) -> Result<bool> {
        let _counted = self.writing(Written::Claims);
        let n = on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE afk_claims SET stage = $1, review_run_id = NULL \
                 WHERE id = $2 AND stage = $3 AND active",
            )
            .bind(Stage::Work)
            .bind(claim)
            .bind(Stage::Review)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(n == 1)
    }

    /// Puts why an ended run's issue needs a person in its `state_reason`
    /// (a run still live keeps its own).
    pub async fn note_run_reason(&self, run: i64, reason: &str) -> Result<()> {
        let _counted = self.writing(Written::Runs);
        on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE runs SET state_reason = $1 WHERE id = $2 \
                 AND state IN ('exited', 'stopped', 'failed', 'lost')",
            )
            .bind(reason)
            .bind(run)
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// Forgets what a claim's checks said (a review round sends the work
    /// back: its checks run again).
    pub async fn clear_claim_checks(&self, claim: i64) -> Result<()> {
        let _counted = self.writing(Written::Claims);
        on_db!(self.db(), pool => {
            sqlx::query("UPDATE afk_claims SET checks = NULL WHERE id = $1")
                .bind(claim)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Records a review run's verdict; a run submits one
    /// ([`StoreError::Conflict`] for a second).
    pub async fn submit_review(&self, of: ReviewOf<'_>, checked: &Checked) -> Result<Review> {
        let _counted = self.writing(Written::Claims);
        let sql = format!(
            "INSERT INTO reviews (repo_id, issue_number, claim_id, run_id, round, head, verdict, \
             summary, findings, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             RETURNING {COLUMNS}"
        );
        let findings = serde_json::to_string(&checked.findings).expect("findings are JSON");
        let row: std::result::Result<ReviewRow, sqlx::Error> = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(of.claim.repo_id)
                .bind(of.claim.issue_number)
                .bind(of.claim.id)
                .bind(of.run)
                .bind(of.claim.rounds)
                .bind(of.head)
                .bind(checked.verdict)
                .bind(&checked.summary)
                .bind(findings)
                .bind(now_ms())
                .fetch_one(pool)
                .await
        });
        match row {
            Ok(r) => Ok(r.into()),
            Err(sqlx::Error::Database(d)) if d.is_unique_violation() => Err(StoreError::Conflict(
                format!("run {} already submitted its verdict", of.run),
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// The verdicts on a claim, oldest first.
    pub async fn reviews_of_claim(&self, claim: i64) -> Result<Vec<Review>> {
        let sql = format!("SELECT {COLUMNS} FROM reviews WHERE claim_id = $1 ORDER BY id");
        let rows: Vec<ReviewRow> = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(claim).fetch_all(pool).await?
        });
        Ok(rows.into_iter().map(Review::from).collect())
    }

    /// Every verdict on an issue's pull requests, oldest first.
    pub async fn reviews_of_issue(&self, repo_id: i64, issue: i64) -> Result<Vec<Review>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM reviews WHERE repo_id = $1 AND issue_number = $2 ORDER BY id"
        );
        let rows: Vec<ReviewRow> = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(repo_id).bind(issue).fetch_all(pool).await?
        });
        Ok(rows.into_iter().map(Review::from).collect())
    }
}
