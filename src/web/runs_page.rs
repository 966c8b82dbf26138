//! Runs: the dashboard, the start form, and each run's page.

use askama::Template;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use super::forms::Form;
use super::repos_page::{Shown, sourced_rows};
use super::{Chrome, Page};
use crate::auth::browser::BrowserSession;
use crate::domain::{Run, RunState, ScreenFormat};
use crate::service;
use crate::state::AppState;

use crate::store::RunFilter;

/// A run as the dashboard lists it.
pub struct Row {
    pub id: i64,
    pub repo: String,
    pub kind: &'static str,
    pub state: &'static str,
    pub detail: String,
    pub model: String,
    pub effort: String,
    /// The lab node it lives on.
    pub node: String,
    pub created: String,
}

pub fn row(r: &Run) -> Row {
    Row {
        id: r.id,
        repo: r.repo_name.clone(),
        kind: r.kind.as_str(),
        state: r.state.as_str(),
        detail: detail(r),
        model: r.model.value.clone(),
        effort: r.effort.value.clone(),
        node: r.node.clone(),
        created: short_time(r.created_at),
    }
}

/// A time as pages show it: `2026-12-01 12:00:01` (UTC).
fn short_time(ms: i64) -> String {
    crate::domain::rfc3339(ms)
        .replace('T', " ")
        .chars()
        .take(19)
        .collect()
}

/// A state's explanation: the reason, or the exit status.
pub fn detail(r: &Run) -> String {
    match (r.state, r.exit_status, r.exit_signal) {
        (RunState::Exited, Some(c), _) => format!("exit status {c}"),
        (RunState::Exited, None, Some(s)) => format!("killed by signal {s}"),
        _ => r.state_reason.clone().unwrap_or_default(),
    }
}

#[derive(Template)]
#[template(path = "runs.html")]
struct RunsPage {
    chrome: Chrome,
    rows: Vec<Row>,
}

