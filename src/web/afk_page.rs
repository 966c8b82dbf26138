//! The AFK page: the scheduler (pause, resume), recent AFK runs, and the
//! ledger of outcomes.

use askama::Template;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use super::forms::Form;
use super::{Chrome, Page};
use crate::auth::browser::BrowserSession;
use crate::domain::Outcome;
use crate::service::afk::{LedgerRow, ledger};
use crate::state::AppState;
use crate::store::Claim;

#[derive(Template)]
#[template(path = "afk.html")]
struct AfkPage {
    chrome: Chrome,
    paused: bool,
    live: usize,
    max_concurrent: i64,
    /// Why launches wait for memory, if they do.
    admission: Option<String>,
    /// Providers held back: by a usage limit, or a CLI that cannot work.
    limited: Vec<LimitedRow>,
    recent: Vec<Claim>,
    by_repo: Vec<LedgerRow>,
    by_model: Vec<LedgerRow>,
    by_outcome: Vec<LedgerRow>,
}

/// A provider held back, as the page shows it.
struct LimitedRow {
    /// Its CLI cannot work (else: a usage limit).
    cli: bool,
    provider: String,
    until: String,
    reason: String,
    fix: String,
}

/// A ledger row's tokens, compact.
pub fn tokens(r: &LedgerRow) -> String {
    crate::domain::compact_tokens(r.tokens)
}

/// A cost in dollars, or `?` when unknown.
pub fn cost(usd: &Option<f64>) -> String {
    crate::domain::compact_cost(*usd)
}

/// "42 s", "3.5 min", or "-".
pub fn duration(secs: &Option<f64>) -> String {
    match secs {
        None => "-".into(),
        Some(s) if *s < 120.0 => format!("{s:.0} s"),
        Some(s) => format!("{:.1} min", s / 60.0),
    }
}

/// An ended claim's outcome as it is stored, or "".
pub fn outcome(o: &Option<Outcome>) -> &'static str {
    o.map_or("", Outcome::as_str)
}

async fn show(State(app): State<AppState>, session: BrowserSession) -> Response {
    let (s, l) = match tokio::join!(
        crate::service::afk::status(&app.store, &app.scheduler),
        ledger(&app.store),
    ) {
        (Ok(s), Ok(l)) => (s, l),
        (Err(e), _) | (_, Err(e)) => return super::internal(e),
    };
    Page::ok(&AfkPage {
        chrome: Chrome::new(&session, "afk", "AFK"),
        paused: s.paused,
        live: s.live,
        max_concurrent: s.afk.max_concurrent,
        admission: s.admission,
        limited: s
            .limited
            .into_iter()
            .map(|l| LimitedRow {
                cli: l.kind == crate::afk::limits::HoldKind::Cli,
                provider: l.provider,
                until: crate::domain::rfc3339(l.until_ms),
                reason: l.reason,
                fix: l.fix.unwrap_or_default(),
            })
            .collect(),
        recent: s.recent,
        by_repo: l.by_repo,
        by_model: l.by_model,
        by_outcome: l.by_outcome,
    })
}

async fn toggle(app: &AppState, session: &BrowserSession, form: &Form, paused: bool) -> Response {
    if let Some(r) = session.refuse_forged(form) {
        return r;
    }
    match crate::service::afk::set_paused(&app.store, paused).await {
        Ok(()) => Redirect::to("/afk").into_response(),
        Err(e) => super::internal(e),
    }
}

async fn pause(State(app): State<AppState>, session: BrowserSession, form: Form) -> Response {
    toggle(&app, &session, &form, true).await
}

async fn resume(State(app): State<AppState>, session: BrowserSession, form: Form) -> Response {
    toggle(&app, &session, &form, false).await
}

/// "Check again": lab checks a held provider's CLI now.
async fn check(
    State(app): State<AppState>,
    session: BrowserSession,
    axum::extract::Path(provider): axum::extract::Path<String>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    let Ok(id) = provider.parse::<crate::provider::ProviderId>() else {
        return Page::error(
            axum::http::StatusCode::NOT_FOUND,
            &format!("There is no provider '{provider}'."),
        );
    };
    app.scheduler.check_cli(id, true).await;
    Redirect::to("/afk").into_response()
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/afk", get(show))
        .route("/afk/providers/{provider}/check", post(check))
        .route("/afk/pause", post(pause))
        .route("/afk/resume", post(resume))
}
