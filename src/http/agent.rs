//! A run's agent state in API bodies, and `POST /runs/{id}/hook`, where the
//! run's CLI hooks report it (ADR 13).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, ErrorBody};
use super::extract::{ApiJson, ApiPath};
use super::runs::{run_id, stored_run};
use crate::domain::{AgentState, AgentStatus, rfc3339};
use crate::service;
use crate::state::AppState;

/// What the run's agent is doing, from its CLI's hooks and Codex's rollout
/// (or, for what they do not report, lab's screen check).
#[derive(Serialize, Deserialize, ToSchema)]
pub struct AgentStateBody {
    pub state: AgentState,
    /// The question a waiting agent asks (at most 500 characters), the
    /// error a retrying one's CLI retries on (`retrying: 529 Overloaded`),
    /// or why an idle one's turn ended early (an error, an interruption);
    /// `null` otherwise.
    pub reason: Option<String>,
    /// When the agent entered this state.
    pub since: String,
}

impl From<AgentStatus> for AgentStateBody {
    fn from(a: AgentStatus) -> Self {
        AgentStateBody {
            state: a.state,
            reason: a.reason,
            since: rfc3339(a.since),
        }
    }
}

/// One hook event of the run's CLI, as `labctl hook` forwards it.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HookBody {
    /// The CLI's own event payload (Claude Code: the hook's stdin JSON;
    /// Codex: the `notify` argument). Events lab does not use are accepted
    /// and ignored.
    #[schema(value_type = Object)]
    pub payload: serde_json::Map<String, serde_json::Value>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct HookAnswer {
    /// Whether the event changed the run's agent state.
    pub applied: bool,
    pub agent_state: Option<AgentStateBody>,
}

/// A hook event of the run's CLI. Only that run's own token (or the admin
/// token) may post it; `labctl hook`, which the CLI runs, does.
#[utoipa::path(post, path = "/runs/{id}/hook", tag = "runs", params(("id" = i64, Path)),
    request_body = HookBody,
    responses((status = 200, description = "Recorded, or ignored (an event lab does not use)", body = HookAnswer),
              (status = 404, description = "No such run", body = ErrorBody),
              (status = 409, description = "The run is not live", body = ErrorBody)))]
async fn post_hook(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<HookBody>,
) -> ApiResult<Json<HookAnswer>> {
    let run = stored_run(&app, run_id(&id)?).await?;
    let payload = serde_json::Value::Object(body.payload);
    let applied = service::hooks::report(&app.store, &run, &payload).await?;
    if applied {
        app.runner.look_again(run.id);
    }
    let agent = if applied {
        stored_run(&app, run.id).await?.agent
    } else {
        run.agent
    };
    Ok(Json(HookAnswer {
        applied,
        agent_state: agent.map(Into::into),
    }))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(post_hook))
}