#[derive(Template)]
#[template(path = "run.html")]
struct RunPage {
    chrome: Chrome,
    run: Run,
    state: &'static str,
    detail: String,
    config: Vec<Shown>,
    attach: String,
    /// Lines that scrolled off above the screen, as HTML.
    history: String,
    /// The screen as the CLI drew it, as HTML.
    screen: String,
    live: bool,
    /// What a live run's agent is doing, from its CLI's hooks (ADR 13).
    agent: Option<AgentLine>,
    /// The run's usage, row by row; empty until known.
    usage: Vec<(&'static str, String)>,
    /// Its caps, what its workspace takes, what of its log was dropped.
    limits: Vec<(&'static str, String)>,
    /// A manual run's pull request: the one it opened, or the form to open
    /// one when its branch has commits (issue 40 §9).
    pull_url: Option<String>,
    pull_open: bool,
    /// The form's title as offered: the prompt's first line.
    pull_title: String,
}

/// A run's agent state as its page shows it (and its live events send).
#[derive(serde::Serialize)]
pub(super) struct AgentLine {
    state: &'static str,
    reason: String,
    since: String,
}

pub(super) fn agent_line(r: &Run) -> Option<AgentLine> {
    let a = r.agent.as_ref().filter(|_| r.state.is_active())?;
    Some(AgentLine {
        state: a.state.as_str(),
        reason: a.reason.clone().unwrap_or_default(),
        since: short_time(a.since),
    })
}

/// A run's caps and what it takes, as its page lists them.
fn limit_rows(r: &Run, disk: Option<u64>) -> Vec<(&'static str, String)> {
    let mib = |b: u64| format!("{:.1} MiB", b as f64 / 1048576.0);
    let mut rows = vec![
        (
            "memory",
            r.limits
                .memory_max_mb
                .map_or("no cap".to_owned(), |m| format!("at most {m} MiB")),
        ),
        (
            "processes",
            r.limits
                .pids_max
                .map_or("no cap".to_owned(), |p| format!("at most {p}")),
        ),
    ];
    if let Some(b) = disk {
        rows.push(("workspace", mib(b)));
    }
    let dropped = r.log_path.as_deref().map_or(0, crate::run::log::dropped);
    if dropped > 0 {
        rows.push((
            "log",
            format!(
                "the oldest {} of output were dropped (runs.log_max_mb)",
                mib(dropped)
            ),
        ));
    }
    rows
}

/// A run's usage as the run page lists it.
fn usage_rows(r: &Run) -> Vec<(&'static str, String)> {
    let Some(u) = &r.usage else {
        return Vec::new();
    };
    let mut rows = vec![
        ("input tokens", u.input_tokens.to_string()),
        ("output tokens", u.output_tokens.to_string()),
        ("cache read", u.cache_read_tokens.to_string()),
        ("cache written", u.cache_creation_tokens.to_string()),
        ("turns", u.turns.to_string()),
        (
            "cost",
            match u.cost_usd() {
                Some(c) => format!("${c:.4}"),
                None => "unknown: a model without a price".to_owned(),
            },
        ),
    ];
    if u.unpriced_tokens > 0 {
        rows.push((
            "unpriced",
            format!(
                "{} tokens of models lab has no price for (not in the cost)",
                u.unpriced_tokens
            ),
        ));
    }
    rows
}

async fn dashboard(State(app): State<AppState>, session: BrowserSession) -> Response {
    match app
        .store
        .runs(&RunFilter {
            limit: Some(100),
            ..RunFilter::default()
        })
        .await
    {
        Ok(runs) => Page::ok(&RunsPage {
            chrome: Chrome::new(&session, "runs", "Runs"),
            rows: runs.iter().map(row).collect(),
        }),
        Err(e) => super::internal(e),
    }
}

/// Lines from above the screen a run page starts with.
const PAGE_HISTORY: usize = 500;

/// The first `history` lines, and the rest.
fn split_history(html: &str, history: usize) -> (String, String) {
    if history == 0 {
        return (String::new(), html.to_owned());
    }
    let mut at = 0;
    for _ in 0..history {
        match html[at..].find('\n') {
            Some(i) => at += i + 1,
            None => return (html.to_owned(), String::new()),
        }
    }
    (html[..at].to_owned(), html[at..].to_owned())
}

/// Opens a manual run's pull request from its page's form.
async fn open_pull(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(id): Path<i64>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    let title = form.get("title").unwrap_or("");
    let body = form.get("body").unwrap_or("").replace("\r\n", "\n");
    match service::pulls::open(&app.scheduler, id, title, &body).await {
        Ok(_) => Redirect::to(&format!("/runs/{id}")).into_response(),
        Err(e) => super::service_error(e),
    }
}

/// Types into a live run from its page: the reply box's text, then the key
/// of the button pressed.
async fn input(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(id): Path<i64>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    // Browsers send a text area's line breaks as CRLF.
    let text = form.get("text").map(|t| t.replace("\r\n", "\n"));
    let keys: Vec<String> = form.get("key").map(str::to_owned).into_iter().collect();
    match service::runs::input(&app.runner, id, text.as_deref(), &keys).await {
        Ok(_) => Redirect::to(&format!("/runs/{id}#screen")).into_response(),
        Err(e) => super::service_error(e),
    }
}

async fn show(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(id): Path<String>,
) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return Page::error(StatusCode::NOT_FOUND, "Run ids are numbers.");
    };
    let run = match app.store.run(id).await {
        Ok(r) => r,
        Err(crate::store::StoreError::NotFound) => {
            return Page::error(StatusCode::NOT_FOUND, &format!("There is no run {id}."));
        }
        Err(e) => return super::internal(e),
    };
    let (history, screen) =
        match service::runs::screen(&app.runner, &run, ScreenFormat::Html, PAGE_HISTORY).await {
            Ok(shot) => {
                let (history, screen) = split_history(&shot.body, shot.history);
                (history, screen.trim_end_matches('\n').to_owned())
            }
            Err(e) => return super::service_error(e),
        };
    let mut config = vec![Shown {
        what: "provider".into(),
        value: run.provider.clone(),
        from: String::new(),
    }];
    // As the run was started: its provider may have left the catalog since.
    config.extend(sourced_rows(&run.model, &run.effort, &run.options));
    // An AFK run's knobs, each with where it came from (issue 27).
    config.extend(super::repos_page::knob_rows(&run.knobs));
    // What lab approved in the run's own CLI config from its environment
    // (Claude Code's API-key dialog): as this node starts its runs.
    if let Ok(p) = run.provider_id()
        && let Some(what) = app.runner.approved_for(p.provider())
    {
        config.push(Shown {
            what: "sign-in".into(),
            value: what.into(),
            from: String::new(),
        });
    }
    let disk = match run.workspace.as_deref() {
        Some(ws) if run.workspace_removed_at.is_none() => {
            app.runner.disk().of(run.id, std::path::Path::new(ws)).await
        }
        _ => None,
    };
    let limits = limit_rows(&run, disk);
    let pull = match service::pulls::offer(&app.scheduler, &run).await {
        Ok(p) => p,
        Err(e) => return super::service_error(e),
    };
    let pull_title: String = run
        .prompt
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .chars()
        .take(72)
        .collect();
    let (pull_url, pull_open) = match pull {
        service::pulls::PullOffer::Opened(url) => (Some(url), false),
        service::pulls::PullOffer::Open => (None, true),
        service::pulls::PullOffer::Nothing => (None, false),
    };
    Page::ok(&RunPage {
        limits,
        pull_url,
        pull_open,
        pull_title,
        chrome: Chrome::new(&session, "runs", &format!("Run {id}")),
        state: run.state.as_str(),
        detail: detail(&run),
        config,
        attach: format!("labctl attach {id}"),
        history,
        screen,
        usage: usage_rows(&run),
        live: run.state.is_active(),
        agent: agent_line(&run),
        run,
    })
}

async fn stop(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(id): Path<i64>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    match service::runs::stop(&app.runner, id, "stopped from the run page").await {
        Ok(_) => Redirect::to(&format!("/runs/{id}")).into_response(),
        Err(e) => super::service_error(e),
    }
}

async fn remove(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(id): Path<i64>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    match service::runs::remove(&app.runner, id).await {
        Ok(()) => Redirect::to("/runs").into_response(),
        Err(e) => super::service_error(e),
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/runs", get(dashboard))
        .route("/runs/{id}", get(show))
        .route("/runs/{id}/stop", post(stop))
        .route("/runs/{id}/input", post(input))
        .route("/runs/{id}/remove", post(remove))
        .route("/runs/{id}/pull", post(open_pull))
}
