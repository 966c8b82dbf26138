//! Notifications (ADR 15): the operator's endpoints and the outbox of what
//! each is owed.
//!
//! A run's state change queues its rows in the database itself, in the
//! transaction of the change (the `runs_notify` trigger of migration 0009),
//! so no path that changes a state can forget it and a crash loses none; a
//! pull request queues its rows here when it is opened. The unique key
//! (endpoint, run, event, change) makes each state change queued once. Any
//! node delivers: it leases the oldest pending row of an endpoint, so rows
//! of one endpoint go out in order and two nodes never send one row at once.

use super::Written;
use sqlx::FromRow;

use super::{Result, Store, StoreError, now_ms, on_db};
use crate::domain::{NotifyEvent, NotifyKind, Outcome, Run};
use crate::settings::notifications::{self, Endpoint};

#[derive(FromRow)]
pub(super) struct EndpointRow {
    pub id: i64,
    pub kind: NotifyKind,
    pub url: String,
    pub token: Option<String>,
    pub events: String,
}

impl EndpointRow {
    pub fn endpoint(&self) -> Result<Endpoint> {
        Ok(Endpoint {
            kind: self.kind,
            url: self.url.clone(),
            token: self.token.clone(),
            events: notifications::parse_events(&self.events)
                .map_err(|e| StoreError::Corrupt(format!("notify_endpoints.events: {e}")))?,
        })
    }
}

pub(super) const SELECT_ENDPOINTS: &str =
    "SELECT id, kind, url, token, events FROM notify_endpoints ORDER BY position, id";

/// A notification due now, with where it goes.
#[derive(Debug, Clone, FromRow)]
pub struct Due {
    pub id: i64,
    pub endpoint_id: i64,
    pub kind: NotifyKind,
    pub url: String,
    pub token: Option<String>,
    pub run_id: i64,
    pub repo: String,
    pub event: NotifyEvent,
    pub state: String,
    pub reason: Option<String>,
    pub pull_request: Option<String>,
    /// When it happened (ms).
    pub at: i64,
    /// Attempts before this one.
    pub attempts: i64,
    /// The AFK outcome of the run, as stored (none for a manual run, or
    /// one not judged yet).
    pub outcome: Option<String>,
    /// The issue an AFK run worked on.
    pub issue_number: Option<i64>,
    pub issue_title: Option<String>,
    pub issue_url: Option<String>,
}

impl Due {
    /// The run's outcome, when lab knows the spelling.
    pub fn outcome(&self) -> Option<Outcome> {
        self.outcome.as_deref().and_then(|o| o.parse().ok())
    }
}

/// How long an AFK run's end waits in the outbox for its outcome, so the
/// notification says it (an outcome is judged within a second or two of
/// the end, or after the run's check).
pub const OUTCOME_WAIT_MS: i64 = 60_000;

impl Store {
    /// The notification endpoints, in order.
    pub async fn notifications(&self) -> Result<Vec<Endpoint>> {
        let rows: Vec<EndpointRow> = on_db!(self.db(), pool => {
            sqlx::query_as(SELECT_ENDPOINTS).fetch_all(pool).await?
        });
        rows.iter().map(EndpointRow::endpoint).collect()
    }

