//! The application: the one router that merges the API (`http`), the pages
//! (`web`) and the health check, with the answers for unknown routes and
//! oversized bodies. What the handlers reach is [`AppState`].

use axum::extract::{Request, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Router, middleware};

mod forward;

use crate::http::{self, error::ApiError};
use crate::state::AppState;
use crate::validate::MAX_PROMPT;
use crate::web::Page;

/// The whole application: API, pages, health check, and the answers for
/// unknown routes and methods (JSON under `/api/`, a page elsewhere).
pub fn router(state: AppState) -> Router {
    let api = http::routes(&state);
    let pages = crate::web::router(&state).layer(tower_http::compression::CompressionLayer::new());
    Router::new()
        .route("/healthz", get(healthz))
        .merge(api)
        .merge(pages)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            forward::to_owner,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            forward::node_calls,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn(refuse_large_bodies))
        .with_state(state)
}

/// The largest request body: a prompt is at most 120 KiB.
pub const MAX_BODY: usize = 1024 * 1024;

/// Refuses a body whose declared length is over [`MAX_BODY`] before reading
/// it (a body without a length is cut off at the limit as it is read).
async fn refuse_large_bodies(req: Request, next: middleware::Next) -> Response {
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_none_or(|n| n <= MAX_BODY as u64) {
        return next.run(req).await;
    }
    if is_api(req.uri()) {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the request body is over {MAX_BODY} bytes"),
        )
        .into_response();
    }
    Page::error(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!(
            "What this form sent is over {MAX_BODY} bytes, more than lab takes \
             (a run's prompt may be at most {MAX_PROMPT} bytes)."
        ),
    )
}

async fn healthz(State(_): State<AppState>) -> &'static str {
    "ok"
}

/// The API answers JSON, the pages HTML, even for a route neither has.
fn is_api(uri: &Uri) -> bool {
    let p = uri.path();
    p == "/api" || p.starts_with("/api/")
}

async fn not_found(uri: Uri) -> Response {
    if is_api(&uri) {
        ApiError::not_found("no such API route; GET /api/v1/openapi.json lists them")
            .into_response()
    } else {
        Page::error(StatusCode::NOT_FOUND, "There is no such page.")
    }
}

async fn method_not_allowed(uri: Uri) -> Response {
    if is_api(&uri) {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this route does not take that method; GET /api/v1/openapi.json lists the routes",
        )
        .into_response()
    } else {
        Page::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "This page does not take that kind of request.",
        )
    }
}
