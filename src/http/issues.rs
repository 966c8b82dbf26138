//! Issues and pull requests of a repo, from its issue source; and a run's
//! pull request.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::schema;
use crate::afk::pull::{self, PullError};
use crate::domain::IssueState;
use crate::issues::{Issue, IssueSource, PullRequest, SourceError};
use crate::repo::Repo;
use crate::service::issues::{self, IssueError};
use crate::service::pulls::PullView;
use crate::state::AppState;
use crate::store::RepoKey;
use crate::validate;

/// An issue operation's failure: a value, the repo, or the source.
pub fn issue_error(e: IssueError) -> ApiError {
    match e {
        IssueError::Service(s) => s.into(),
        IssueError::Source(s) => source_error(s),
    }
}

pub fn source_error(e: SourceError) -> ApiError {
    match e {
        SourceError::NotFound(m) => ApiError::not_found(m),
        SourceError::Invalid(m) => ApiError::bad_request(m),
        e @ SourceError::RateLimited { .. } => {
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", e.to_string())
        }
        SourceError::Forge(m) | SourceError::Denied(m) => {
            ApiError::new(StatusCode::BAD_GATEWAY, "forge", m)
        }
        SourceError::Store(s) => ApiError::from_store(s, || "the issue".to_owned()),
    }
}

/// What a forge issue source may answer besides the operation's own
/// statuses (never the built-in tracker).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // only describes responses in the document
pub enum ForgeErrors {
    /// The forge's rate limit: lab leaves the repo alone until its reset.
    #[response(status = 429)]
    RateLimited(ErrorBody),
    /// The forge failed or could not be reached.
    #[response(status = 502)]
    Forge(ErrorBody),
}

async fn repo_source(app: &AppState, id: &str) -> ApiResult<(Repo, Box<dyn IssueSource>)> {
    let key = RepoKey::parse(id);
    let repo = app
        .store
        .repo(&key)
        .await
        .map_err(|e| ApiError::from_store(e, || format!("repo '{key}'")))?;
    let source = app.scheduler.sources().of(&repo);
    Ok((repo, source))
}

#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewIssueBody {
    #[schema(schema_with = schema::title)]
    pub title: String,
    #[serde(default)]
    #[schema(schema_with = schema::text)]
    pub body: String,
    /// Labels: each 1-100 printable characters without commas.
    #[serde(default)]
    #[schema(schema_with = schema::labels)]
    pub labels: Vec<String>,
    /// The issue's directives (built-in tracker only; on a forge they are a
    /// ```` ```lab ```` block in the body).
    #[serde(default)]
    #[schema(schema_with = schema::new_issue_knobs)]
    pub knobs: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A change to a built-in issue.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IssuePatchBody {
    /// The issue's directives, replacing the ones set (`{}` clears them);
    /// refused (409) once an AFK run has claimed the issue.
    #[schema(schema_with = schema::issue_knobs)]
    pub knobs: serde_json::Map<String, serde_json::Value>,
}

/// Opens an issue.
#[utoipa::path(post, path = "/repos/{id}/issues", tag = "issues", request_body = NewIssueBody,
    params(("id" = String, Path, description = "repo id or name")),
    responses((status = 201, body = Issue), ForgeErrors))]
async fn create_issue(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<NewIssueBody>,
) -> ApiResult<(StatusCode, Json<Issue>)> {
    // The values are checked before the repo is looked up: a bad request is
    // a 400 whatever it names.
    validate::new_issue(&b.title, &b.body, &b.labels)?;
    let (repo, source) = repo_source(&app, &id).await?;
    let issue = issues::create(
        &app.store,
        &repo,
        source.as_ref(),
        &issues::NewIssue {
            title: &b.title,
            body: &b.body,
            labels: &b.labels,
            knobs: b.knobs.as_ref(),
        },
    )
    .await
    .map_err(issue_error)?;
    Ok((StatusCode::CREATED, Json(issue)))
}

/// Changes a built-in issue: its knobs (issue 27), checked against the
/// repo (a value that widens what the repo allows is a 400). Refused with
/// 409 once an AFK run has claimed the issue.
#[utoipa::path(patch, path = "/repos/{id}/issues/{number}", tag = "issues", request_body = IssuePatchBody,
    params(("id" = String, Path, description = "repo id or name"), ("number" = i64, Path)),
    responses((status = 200, body = Issue), (status = 409, description = "the issue is claimed by an AFK run", body = ErrorBody), ForgeErrors))]
