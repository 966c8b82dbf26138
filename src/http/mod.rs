//! The JSON API under `/api/v1`, described by an OpenAPI document generated
//! from the handlers.
//!
//! Invariant: handlers reach the database only through [`crate::store::Store`]
//! methods, and every failure leaves as an [`error::ApiError`].

pub mod afk;
pub mod agent;
pub mod auth;
pub mod diffs;
mod dto;
pub mod error;
pub mod extract;
pub mod issues;
pub mod knobs;
pub mod nodes;
mod openapi;
pub mod plans;
pub mod providers;
pub mod receipt;
pub mod repos;
mod resume;
pub mod reviews;
pub mod runs;
mod schema;
pub mod screen;
pub mod settings;
pub mod status;

use std::sync::Arc;

use axum::routing::get;
use axum::{Json, Router, middleware};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

/// The API routes (each requiring a token) and their OpenAPI document.
pub(crate) fn api() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (router, mut doc) = OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .nest(
            "/api/v1",
            OpenApiRouter::new()
                .merge(providers::router())
                .merge(knobs::router())
                .merge(settings::router())
                .merge(repos::router())
                .merge(runs::router())
                .merge(resume::router())
                .merge(screen::router())
                .merge(agent::router())
                .merge(issues::router())
                .merge(diffs::router())
                .merge(receipt::router())
                .merge(plans::router())
                .merge(nodes::router())
                .merge(reviews::router())
                .merge(afk::router())
                .merge(status::router()),
        )
        .split_for_parts();
    openapi::add_shared_responses(&mut doc);
    (router, doc)
}

/// The API under `/api/v1` with its OpenAPI document, every route behind the
/// token check.
pub fn routes(state: &AppState) -> Router<AppState> {
    let (api, doc) = api();
    let doc = Arc::new(doc);
    api.route(
        "/api/v1/openapi.json",
        get(move || {
            let doc = doc.clone();
            async move { Json(doc.as_ref().clone()) }
        }),
    )
    .route_layer(middleware::from_fn_with_state(
        state.clone(),
        auth::require_token,
    ))
}

/// The OpenAPI document, for tools that want it without a server.
pub fn openapi() -> utoipa::openapi::OpenApi {
    api().1
}
