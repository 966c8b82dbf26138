//! The nodes page (issue 29): the lab nodes sharing this database, each
//! with its state, live runs, capacity, a drain switch, and a forget
//! button for one that is down.

use askama::Template;
use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use super::afk_page::duration;
use super::forms::Form;
use super::{Chrome, Page};
use crate::auth::browser::BrowserSession;
use crate::service::nodes;
use crate::state::AppState;

#[derive(Template)]
#[template(path = "nodes.html")]
struct NodesPage {
    chrome: Chrome,
    nodes: Vec<NodeRow>,
    /// How often a node beats, and how long one may be silent before it is
    /// down (`lab serve --node-down-after`), in seconds.
    beat_every: String,
    down_after: String,
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
    let all = match nodes::list(&app.store).await {
        Ok(n) => n,
        Err(e) => return super::service_error(e),
    };
    let now = crate::store::now_ms();
    let here = app.runner.node().to_owned();
    let down_after = app.runner.cfg().node_down_after_ms;
    Page::ok(&NodesPage {
        chrome: Chrome::new(&session, "nodes", "Nodes"),
        beat_every: duration(&Some(crate::fleet::beat_every(down_after).as_secs_f64())),
        down_after: duration(&Some(down_after as f64 / 1000.0)),
        nodes: all
            .into_iter()
            .map(|(n, runs)| NodeRow {
                state: n.state(now, down_after).as_str(),
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

async fn act(
    State(app): State<AppState>,
    session: BrowserSession,
    Path((id, action)): Path<(String, String)>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    let done = match action.as_str() {
        "drain" => nodes::set_draining(&app.store, &id, true).await.map(drop),
        "undrain" => nodes::set_draining(&app.store, &id, false).await.map(drop),
        "forget" => {
            nodes::forget(
                &app.store,
                app.runner.node(),
                &id,
                app.runner.cfg().node_down_after_ms,
            )
            .await
        }
        _ => {
            return Page::error(
                axum::http::StatusCode::NOT_FOUND,
                "A node is drained, undrained or forgotten.",
            );
        }
    };
    match done {
        Ok(()) => Redirect::to("/nodes").into_response(),
        Err(e) => super::service_error(e),
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/nodes", get(show))
        .route("/nodes/{id}/{action}", post(act))
}