async fn patch_issue(
    State(app): State<AppState>,
    ApiPath((id, number)): ApiPath<(String, i64)>,
    ApiJson(b): ApiJson<IssuePatchBody>,
) -> ApiResult<Json<Issue>> {
    let (repo, source) = repo_source(&app, &id).await?;
    let issue = issues::set_knobs(
        &app.store,
        &repo,
        source.as_ref(),
        number,
        &crate::knob::Input::Json(b.knobs),
    )
    .await
    .map_err(issue_error)?;
    Ok(Json(issue))
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct IssueQuery {
    /// Only issues with this label.
    #[param(value_type = String, required = false)]
    pub label: Option<String>,
    /// `open` (the default), `closed` or `all`.
    #[param(required = false, schema_with = schema::issue_state)]
    pub state: Option<String>,
}

/// A repo's issues (a run's token may read its own repo's).
#[utoipa::path(get, path = "/repos/{id}/issues", tag = "issues",
    params(("id" = String, Path, description = "repo id or name"), IssueQuery),
    responses((status = 200, body = Vec<Issue>), ForgeErrors))]
async fn list_issues(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<IssueQuery>,
) -> ApiResult<Json<Vec<Issue>>> {
    let state = match q.state.as_deref() {
        None => Some(IssueState::Open),
        Some("all") => None,
        Some(s) => Some(validate::choice::<IssueState>("state", s).map_err(|_| {
            validate::FieldError::new("state", "must be open, closed or all")
                .with_value(validate::shown(s))
        })?),
    };
    let (_, source) = repo_source(&app, &id).await?;
    let issues = source
        .list(q.label.as_deref(), state)
        .await
        .map_err(source_error)?;
    Ok(Json(issues))
}

/// One issue, with its comments.
#[utoipa::path(get, path = "/repos/{id}/issues/{number}", tag = "issues",
    params(("id" = String, Path, description = "repo id or name"), ("number" = i64, Path)),
    responses((status = 200, body = Issue), ForgeErrors))]
async fn get_issue(
    State(app): State<AppState>,
    ApiPath((id, number)): ApiPath<(String, i64)>,
) -> ApiResult<Json<Issue>> {
    let (_, source) = repo_source(&app, &id).await?;
    Ok(Json(source.issue(number).await.map_err(source_error)?))
}

/// Closes an issue.
#[utoipa::path(post, path = "/repos/{id}/issues/{number}/close", tag = "issues",
    params(("id" = String, Path, description = "repo id or name"), ("number" = i64, Path)),
    responses((status = 200, body = Issue), ForgeErrors))]
async fn close_issue(
    State(app): State<AppState>,
    ApiPath((id, number)): ApiPath<(String, i64)>,
) -> ApiResult<Json<Issue>> {
    let (_, source) = repo_source(&app, &id).await?;
    source.close_issue(number).await.map_err(source_error)?;
    Ok(Json(source.issue(number).await.map_err(source_error)?))
}

/// Opens a closed issue again.
#[utoipa::path(post, path = "/repos/{id}/issues/{number}/reopen", tag = "issues",
    params(("id" = String, Path, description = "repo id or name"), ("number" = i64, Path)),
    responses((status = 200, body = Issue), ForgeErrors))]
async fn reopen_issue(
    State(app): State<AppState>,
    ApiPath((id, number)): ApiPath<(String, i64)>,
) -> ApiResult<Json<Issue>> {
    let (_, source) = repo_source(&app, &id).await?;
    let issue = issues::set_open(source.as_ref(), number, true)
        .await
        .map_err(issue_error)?;
    Ok(Json(issue))
}

#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelsBody {
    /// Labels to put on (each 1-100 printable characters without commas).
    #[serde(default)]
    #[schema(schema_with = label_list)]
    pub add: Vec<String>,
    /// Labels to take off; one the issue does not have is no error.
    #[serde(default)]
    #[schema(schema_with = label_list)]
    pub remove: Vec<String>,
}

/// At most [`validate::MAX_LABEL_CHANGES`] labels.
fn label_list() -> utoipa::openapi::schema::ArrayBuilder {
    schema::labels().max_items(Some(validate::MAX_LABEL_CHANGES))
}

