//! The JSON API under `/api/v1`, described by an OpenAPI document generated
//! from the handlers.
//!
//! Invariant: handlers reach the database only through [`crate::store::Store`]
//! methods, and every failure leaves as an [`error::ApiError`].

pub mod afk;
pub mod auth;
pub mod dto;
pub mod error;
pub mod extract;
pub mod issues;
mod providers;
pub mod repos;
pub mod runs;
pub mod settings;
mod status;

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router, middleware};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use crate::run::Runner;
use crate::store::Store;
use auth::Auth;
use error::ApiError;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub auth: Arc<Auth>,
    pub runner: Arc<Runner>,
    pub sessions: Arc<crate::web::SessionCache>,
    pub scheduler: Arc<crate::afk::Scheduler>,
}

#[derive(OpenApi)]
#[openapi(
    info(title = "lab", description = "Runs coding-agent CLIs in tmux for the repositories it manages."),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The API routes and their OpenAPI document.
fn api() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .nest(
            "/api/v1",
            OpenApiRouter::new()
                .merge(providers::router())
                .merge(settings::router())
                .merge(repos::router())
                .merge(runs::router())
                .merge(issues::router())
                .merge(afk::router())
                .merge(status::router()),
        )
        .split_for_parts()
}

/// The whole application: API, health check, and JSON errors for unknown
/// routes and methods.
pub fn router(state: AppState) -> Router {
    let (api, doc) = api();
    let doc = Arc::new(doc);
    let api = api
        .route(
            "/api/v1/openapi.json",
            get(move || {
                let doc = doc.clone();
                async move { Json(doc.as_ref().clone()) }
            }),
        )
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
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

/// The OpenAPI document, for tools that want it without a server.
pub fn openapi() -> utoipa::openapi::OpenApi {
    api().1
}
