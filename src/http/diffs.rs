//! A run's changes as a diff; merging and closing the built-in tracker's
//! pull requests (reading one, with its diff, is in `issues.rs`).

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, ErrorBody};
use super::extract::ApiPath;
use crate::diff::{Diff, Limits};
use crate::service::pulls::{self, MergeDone, PullView};
use crate::state::AppState;

/// The diff of a run's branch against its merge base with the repo's
/// default branch. While the run's workspace exists, its uncommitted and
/// untracked files are included (`work_tree: true`); after, the branch as
/// fetched back into the repo. Each file's patch is cut at 512 KiB, all of
/// them at 8 MiB (`truncated`).
#[utoipa::path(get, path = "/runs/{id}/diff", tag = "runs", params(("id" = i64, Path)),
    responses((status = 200, body = Diff),
              (status = 404, body = ErrorBody),
              (status = 409, description = "The run has no branch, lost its repo, or its branch is gone", body = ErrorBody)))]
async fn run_diff(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Diff>> {
    let id = super::runs::run_id(&id)?;
    Ok(Json(
        pulls::run_diff(&app.scheduler, id, Limits::default()).await?,
    ))
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PullQuery {
    /// Whether to include the diff (default true).
    #[param(required = false)]
    pub diff: Option<bool>,
}

/// Merges a built-in pull request into the repo's default branch: a
/// fast-forward when possible, else a merge commit made without a working
/// tree; the branch is deleted after. Refused (409, nothing changed) when it
/// conflicts, when the default branch is checked out with local changes,
/// when it is not open, or for a forge's pull request.
#[utoipa::path(post, path = "/repos/{id}/pulls/{number}/merge", tag = "issues",
    params(("id" = String, Path, description = "repo id or name"), ("number" = i64, Path)),
    responses((status = 200, body = MergeDone),
              (status = 404, body = ErrorBody),
              (status = 409, description = "It cannot be merged safely; the message says why", body = ErrorBody)))]
async fn merge_pull(
    State(app): State<AppState>,
    ApiPath((id, number)): ApiPath<(String, i64)>,
) -> ApiResult<Json<MergeDone>> {
    Ok(Json(pulls::merge(&app.scheduler, &id, number).await?))
}

/// Closes a built-in pull request without merging it (its branch stays).
#[utoipa::path(post, path = "/repos/{id}/pulls/{number}/close", tag = "issues",
    params(("id" = String, Path, description = "repo id or name"), ("number" = i64, Path)),
    responses((status = 200, body = PullView),
              (status = 404, body = ErrorBody),
              (status = 409, description = "It is not open, or lives on a forge", body = ErrorBody)))]
async fn close_pull(
    State(app): State<AppState>,
    ApiPath((id, number)): ApiPath<(String, i64)>,
) -> ApiResult<Json<PullView>> {
    Ok(Json(pulls::close(&app.scheduler, &id, number).await?))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(run_diff))
        .routes(routes!(merge_pull))
        .routes(routes!(close_pull))
}
