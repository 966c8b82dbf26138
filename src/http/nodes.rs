//! `GET /api/v1/nodes` (issue 29): the fleet's nodes, each as its last beat
//! said, with its state and its live runs; draining one, forgetting one.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, ErrorBody};
use super::extract::ApiPath;
use crate::domain::{Capacity, Node, NodeState, rfc3339};
use crate::service::nodes;
use crate::state::AppState;

/// A lab node sharing this database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NodeBody {
    pub id: String,
    /// Where other nodes reach it (`lab serve --node-url`).
    pub url: String,
    /// Its lab version.
    pub version: String,
    /// `up`, `down` (no beat for `lab serve --node-down-after`, 30 s by
    /// default) or `draining`.
    pub state: NodeState,
    /// When it started, and when it last beat (RFC 3339).
    pub started_at: String,
    pub last_seen: String,
    /// Its live runs.
    pub runs: i64,
    pub capacity: Capacity,
}

impl NodeBody {
    fn new((n, runs): (Node, i64), now: i64, down_after: i64) -> NodeBody {
        NodeBody {
            state: n.state(now, down_after),
            runs,
            started_at: rfc3339(n.started_at),
            last_seen: rfc3339(n.last_seen),
            id: n.id,
            url: n.url,
            version: n.version,
            capacity: n.capacity,
        }
    }
}

/// Every node that ever beat, by id.
#[utoipa::path(get, path = "/nodes", tag = "nodes",
    responses((status = 200, body = Vec<NodeBody>)))]
async fn list_nodes(State(app): State<AppState>) -> ApiResult<Json<Vec<NodeBody>>> {
    let now = crate::store::now_ms();
    let all = nodes::list(&app.store).await?;
    Ok(Json(
        all.into_iter()
            .map(|n| NodeBody::new(n, now, app.runner.cfg().node_down_after_ms))
            .collect(),
    ))
}

/// Stops new launches on a node (AFK and manual) while its runs finish.
#[utoipa::path(post, path = "/nodes/{id}/drain", tag = "nodes",
    params(("id" = String, Path, description = "the node's id")),
    responses((status = 200, body = NodeBody), (status = 404, body = ErrorBody)))]
async fn drain_node(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<NodeBody>> {
    let n = nodes::set_draining(&app.store, &id, true).await?;
    Ok(Json(NodeBody::new(
        n,
        crate::store::now_ms(),
        app.runner.cfg().node_down_after_ms,
    )))
}

/// Lets a drained node launch again.
#[utoipa::path(post, path = "/nodes/{id}/undrain", tag = "nodes",
    params(("id" = String, Path, description = "the node's id")),
    responses((status = 200, body = NodeBody), (status = 404, body = ErrorBody)))]
async fn undrain_node(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<NodeBody>> {
    let n = nodes::set_draining(&app.store, &id, false).await?;
    Ok(Json(NodeBody::new(
        n,
        crate::store::now_ms(),
        app.runner.cfg().node_down_after_ms,
    )))
}

/// Forgets a node that is down for good (a machine retired): it leaves the
/// list. Refused (409) for the node answering, for a node that is not down,
/// and for one whose live runs or AFK claims are not yet taken over.
#[utoipa::path(delete, path = "/nodes/{id}", tag = "nodes",
    params(("id" = String, Path, description = "the node's id")),
    responses((status = 204),
              (status = 404, body = ErrorBody),
              (status = 409, description = "The node is this one, not down, or still holds runs or claims", body = ErrorBody)))]
async fn forget_node(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    nodes::forget(
        &app.store,
        app.runner.node(),
        &id,
        app.runner.cfg().node_down_after_ms,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_nodes))
        .routes(routes!(drain_node))
        .routes(routes!(undrain_node))
        .routes(routes!(forget_node))
}