    /// Queues `pr_opened` for a run's pull request (once per run).
    pub async fn note_pull_opened(&self, run: &Run, url: &str) -> Result<()> {
        let now = now_ms();
        let _counted = self.writing(Written::Outbox);
        on_db!(self.db(), pool => {
            sqlx::query(
                "INSERT INTO notify_outbox (endpoint_id, run_id, repo, event, state, reason, pull_request, \
                 change_key, at, next_attempt_at) \
                 SELECT e.id, $1, $2, 'pr_opened', $3, $4, $5, 0, $6, $6 FROM notify_endpoints e \
                 WHERE ',' || e.events || ',' LIKE '%,pr_opened,%' ON CONFLICT DO NOTHING",
            )
            .bind(run.id)
            .bind(&run.repo_name)
            .bind(run.state.as_str())
            .bind(&run.state_reason)
            .bind(url)
            .bind(now)
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// The oldest pending row of each endpoint, when it is due and no node
    /// holds it.
    pub async fn due_notifications(&self, now: i64) -> Result<Vec<Due>> {
        let rows: Vec<Due> = on_db!(self.db(), pool => {
            sqlx::query_as(
                "SELECT o.id, o.endpoint_id, e.kind, e.url, e.token, o.run_id, o.repo, o.event, o.state, \
                 o.reason, o.pull_request, o.at, o.attempts, c.outcome, r.issue_number, r.issue_title, \
                 r.issue_url \
                 FROM notify_outbox o JOIN notify_endpoints e ON e.id = o.endpoint_id \
                 LEFT JOIN runs r ON r.id = o.run_id \
                 LEFT JOIN afk_claims c ON c.run_id = o.run_id \
                 WHERE o.id IN (SELECT MIN(id) FROM notify_outbox \
                   WHERE delivered_at IS NULL AND given_up_at IS NULL GROUP BY endpoint_id) \
                 AND o.next_attempt_at <= $1 AND (o.lease_until IS NULL OR o.lease_until < $1) \
                 AND NOT (o.event IN ('ended', 'failed') AND COALESCE(c.active, FALSE) AND c.outcome IS NULL \
                          AND o.at > $2) \
                 ORDER BY o.id LIMIT 100",
            )
            .bind(now)
            .bind(now - OUTCOME_WAIT_MS)
            .fetch_all(pool)
            .await?
        });
        Ok(rows)
    }

    /// When the first pending row becomes due (ms), among each endpoint's
    /// oldest (the only ones `due_notifications` gives): the latest of its
    /// next attempt, the end of its lease and, for an AFK run's end still
    /// waiting for its outcome, the end of that wait ([`OUTCOME_WAIT_MS`]:
    /// the outcome's own write comes sooner); `None` when none is pending.
    pub async fn next_notification_at(&self) -> Result<Option<i64>> {
        let (at,): (Option<i64>,) = on_db!(self.db(), pool => {
            sqlx::query_as(
                "SELECT MIN(CASE \
                   WHEN o.event IN ('ended', 'failed') AND COALESCE(c.active, FALSE) \
                     AND c.outcome IS NULL AND o.at + $1 > o.next_attempt_at \
                     AND o.at + $1 > COALESCE(o.lease_until, 0) THEN o.at + $1 \
                   WHEN o.lease_until > o.next_attempt_at THEN o.lease_until \
                   ELSE o.next_attempt_at END) \
                 FROM notify_outbox o LEFT JOIN afk_claims c ON c.run_id = o.run_id \
                 WHERE o.id IN (SELECT MIN(id) FROM notify_outbox \
                   WHERE delivered_at IS NULL AND given_up_at IS NULL GROUP BY endpoint_id)",
            )
            .bind(OUTCOME_WAIT_MS)
            .fetch_one(pool)
            .await?
        });
        Ok(at)
    }

    /// How many rows are neither delivered nor given up.
    pub async fn pending_notifications(&self) -> Result<i64> {
        let (n,): (i64,) = on_db!(self.db(), pool => {
            sqlx::query_as(
                "SELECT COUNT(*) FROM notify_outbox WHERE delivered_at IS NULL AND given_up_at IS NULL",
            )
            .fetch_one(pool)
            .await?
        });
        Ok(n)
    }

    /// Takes a due row for one attempt until `until`; false when another
    /// node took it, or it was settled, first.
    pub async fn lease_notification(&self, id: i64, now: i64, until: i64) -> Result<bool> {
        let n = on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE notify_outbox SET lease_until = $1, attempts = attempts + 1 WHERE id = $2 \
                 AND delivered_at IS NULL AND given_up_at IS NULL \
                 AND (lease_until IS NULL OR lease_until < $3)",
            )
            .bind(until)
            .bind(id)
            .bind(now)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(n == 1)
    }

    pub async fn notification_delivered(&self, id: i64) -> Result<()> {
        let _counted = self.writing(Written::Outbox);
        on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE notify_outbox SET delivered_at = $1, lease_until = NULL, last_error = NULL WHERE id = $2",
            )
            .bind(now_ms())
            .bind(id)
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// Records a failed attempt: try again at `retry_at`, or (`None`) give
    /// up on the row.
    pub async fn notification_failed(
        &self,
        id: i64,
        error: &str,
        retry_at: Option<i64>,
    ) -> Result<()> {
        let now = now_ms();
        let _counted = self.writing(Written::Outbox);
        on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE notify_outbox SET lease_until = NULL, last_error = $1, \
                 next_attempt_at = COALESCE($2, next_attempt_at), given_up_at = $3 WHERE id = $4",
            )
            .bind(error)
            .bind(retry_at)
            .bind(retry_at.is_none().then_some(now))
            .bind(id)
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// Forgets rows settled before `before` (ms).
    pub async fn prune_notifications(&self, before: i64) -> Result<u64> {
        let n = on_db!(self.db(), pool => {
            sqlx::query("DELETE FROM notify_outbox WHERE delivered_at < $1 OR given_up_at < $1")
                .bind(before)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(n)
    }
}
