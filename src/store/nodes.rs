//! The fleet's nodes (issue 29): each node's row, written by its own beat.

use sqlx::FromRow;

use super::{Result, Store, StoreError, on_db};
use crate::domain::{Capacity, Node};

#[derive(FromRow)]
struct NodeRow {
    id: String,
    url: String,
    version: String,
    started_at: i64,
    last_seen: i64,
    draining: bool,
    capacity: String,
}

impl TryFrom<NodeRow> for Node {
    type Error = StoreError;
    fn try_from(r: NodeRow) -> Result<Node> {
        Ok(Node {
            capacity: serde_json::from_str::<Capacity>(&r.capacity)
                .map_err(|e| StoreError::Corrupt(format!("node {}'s capacity: {e}", r.id)))?,
            id: r.id,
            url: r.url,
            version: r.version,
            started_at: r.started_at,
            last_seen: r.last_seen,
            draining: r.draining,
        })
    }
}

impl Store {
    /// Records a node's beat at `at` (ms): its row made on the first, its
    /// address, version and capacity kept current, its start time when it
    /// started again (`started_at`). Draining is the operator's, kept.
    pub async fn beat_node(&self, node: &Node) -> Result<()> {
        let Node {
            id,
            url,
            version,
            started_at,
            last_seen: at,
            capacity,
            draining: _,
        } = node;
        let capacity = serde_json::to_string(capacity).expect("a capacity is JSON");
        on_db!(self.db(), pool => {
            sqlx::query(
                "INSERT INTO nodes (id, url, version, started_at, last_seen, draining, capacity) \
                 VALUES ($1, $2, $3, $4, $5, FALSE, $6) \
                 ON CONFLICT (id) DO UPDATE SET url = excluded.url, version = excluded.version, \
                 started_at = excluded.started_at, last_seen = excluded.last_seen, \
                 capacity = excluded.capacity",
            )
            .bind(id)
            .bind(url)
            .bind(version)
            .bind(started_at)
            .bind(at)
            .bind(capacity)
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// Marks node `id` draining (it starts no new run) or not; `false`
    /// when no such node ever beat.
    pub async fn set_node_draining(&self, id: &str, draining: bool) -> Result<bool> {
        let n = on_db!(self.db(), pool => {
            sqlx::query("UPDATE nodes SET draining = $1 WHERE id = $2")
                .bind(draining)
                .bind(id)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(n == 1)
    }

    /// Whether node `id` is draining (a node that never beat is not).
    pub async fn node_draining(&self, id: &str) -> Result<bool> {
        let row: Option<(bool,)> = on_db!(self.db(), pool => {
            sqlx::query_as("SELECT draining FROM nodes WHERE id = $1")
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.is_some_and(|(d,)| d))
    }

    /// Every node that ever beat, by id.
    pub async fn nodes(&self) -> Result<Vec<Node>> {
        let rows: Vec<NodeRow> = on_db!(self.db(), pool => {
            sqlx::query_as(
                "SELECT id, url, version, started_at, last_seen, draining, capacity \
                 FROM nodes ORDER BY id",
            )
            .fetch_all(pool)
            .await?
        });
        rows.into_iter().map(Node::try_from).collect()
    }

    /// How many live runs each node has.
    pub async fn live_runs_by_node(&self) -> Result<Vec<(String, i64)>> {
        let sql = format!(
            "SELECT node, COUNT(*) FROM runs WHERE state IN {} GROUP BY node",
            super::runs::ACTIVE_STATES_SQL
        );
        Ok(on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_all(pool).await?
        }))
    }
}
