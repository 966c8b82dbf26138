//! `GET /api/v1/nodes` (issue 29): the fleet's nodes, each as its last beat
//! said, with its state and its live runs.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::ApiPath;
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
    Ok(Json(bodies(&app).await?))
}

/// Stops new launches on a node (AFK and manual) while its runs finish.
#[utoipa::path(post, path = "/nodes/{id}/drain", tag = "nodes",
    params(("id" = String, Path, description = "the node's id")),
    responses((status = 200, body = NodeBody), (status = 404, body = ErrorBody)))]
async fn drain_node(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<NodeBody>> {
    set_draining(&app, &id, true).await
}

/// Lets a drained node launch again.
#[utoipa::path(post, path = "/nodes/{id}/undrain", tag = "nodes",
    params(("id" = String, Path, description = "the node's id")),
    responses((status = 200, body = NodeBody), (status = 404, body = ErrorBody)))]
async fn undrain_node(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<NodeBody>> {
    set_draining(&app, &id, false).await
}

async fn set_draining(app: &AppState, id: &str, draining: bool) -> ApiResult<Json<NodeBody>> {
    let found = app
        .store
        .set_node_draining(id, draining)
        .await
        .map_err(|e| ApiError::from_store(e, || format!("node '{id}'")))?;
    if !found {
        return Err(ApiError::from_store(
            crate::store::StoreError::NotFound,
            || format!("node '{id}'"),
        ));
    }
    let all = bodies(app).await?;
    all.into_iter()
        .find(|n| n.id == id)
        .map(Json)
        .ok_or_else(|| {
            ApiError::from_store(crate::store::StoreError::NotFound, || {
                format!("node '{id}'")
            })
        })
}

/// The nodes as the API shows them, each with its live runs.
async fn bodies(app: &AppState) -> ApiResult<Vec<NodeBody>> {
    let internal = |e| ApiError::from_store(e, || "the nodes".to_owned());
    let nodes = app.store.nodes().await.map_err(internal)?;
    let runs = app.store.live_runs_by_node().await.map_err(internal)?;
    let now = crate::store::now_ms();
    Ok(nodes
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
        .collect())
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_nodes))
        .routes(routes!(drain_node))
        .routes(routes!(undrain_node))
}
