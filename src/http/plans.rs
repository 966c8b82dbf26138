//! The plan phase's routes (issue 28 §2): a planning run submits its plan
//! with its own token (`POST /runs/{id}/plan`); with the admin token, a
//! person lists an issue's plans and approves or rejects the one waiting.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, ErrorBody};
use super::extract::{ApiJson, ApiPath};
use crate::domain::{Plan, PlanState, rfc3339};
use crate::service::plans;
use crate::state::AppState;

/// Who decides a plan through the API (the admin token's holder).
const OPERATOR: &str = "operator";

/// One version of an issue's plan. `text` is the planning run's own words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PlanBody {
    pub version: i64,
    pub text: String,
    pub state: PlanState,
    /// Who its state is down to: `run N` while proposed, else who decided.
    pub by: String,
    /// When it reached its state (RFC 3339).
    pub at: String,
    /// Why it was rejected.
    pub reason: Option<String>,
    /// The planning run that submitted it.
    pub run_id: i64,
}

impl From<Plan> for PlanBody {
    fn from(p: Plan) -> PlanBody {
        PlanBody {
            version: p.version,
            by: p.by(),
            at: rfc3339(p.at()),
            text: p.text,
            state: p.state,
            reason: p.reason,
            run_id: p.run_id,
        }
    }
}

/// A plan as submitted.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitPlanBody {
    /// The plan, at most 64 KiB.
    #[schema(schema_with = super::schema::plan_text)]
    pub text: String,
}

/// Why a plan is rejected.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RejectPlanBody {
    #[schema(schema_with = super::schema::plan_reason)]
    pub reason: String,
}

/// Submits the plan of a live planning run (its own token may); a newer
/// submission before a decision supersedes the last.
#[utoipa::path(post, path = "/runs/{id}/plan", tag = "plans", request_body = SubmitPlanBody,
    params(("id" = i64, Path)),
    responses((status = 201, body = PlanBody),
              (status = 400, body = ErrorBody),
              (status = 409, description = "Not a live planning run, or its issue is not being planned", body = ErrorBody)))]
async fn submit_plan(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<SubmitPlanBody>,
) -> ApiResult<(StatusCode, Json<PlanBody>)> {
    let run = super::runs::stored_run(&app, super::runs::run_id(&id)?).await?;
    let plan = plans::submit(&app.scheduler, &run, &b.text).await?;
    Ok((StatusCode::CREATED, Json(plan.into())))
}

/// Every plan of an issue, by version.
#[utoipa::path(get, path = "/repos/{id}/issues/{number}/plans", tag = "plans",
    params(("id" = String, Path, description = "repo id or name"), ("number" = i64, Path)),
    responses((status = 200, body = Vec<PlanBody>), (status = 404, body = ErrorBody)))]
async fn list_plans(
    State(app): State<AppState>,
    ApiPath((id, number)): ApiPath<(String, i64)>,
) -> ApiResult<Json<Vec<PlanBody>>> {
    let all = plans::list(&app.store, &id, number).await?;
    Ok(Json(all.into_iter().map(PlanBody::from).collect()))
}

/// Approves the plan waiting for a decision: the work run starts with it.
#[utoipa::path(post, path = "/repos/{id}/issues/{number}/plan/approve", tag = "plans",
    params(("id" = String, Path, description = "repo id or name"), ("number" = i64, Path)),
    responses((status = 200, body = PlanBody),
              (status = 404, body = ErrorBody),
              (status = 409, description = "No plan waits for a decision", body = ErrorBody)))]
async fn approve_plan(
    State(app): State<AppState>,
    ApiPath((id, number)): ApiPath<(String, i64)>,
) -> ApiResult<Json<PlanBody>> {
    let plan = plans::approve(&app.scheduler, &id, number, OPERATOR).await?;
    Ok(Json(plan.into()))
}

/// Rejects the plan waiting for a decision: the planning run is told why
/// and plans again, up to `afk.max_plan_rounds`; then the issue needs a
/// person.
#[utoipa::path(post, path = "/repos/{id}/issues/{number}/plan/reject", tag = "plans",
    request_body = RejectPlanBody,
    params(("id" = String, Path, description = "repo id or name"), ("number" = i64, Path)),
    responses((status = 200, body = PlanBody),
              (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody),
              (status = 409, description = "No plan waits for a decision", body = ErrorBody)))]
async fn reject_plan(
    State(app): State<AppState>,
    ApiPath((id, number)): ApiPath<(String, i64)>,
    ApiJson(b): ApiJson<RejectPlanBody>,
) -> ApiResult<Json<PlanBody>> {
    let plan = plans::reject(&app.scheduler, &id, number, OPERATOR, &b.reason).await?;
    Ok(Json(plan.into()))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(submit_plan))
        .routes(routes!(list_plans))
        .routes(routes!(approve_plan))
        .routes(routes!(reject_plan))
}
