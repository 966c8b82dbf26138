//! The plan phase's records (issue 28 §2): each version of an issue's plan
//! and its decision, and where a claim stands.

use sqlx::FromRow;

use super::{Result, Store, Written, in_tx, now_ms, on_db};
use crate::domain::{Plan, PlanState, Stage};

const COLUMNS: &str =
    "claim_id, run_id, version, body, state, decided_by, reason, created_at, decided_at";

#[derive(FromRow)]
struct PlanRow {
    claim_id: i64,
    run_id: i64,
    version: i64,
    body: String,
    state: PlanState,
    decided_by: Option<String>,
    reason: Option<String>,
    created_at: i64,
    decided_at: Option<i64>,
}

impl From<PlanRow> for Plan {
    fn from(r: PlanRow) -> Plan {
        Plan {
            claim_id: r.claim_id,
            run_id: r.run_id,
            version: r.version,
            text: r.body,
            state: r.state,
            decided_by: r.decided_by,
            reason: r.reason,
            created_at: r.created_at,
            decided_at: r.decided_at,
        }
    }
}

impl Store {
    /// Records a plan its claim's planning run submitted, as the issue's
    /// next version; a proposed one of the same claim is superseded (in
    /// the same write).
    pub async fn submit_plan(
        &self,
        claim: i64,
        repo_id: i64,
        issue: i64,
        run: i64,
        text: &str,
    ) -> Result<Plan> {
        let _counted = self.writing(Written::Claims);
        let now = now_ms();
        let insert = format!(
            "INSERT INTO plans (repo_id, issue_number, claim_id, run_id, version, body, state, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'proposed', $7) RETURNING {COLUMNS}"
        );
        let row: Result<PlanRow> = in_tx!(self.db(), tx, pg_lock: "SELECT id FROM global_settings WHERE id = 1 FOR UPDATE" => {
            sqlx::query("UPDATE plans SET state = 'superseded', decided_at = $1 WHERE claim_id = $2 AND state = 'proposed'")
                .bind(now)
                .bind(claim)
                .execute(&mut *tx)
                .await?;
            let (last,): (Option<i64>,) = sqlx::query_as(
                "SELECT MAX(version) FROM plans WHERE repo_id = $1 AND issue_number = $2",
            )
            .bind(repo_id)
            .bind(issue)
            .fetch_one(&mut *tx)
            .await?;
            let row: PlanRow = sqlx::query_as(sqlx::AssertSqlSafe(insert))
                .bind(repo_id)
                .bind(issue)
                .bind(claim)
                .bind(run)
                .bind(last.unwrap_or(0) + 1)
                .bind(text)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
            Ok::<_, super::StoreError>(row)
        });
        row.map(Plan::from)
    }

    /// Every plan of an issue, by version.
    pub async fn plans_of_issue(&self, repo_id: i64, issue: i64) -> Result<Vec<Plan>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM plans WHERE repo_id = $1 AND issue_number = $2 ORDER BY version"
        );
        let rows: Vec<PlanRow> = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(repo_id).bind(issue).fetch_all(pool).await?
        });
        Ok(rows.into_iter().map(Plan::from).collect())
    }

    /// The plans of a claim, by version.
    pub async fn plans_of_claim(&self, claim: i64) -> Result<Vec<Plan>> {
        let sql = format!("SELECT {COLUMNS} FROM plans WHERE claim_id = $1 ORDER BY version");
        let rows: Vec<PlanRow> = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(claim).fetch_all(pool).await?
        });
        Ok(rows.into_iter().map(Plan::from).collect())
    }

    /// Decides a claim's proposed plan `version`; `false` when it is no
    /// longer proposed (another decision came first).
    pub async fn decide_plan(
        &self,
        claim: i64,
        version: i64,
        state: PlanState,
        by: &str,
        reason: Option<&str>,
    ) -> Result<bool> {
        let _counted = self.writing(Written::Claims);
        let n = on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE plans SET state = $1, decided_by = $2, reason = $3, decided_at = $4 \
                 WHERE claim_id = $5 AND version = $6 AND state = 'proposed'",
            )
            .bind(state)
            .bind(by)
            .bind(reason)
            .bind(now_ms())
            .bind(claim)
            .bind(version)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(n == 1)
    }

    /// Moves an active claim from stage `from` to `to`; `false` when it was
    /// not at `from` (another move came first). `sent_back` counts a plan
    /// sent back.
    pub async fn move_claim(
        &self,
        claim: i64,
        from: Stage,
        to: Stage,
        sent_back: bool,
    ) -> Result<bool> {
        let _counted = self.writing(Written::Claims);
        let n = on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE afk_claims SET stage = $1, plan_rounds = plan_rounds + $2, review_run_id = NULL \
                 WHERE id = $3 AND stage = $4 AND active",
            )
            .bind(to)
            .bind(i64::from(sent_back))
            .bind(claim)
            .bind(from)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(n == 1)
    }

    /// The claim's work run takes its planning run's place: the claim
    /// remembers the planning run and is at work.
    pub async fn start_work(&self, claim: i64, plan_run: i64) -> Result<bool> {
        let _counted = self.writing(Written::Claims);
        let n = on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE afk_claims SET stage = 'work', plan_run_id = $1, review_run_id = NULL \
                 WHERE id = $2 AND stage = 'plan-review' AND active",
            )
            .bind(plan_run)
            .bind(claim)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(n == 1)
    }

    /// The active claim of an issue, if any.
    pub async fn active_claim_of_issue(
        &self,
        repo_id: i64,
        issue: i64,
    ) -> Result<Option<super::Claim>> {
        Ok(self
            .claims_of_issue(repo_id, issue)
            .await?
            .into_iter()
            .rev()
            .find(|c| c.active))
    }
}