/// Puts labels on an issue and takes others off (at most 20 each); answers
/// the issue as it is after. The repo's ready label (`afk_label`) is how
/// an issue is given to the AFK scheduler.
#[utoipa::path(post, path = "/repos/{id}/issues/{number}/labels", tag = "issues", request_body = LabelsBody,
    params(("id" = String, Path, description = "repo id or name"), ("number" = i64, Path)),
    responses((status = 200, body = Issue), ForgeErrors))]
async fn edit_labels(
    State(app): State<AppState>,
    ApiPath((id, number)): ApiPath<(String, i64)>,
    ApiJson(b): ApiJson<LabelsBody>,
) -> ApiResult<Json<Issue>> {
    validate::label_change(&b.add, &b.remove)?;
    let (_, source) = repo_source(&app, &id).await?;
    let issue = issues::edit_labels(source.as_ref(), number, &b.add, &b.remove)
        .await
        .map_err(issue_error)?;
    Ok(Json(issue))
}

/// A repo's pull requests.
#[utoipa::path(get, path = "/repos/{id}/pulls", tag = "issues",
    params(("id" = String, Path, description = "repo id or name")),
    responses((status = 200, body = Vec<PullRequest>), ForgeErrors))]
async fn list_pulls(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Vec<PullRequest>>> {
    let (_, source) = repo_source(&app, &id).await?;
    Ok(Json(source.pulls().await.map_err(source_error)?))
}

/// One pull request (the `url` of one the built-in tracker opened), with
/// its diff for the built-in tracker (`diff=false` leaves it out). A run's
/// token does not reach it.
#[utoipa::path(get, path = "/repos/{id}/pulls/{number}", tag = "issues",
    params(("id" = String, Path, description = "repo id or name"), ("number" = i64, Path),
           super::diffs::PullQuery),
    responses((status = 200, body = PullView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
              ForgeErrors))]
async fn get_pull(
    State(app): State<AppState>,
    ApiPath((id, number)): ApiPath<(String, i64)>,
    ApiQuery(q): ApiQuery<super::diffs::PullQuery>,
) -> ApiResult<Json<PullView>> {
    let (repo, source) = repo_source(&app, &id).await?;
    let pull = source.pull(number).await.map_err(source_error)?;
    let with_diff = q.diff.unwrap_or(true);
    Ok(Json(
        crate::service::pulls::describe(&app.scheduler, &repo, pull, with_diff).await?,
    ))
}

#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PullBody {
    #[schema(schema_with = schema::title)]
    pub title: String,
    #[serde(default)]
    #[schema(schema_with = schema::text)]
    pub body: String,
}

/// Opens the pull request of a run's branch (lab pushes the branch to a
/// forge with its own credentials). A run's token may do this for its run.
#[utoipa::path(post, path = "/runs/{id}/pull", tag = "issues", request_body = PullBody,
    params(("id" = i64, Path)),
    responses((status = 201, body = PullRequest),
              (status = 409, description = "The run already opened one, is opening one, has no branch, or lost its repo", body = ErrorBody),
              ForgeErrors))]
async fn open_pull(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<PullBody>,
) -> ApiResult<(StatusCode, Json<PullRequest>)> {
    let id = super::runs::run_id(&id)?;
    let run = app
        .store
        .run(id)
        .await
        .map_err(|e| ApiError::from_store(e, || format!("run {id}")))?;
    let pr = pull::open(&app.scheduler, &run, &b.title, &b.body)
        .await
        .map_err(|e| match e {
            PullError::Invalid(i) => ApiError::invalid(i),
            PullError::Conflict(m) => ApiError::conflict(m),
            e @ PullError::Scope(_) => {
                ApiError::new(StatusCode::CONFLICT, "out_of_scope", e.to_string())
            }
            PullError::Push(m) => ApiError::new(StatusCode::BAD_GATEWAY, "push_failed", m),
            PullError::Source(s) => source_error(s),
            PullError::Store(s) => ApiError::from_store(s, || format!("run {id}'s repo")),
        })?;
    Ok((StatusCode::CREATED, Json(pr)))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_issue, list_issues))
        .routes(routes!(get_issue, patch_issue))
        .routes(routes!(close_issue))
        .routes(routes!(reopen_issue))
        .routes(routes!(edit_labels))
        .routes(routes!(list_pulls))
        .routes(routes!(get_pull))
        .routes(routes!(open_pull))
}
