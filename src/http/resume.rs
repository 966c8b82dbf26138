//! `POST /api/v1/runs/{id}/resume`: a lost run comes back (ADR 18).

use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, ErrorBody};
use super::extract::ApiPath;
use super::runs::{RunBody, run_id};
use crate::service;
use crate::state::AppState;

/// Resumes a lost run: the same run, in a new tmux session of the same name
/// and the same workspace, with its agent CLI resuming the same session.
/// Answers the run (`running`, or `failed` with the reason when the resumed
/// agent could not be started).
#[utoipa::path(post, path = "/runs/{id}/resume", tag = "runs", params(("id" = i64, Path)),
    responses((status = 200, description = "The run, resumed", body = RunBody),
              (status = 409, description = "The run cannot be resumed (it is not lost, its \
                workspace, session id or repo is gone, or another resume came first); \
                the message says why", body = ErrorBody)))]
async fn resume_run(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<RunBody>> {
    let id = run_id(&id)?;
    let run = service::runs::resume(&app.runner, id).await?;
    Ok(Json(RunBody::new(run, &app.runner)))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(resume_run))
}
