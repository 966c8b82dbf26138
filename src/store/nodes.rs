//! The fleet's nodes (issue 29): each node's row, written by its own beat.

use sqlx::FromRow;

use super::afk::{COLUMNS as CLAIM_COLUMNS, Claim};
use super::{Result, Store, StoreError, Written, now_ms, on_db};
use crate::domain::{Capacity, Node, Outcome};

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
    /// The database's clock (ms since the epoch). The nodes of a fleet
    /// stamp their beats with it and read them against it, so that two
    /// machines whose clocks differ agree on which node is down. A SQLite
    /// file is this machine's alone: its clock is this machine's.
    pub async fn clock_ms(&self) -> Result<i64> {
        Ok(match self.db() {
            super::Db::Sqlite(_) => now_ms(),
            super::Db::Pg(pool) => {
                let (ms,): (i64,) = sqlx::query_as(
                    "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
                )
                .fetch_one(pool)
                .await?;
                ms
            }
        })
    }

    /// Records a node's beat at its `last_seen` (ms, on the database's
    /// clock: [`Store::clock_ms`]): its row made on the first, its
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

    /// Forgets node `id` when its last beat (on the database's clock) is
    /// older than `before`: `false` when it beat since, or never did. A
    /// node that beats again is recorded again.
    pub async fn forget_node(&self, id: &str, before: i64) -> Result<bool> {
        let n = on_db!(self.db(), pool => {
            sqlx::query("DELETE FROM nodes WHERE id = $1 AND last_seen < $2")
                .bind(id)
                .bind(before)
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

    /// Every node that ever beat, by id, its last beat told on this
    /// machine's clock (beats are stamped with the database's: see
    /// [`Store::clock_ms`]).
    pub async fn nodes(&self) -> Result<Vec<Node>> {
        let rows: Vec<NodeRow> = on_db!(self.db(), pool => {
            sqlx::query_as(
                "SELECT id, url, version, started_at, last_seen, draining, capacity \
                 FROM nodes ORDER BY id",
            )
            .fetch_all(pool)
            .await?
        });
        let ahead = now_ms() - self.clock_ms().await?;
        rows.into_iter()
            .map(|r| {
                Node::try_from(r).map(|mut n| {
                    n.last_seen = n.last_seen.saturating_add(ahead);
                    n
                })
            })
            .collect()
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

    /// The key the nodes sign their calls to one another with (hex): `fresh`
    /// for the first node that asks, the same for every node after.
    pub async fn fleet_key(&self, fresh: &str) -> Result<String> {
        let (key,): (String,) = on_db!(self.db(), pool => {
            sqlx::query("INSERT INTO fleet_key (id, key) VALUES (1, $1) ON CONFLICT (id) DO NOTHING")
                .bind(fresh)
                .execute(pool)
                .await?;
            sqlx::query_as("SELECT key FROM fleet_key WHERE id = 1").fetch_one(pool).await?
        });
        Ok(key)
    }

    /// Every live run of node `node` becomes `lost` with `reason` (the node
    /// is down). Its run token's digest stays, so that the node, back, can
    /// take a manual run up again; a lost run's token opens nothing. The
    /// runs it changed.
    pub async fn lose_runs_of_node(&self, node: &str, reason: &str) -> Result<Vec<i64>> {
        let _counted = self.writing(Written::Runs);
        let sql = format!(
            "UPDATE runs SET state = 'lost', state_reason = $1 WHERE node = $2 AND state IN {} RETURNING id",
            super::runs::ACTIVE_STATES_SQL
        );
        let ids: Vec<(i64,)> = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(reason).bind(node).fetch_all(pool).await?
        });
        Ok(ids.into_iter().map(|(id,)| id).collect())
    }

    /// A run of this node that the fleet made `lost` because the node was
    /// down (`reason`), live again: the node is back and its session lives.
    pub async fn readopt_node_run(&self, id: i64, reason: &str) -> Result<bool> {
        let _counted = self.writing(Written::Runs);
        let n = on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE runs SET state = 'running', state_reason = NULL \
                 WHERE id = $1 AND state = 'lost' AND state_reason = $2",
            )
            .bind(id)
            .bind(reason)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(n == 1)
    }

    /// The claims node `dead` holds: active, or ended with the issue not
    /// told yet.
    pub async fn claims_of_node(&self, dead: &str) -> Result<Vec<Claim>> {
        let sql = format!(
            "SELECT {CLAIM_COLUMNS} FROM afk_claims WHERE node = $1 \
             AND (active OR (outcome IS NOT NULL AND NOT relabelled)) ORDER BY id"
        );
        Ok(on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(dead).fetch_all(pool).await?
        }))
    }

    /// Node `me` takes claim `claim` over from node `dead`: an active one
    /// ends `outcome` with `detail` (tried again from `retry_at` when
    /// given), and either way `me` tells its issue. False when another node
    /// took it first, or `dead` came back and moved it on.
    pub async fn take_over_claim(
        &self,
        claim: &Claim,
        dead: &str,
        me: &str,
        ending: Option<(Outcome, &str, Option<i64>)>,
    ) -> Result<bool> {
        let _counted = self.writing(Written::Claims);
        let n = match ending {
            Some((outcome, detail, retry_at)) => on_db!(self.db(), pool => {
                sqlx::query(
                    "UPDATE afk_claims SET node = $1, active = FALSE, outcome = $2, detail = $3, \
                     ended_at = $4, retry_at = $5 WHERE id = $6 AND node = $7 AND active",
                )
                .bind(me)
                .bind(outcome)
                .bind(detail)
                .bind(now_ms())
                .bind(retry_at)
                .bind(claim.id)
                .bind(dead)
                .execute(pool)
                .await?
                .rows_affected()
            }),
            None => on_db!(self.db(), pool => {
                sqlx::query(
                    "UPDATE afk_claims SET node = $1 WHERE id = $2 AND node = $3 AND NOT active \
                     AND outcome IS NOT NULL AND NOT relabelled",
                )
                .bind(me)
                .bind(claim.id)
                .bind(dead)
                .execute(pool)
                .await?
                .rows_affected()
            }),
        };
        Ok(n == 1)
    }
}
