//! The review phase's routes (issue 28 §3): a review run submits its
//! verdict with its own token (`POST /runs/{id}/review`); with the admin
//! token, anyone lists an issue's verdicts.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, ErrorBody};
use super::extract::{ApiJson, ApiPath};
use crate::domain::{Finding, Review, Submission, Verdict, rfc3339};
use crate::service::reviews;
use crate::state::AppState;

/// A review run's verdict on a pull request's head. `summary` and the
/// findings are the reviewing agent's own words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReviewBody {
    /// The review run that submitted it.
    pub run_id: i64,
    /// The claim's round it judged (1: the pull request as first opened).
    pub round: i64,
    /// The commit reviewed.
    pub head: String,
    pub verdict: Verdict,
    pub summary: String,
    pub findings: Vec<Finding>,
    /// When it was submitted (RFC 3339).
    pub at: String,
}

impl From<Review> for ReviewBody {
    fn from(r: Review) -> ReviewBody {
        ReviewBody {
            run_id: r.run_id,
            round: r.round,
            head: r.head,
            verdict: r.verdict,
            summary: r.summary,
            findings: r.findings,
            at: rfc3339(r.created_at),
        }
    }
}

/// Submits the verdict of a live review run (its own token may), once. A
/// verdict lab refuses names every field at fault; the second refusal
/// stops the review and the issue needs a person.
#[utoipa::path(post, path = "/runs/{id}/review", tag = "reviews", request_body = Submission,
    params(("id" = i64, Path)),
    responses((status = 201, body = ReviewBody),
              (status = 400, body = ErrorBody),
              (status = 409, description = "Not a live review run, its pull request is not in review, or it already submitted", body = ErrorBody)))]
async fn submit_review(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<serde_json::Value>,
) -> ApiResult<(StatusCode, Json<ReviewBody>)> {
    let run = super::runs::stored_run(&app, super::runs::run_id(&id)?).await?;
    let review = reviews::submit(&app.scheduler, &run, &Submission::from_value(&b)).await?;
    Ok((StatusCode::CREATED, Json(review.into())))
}

/// Every verdict on an issue's pull requests, oldest first.
#[utoipa::path(get, path = "/repos/{id}/issues/{number}/reviews", tag = "reviews",
    params(("id" = String, Path, description = "repo id or name"), ("number" = i64, Path)),
    responses((status = 200, body = Vec<ReviewBody>), (status = 404, body = ErrorBody)))]
async fn list_reviews(
    State(app): State<AppState>,
    ApiPath((id, number)): ApiPath<(String, i64)>,
) -> ApiResult<Json<Vec<ReviewBody>>> {
    let all = reviews::list(&app.store, &id, number).await?;
    Ok(Json(all.into_iter().map(ReviewBody::from).collect()))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(submit_review))
        .routes(routes!(list_reviews))
}
