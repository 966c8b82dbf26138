//! The application: the one router that merges the API (`http`), the pages
//! (`web`) and the health check, with the answers for unknown routes and
//! oversized bodies. What the handlers reach is [`AppState`].

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Router, middleware};

use crate::http::{self, error::ApiError};
use crate::state::AppState;

/// The whole application: API, health check, and JSON errors for unknown
/// routes and methods.
pub fn router(state: AppState) -> Router {
    let api = http::routes(&state);
    let pages = crate::web::router().layer(tower_http::compression::CompressionLayer::new());
    Router::new()
        .route("/healthz", get(healthz))
        .merge(api)
        .merge(pages)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn(refuse_large_bodies))
        .with_state(state)
}

/// The largest request body: a prompt is at most 120 KiB.
pub const MAX_BODY: usize = 1024 * 1024;

/// Refuses a body whose declared length is over [`MAX_BODY`] before reading
/// it (a body without a length is cut off at the limit as it is read).
async fn refuse_large_bodies(
    req: axum::extract::Request,
    next: middleware::Next,
) -> axum::response::Response {
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        use axum::response::IntoResponse;
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the request body is over {MAX_BODY} bytes"),
        )
        .into_response();
    }
    next.run(req).await
}

async fn healthz(State(_): State<AppState>) -> &'static str {
    "ok"
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    if uri.path().starts_with("/api/") {
        ApiError::not_found("no such API route; GET /api/v1/openapi.json lists them")
    } else {
        ApiError::not_found("no such page")
    }
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method; GET /api/v1/openapi.json lists the routes",
    )
}
