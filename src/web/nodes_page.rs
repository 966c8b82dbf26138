//! The nodes page (issue 29): the lab nodes sharing this database, each
//! with its state, live runs, capacity and a drain switch.

use askama::Template;
use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use super::forms::Form;
use super::{Chrome, Page};
use crate::auth::browser::BrowserSession;
use crate::state::AppState;

#[derive(Template)]
#[template(path = "nodes.html")]
struct NodesPage {
    chrome: Chrome,
    nodes: Vec<NodeRow>,
}

/// One node as the page shows it.
struct NodeRow {
    id: String,
    url: String,
    version: String,
    state: &'static str,
    last_seen: String,
    runs: i64,
    cores: u32,
    memory: String,
    clis: String,
    /// This node (the one answering).
    here: bool,
}

async fn show(State(app): State<AppState>, session: BrowserSession) -> Response {
    let all = match crate::service::nodes::list(&app.store).await {
        Ok(n) => n,
        Err(e) => return super::service_error(e),
    };
    let now = crate::store::now_ms();
    let here = app.runner.node().to_owned();
    Page::ok(&NodesPage {
        chrome: Chrome::new(&session, "nodes", "Nodes"),
        nodes: all
            .into_iter()
            .map(|(n, runs)| NodeRow {
                state: n.state(now, app.runner.cfg().node_down_after_ms).as_str(),
                last_seen: crate::domain::rfc3339(n.last_seen),
                runs,
                cores: n.capacity.cores,
                memory: format!("{} MiB", n.capacity.memory_available_mb),
                clis: n.capacity.clis.join(", "),
                here: n.id == here,
                id: n.id,
                url: n.url,
                version: n.version,
            })
            .collect(),
    })
}

async fn drain(
    State(app): State<AppState>,
    session: BrowserSession,
    Path((id, action)): Path<(String, String)>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    let draining = match action.as_str() {
        "drain" => true,
        "undrain" => false,
        _ => {
            return Page::error(
                axum::http::StatusCode::NOT_FOUND,
                "A node is drained or undrained.",
            );
        }
    };
    match crate::service::nodes::set_draining(&app.store, &id, draining).await {
        Ok(_) => Redirect::to("/nodes").into_response(),
        Err(e) => super::service_error(e),
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/nodes", get(show))
        .route("/nodes/{id}/{action}", post(drain))
}
