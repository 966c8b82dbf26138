//! Live pages: server-sent events with run states and run screens.
//!
//! Each viewer has its own small producer task and a bounded queue. A viewer
//! that does not take its events for [`STUCK`] is dropped; it never holds up
//! lab or another viewer, and its task reads nothing while it waits.

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::Page;
use super::runs_page::{agent_line, detail, row};
use crate::auth::browser::BrowserSession;
use crate::domain::ScreenFormat;
use crate::service;
use crate::state::AppState;
use crate::store::{RunFilter, StoreError};

/// How long a viewer may leave its queue full before it is dropped.
const STUCK: Duration = Duration::from_secs(10);
/// How often a run page's screen is looked at: at most ten redraws a second.
const OUTPUT_POLL: Duration = Duration::from_millis(100);
/// How often states are looked at.
const STATE_POLL: Duration = Duration::from_secs(1);

type Tx = mpsc::Sender<Result<Event, Infallible>>;

fn sse(rx: mpsc::Receiver<Result<Event, Infallible>>) -> Response {
    Sse::new(ReceiverStream::new(rx))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// Sends, or gives up on a viewer that is gone or stuck.
async fn send(tx: &Tx, e: Event) -> bool {
    tx.send_timeout(Ok(e), STUCK).await.is_ok()
}

/// The dashboard's rows, whenever they change.
async fn runs(State(app): State<AppState>, _s: BrowserSession) -> Response {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        let mut last = String::new();
        loop {
            if let Ok(runs) = app
                .store
                .runs(&RunFilter {
                    limit: Some(100),
                    ..RunFilter::default()
                })
                .await
            {
                let rows: Vec<_> = runs
                    .iter()
                    .map(row)
                    .map(|r| {
                        json!({"id": r.id, "repo": r.repo, "kind": r.kind, "state": r.state, "detail": r.detail,
                               "model": r.model, "effort": r.effort, "node": r.node, "created": r.created})
                    })
                    .collect();
                let data = serde_json::Value::Array(rows).to_string();
                if data != last {
                    if !send(&tx, Event::default().event("runs").data(&data)).await {
                        return;
                    }
                    last = data;
                }
            }
            tokio::time::sleep(STATE_POLL).await;
            if tx.is_closed() {
                return;
            }
        }
    });
    sse(rx)
}

/// A run's screen, redrawn as it changes (at most every [`OUTPUT_POLL`],
/// and only when its log grew), and its state, until it ends; a run that
/// does not exist is a 404, not an empty stream. The emulator is fed only
/// while someone watches.
async fn run(State(app): State<AppState>, _s: BrowserSession, Path(id): Path<i64>) -> Response {
    let mut r = match app.store.run(id).await {
        Ok(r) => r,
        Err(StoreError::NotFound) => {
            return Page::error(StatusCode::NOT_FOUND, &format!("There is no run {id}."));
        }
        Err(e) => return super::internal(e),
    };
    let (tx, rx) = mpsc::channel(8);
    tokio::spawn(async move {
        let mut shown: Option<u64> = None;
        let mut last_state = String::new();
        let mut looked = tokio::time::Instant::now() - STATE_POLL;
        loop {
            // The state first: a screen drawn after the run ended is still
            // sent, before `end`.
            let ended = !r.state.is_active();
            if let Some(path) = r.log_path.as_deref() {
                let size = crate::run::log::size(path);
                if shown != Some(size) {
                    shown = Some(size);
                    // Without a screen to draw (the run's node does not
                    // answer), its state and end still go.
                    if let Ok(shot) =
                        service::runs::screen(&app.runner, &r, ScreenFormat::Html, 0).await
                    {
                        // Blank rows at the bottom are left out: the page's
                        // box ends where the drawing does.
                        let html = shot.body.trim_end_matches('\n');
                        let data = json!({"html": html, "offset": shot.offset}).to_string();
                        if !send(&tx, Event::default().event("screen").data(data)).await {
                            return;
                        }
                    }
                }
            }
            // Sent whenever the run read last differs from what was sent
            // (the run is read again every STATE_POLL, below).
            {
                let state = json!({"state": r.state.as_str(), "detail": detail(&r),
                                   "agent": agent_line(&r)})
                .to_string();
                if state != last_state {
                    if !send(&tx, Event::default().event("state").data(&state)).await {
                        return;
                    }
                    last_state = state;
                }
            }
            if ended {
                let _ = send(&tx, Event::default().event("end").data("")).await;
                return;
            }
            tokio::time::sleep(OUTPUT_POLL).await;
            if tx.is_closed() {
                return;
            }
            if looked.elapsed() >= STATE_POLL {
                looked = tokio::time::Instant::now();
                match app.store.run(id).await {
                    Ok(now) => r = now,
                    Err(_) => return,
                }
            }
        }
    });
    sse(rx)
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/live/runs", get(runs))
        .route("/live/runs/{id}", get(run))
}
