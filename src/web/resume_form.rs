//! The run page's Resume button (shown for lost runs, ADR 18).

use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;

use super::forms::Form;
use crate::auth::browser::BrowserSession;
use crate::service;
use crate::state::AppState;

async fn resume(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(id): Path<i64>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    match service::runs::resume(&app.runner, id).await {
        Ok(_) => Redirect::to(&format!("/runs/{id}")).into_response(),
        Err(e) => super::service_error(e),
    }
}

pub fn router() -> Router<AppState> {
    Router::new().route("/runs/{id}/resume", post(resume))
}
