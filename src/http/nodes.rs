//! `GET /api/v1/nodes` (issue 29): the fleet's nodes, each as its last beat
//! said, with its state and its live runs.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ApiResult};
use crate::domain::{Capacity, NodeState, rfc3339};
use crate::state::AppState;

/// A lab node sharing this database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NodeBody {
    pub id: String,
    /// Where other nodes reach it (`lab serve --node-url`).
    pub url: String,
    /// Its lab version.
    pub version: String,
    /// `up`, `down` (no beat for 30 s) or `draining`.
    pub state: NodeState,
    /// When it started, and when it last beat (RFC 3339).
    pub started_at: String,
    pub last_seen: String,
    /// Its live runs.
    pub runs: i64,
    pub capacity: Capacity,
}

/// Every node that ever beat, by id.
#[utoipa::path(get, path = "/nodes", tag = "nodes",
    responses((status = 200, body = Vec<NodeBody>)))]
async fn list_nodes(State(app): State<AppState>) -> ApiResult<Json<Vec<NodeBody>>> {
    let internal = |e| ApiError::from_store(e, || "the nodes".to_owned());
    let nodes = app.store.nodes().await.map_err(internal)?;
    let runs = app.store.live_runs_by_node().await.map_err(internal)?;
    let now = crate::store::now_ms();
    Ok(Json(
        nodes
            .into_iter()
            .map(|n| NodeBody {
                state: n.state(now),
                runs: runs
                    .iter()
                    .find(|(id, _)| *id == n.id)
                    .map_or(0, |(_, c)| *c),
                started_at: rfc3339(n.started_at),
                last_seen: rfc3339(n.last_seen),
                id: n.id,
                url: n.url,
                version: n.version,
                capacity: n.capacity,
            })
            .collect(),
    ))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_nodes))
}
