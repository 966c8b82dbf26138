//! The pages: server-rendered (askama), static assets embedded (rust-embed),
//! every page usable without JavaScript (forms post and redirect); a little
//! plain JavaScript adds live states and live output.
//!
//! Invariant: pages never re-implement a rule: values are validated by
//! `validate`/`settings`/`repo`, resolved by `resolve`, started by
//! `run::Runner::launch`, the same code the API uses.
//! Invariant: every POST passes the same-origin guard and carries the
//! session's CSRF token; a refused post writes nothing.

mod afk_page;
mod assets;
pub mod diff_view;
mod form_values;
pub mod forms;
mod issue_knobs;
mod issue_page;
mod issues_page;
mod kind_form;
mod knob_form;
mod live;
mod nodes_page;
mod notify_form;
mod pulls_page;
mod repo_form;
mod repos_page;
mod resume_form;
mod runs_page;
pub mod session;
mod settings_page;
mod start_page;

use std::time::Instant;

use askama::Template;
use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::auth::Principal;
use crate::auth::browser::{self, BrowserSession};
use crate::service::ServiceError;
use crate::state::AppState;
use crate::validate;
pub use assets::asset;
use forms::Form;

/// What every page's frame needs: the navigation, the CSRF token for its
/// forms, the asset URLs.
pub struct Chrome {
    pub title: String,
    pub active: &'static str,
    pub csrf: String,
    pub css: String,
    pub js: String,
}

impl Chrome {
    pub fn new(session: &BrowserSession, active: &'static str, title: &str) -> Chrome {
        Chrome {
            title: title.to_owned(),
            active,
            csrf: session.csrf.clone(),
            css: asset("app.css"),
            js: asset("app.js"),
        }
    }

    /// For pages shown without a session (login, errors).
    fn anonymous(title: &str) -> Chrome {
        Chrome {
            title: title.to_owned(),
            active: "",
            csrf: String::new(),
            css: asset("app.css"),
            js: asset("app.js"),
        }
    }
}

/// A 500 page for a failure that is lab's; the cause goes to the log.
pub fn internal(e: impl std::fmt::Display) -> Response {
    tracing::error!(error = %e, "a page failed");
    Page::error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Something failed on lab's side; the server log has the cause.",
    )
}

/// The error page for a shared write that failed for a reason no form field
/// owns.
pub fn service_error(e: ServiceError) -> Response {
    let status = match &e {
        ServiceError::Invalid(_) => StatusCode::BAD_REQUEST,
        ServiceError::NotFound(_) => StatusCode::NOT_FOUND,
        ServiceError::Conflict(_) | ServiceError::Unavailable(_) | ServiceError::Unsandboxed(_) => {
            StatusCode::CONFLICT
        }
        ServiceError::Internal(_) => return internal(e),
    };
    Page::error(status, &e.to_string())
}

/// Rendering: pages, and the error page.
pub struct Page;

impl Page {
    /// Renders a page; `Server-Timing: render;dur=<ms>` says how long it took.
    pub fn render<T: Template>(status: StatusCode, t: &T) -> Response {
        let began = Instant::now();
        match t.render() {
            Ok(html) => {
                let ms = began.elapsed().as_secs_f64() * 1e3;
                let mut resp = (status, Html(html)).into_response();
                if let Ok(v) = HeaderValue::from_str(&format!("render;dur={ms:.3}")) {
                    resp.headers_mut().insert("server-timing", v);
                }
                resp.headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                resp
            }
            Err(e) => {
                tracing::error!(error = %e, "a page failed to render");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the page failed to render; the server log has the cause",
                )
                    .into_response()
            }
        }
    }

    pub fn ok<T: Template>(t: &T) -> Response {
        Self::render(StatusCode::OK, t)
    }

    /// A page that says what went wrong.
    pub fn error(status: StatusCode, message: &str) -> Response {
        Self::render(
            status,
            &ErrorPage {
                chrome: Chrome::anonymous(status.canonical_reason().unwrap_or("Error")),
                message: message.to_owned(),
            },
        )
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    chrome: Chrome,
    message: String,
}

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    chrome: Chrome,
    next: String,
    error: Option<String>,
    /// This server's token file.
    token_file: String,
}

#[derive(Deserialize)]
struct NextQuery {
    next: Option<String>,
}

/// Only a path on this site may be a redirect target; anything else (a
/// tab a browser drops, a line break a header cannot carry) goes to `/`.
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if validate::local_path(n) => n.to_owned(),
        _ => "/".to_owned(),
    }
}

/// Where this server keeps its admin token.
fn token_file(app: &AppState) -> String {
    app.runner
        .cfg()
        .data_dir
        .join("token")
        .display()
        .to_string()
}

async fn login_form(
    State(app): State<AppState>,
    session: Option<BrowserSession>,
    Query(q): Query<NextQuery>,
) -> Response {
    let next = safe_next(q.next.as_deref());
    if session.is_some() {
        return Redirect::to(&next).into_response();
    }
    Page::ok(&LoginPage {
        chrome: Chrome::anonymous("Log in"),
        next,
        error: None,
        token_file: token_file(&app),
    })
}

async fn login(State(app): State<AppState>, form: Form) -> Response {
    let next = safe_next(form.get("next"));
    let token = form.value("token").unwrap_or_default();
    if app.auth.principal(&token) != Some(Principal::Admin) {
        return Page::render(
            StatusCode::UNAUTHORIZED,
            &LoginPage {
                chrome: Chrome::anonymous("Log in"),
                next,
                error: Some(
                    "That is not the admin token. It is in the token file of lab's data dir."
                        .into(),
                ),
                token_file: token_file(&app),
            },
        );
    }
    match browser::start(&app.store, app.runner.cfg().lab_url.starts_with("https://")).await {
        Ok(cookie) => {
            let mut resp = Redirect::to(&next).into_response();
            resp.headers_mut().insert(header::SET_COOKIE, cookie);
            resp
        }
        Err(e) => {
            tracing::error!(error = %e, "could not start a session");
            Page::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Could not start a session; the server log has the cause.",
            )
        }
    }
}

async fn logout(State(app): State<AppState>, session: BrowserSession, form: Form) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    app.sessions.forget(&session.id_hash);
    let _ = app.store.delete_session(&session.id_hash).await;
    let mut resp = Redirect::to("/login").into_response();
    let (k, v) = browser::clear_cookie();
    resp.headers_mut().insert(k, v);
    resp
}

/// Refuses a POST that comes from another site: `Sec-Fetch-Site` other than
/// same-origin, or an `Origin` that is not this server's: the origin of
/// `--public-url` when it is set (behind a proxy `Host` is not what the
/// browser saw, and a rebinding site controls it), else `Host`.
async fn same_origin(State(app): State<AppState>, req: Request, next: Next) -> Response {
    if from_another_site(&app, req.method(), req.headers()) {
        return Page::error(
            StatusCode::FORBIDDEN,
            "This form was sent from another site. lab only accepts forms from its own pages.",
        );
    }
    next.run(req).await
}

/// Whether a request is a POST from another site (see [`same_origin`]):
/// also asked by a node before it forwards a form to the node that owns
/// its run.
pub fn from_another_site(
    app: &AppState,
    method: &axum::http::Method,
    h: &axum::http::HeaderMap,
) -> bool {
    if method != axum::http::Method::POST {
        return false;
    }
    let fetch_site = h.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    let cross_site = matches!(fetch_site, Some(s) if s != "same-origin" && s != "none");
    let foreign_origin = match h.get(header::ORIGIN).map(|v| v.to_str()) {
        None => false,
        Some(Err(_)) => true,
        Some(Ok(origin)) => match &app.public_origin {
            Some(public) => validate::web_origin(origin).as_ref() != Some(public),
            None => {
                let host = h
                    .get(header::HOST)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                origin.split_once("://").map(|(_, rest)| rest) != Some(host)
            }
        },
    };
    cross_site || foreign_origin
}

/// The pages and their assets.
pub fn router(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/runs") }))
        .route("/login", get(login_form).post(login))
        .route("/logout", post(logout))
        .merge(settings_page::router())
        .merge(repos_page::router())
        .merge(runs_page::router())
        .merge(start_page::router())
        .merge(resume_form::router())
        .merge(live::router())
        .merge(afk_page::router())
        .merge(nodes_page::router())
        .merge(issues_page::router())
        .merge(issue_page::router())
        .merge(pulls_page::router())
        .layer(middleware::from_fn_with_state(state.clone(), same_origin))
        .merge(assets::router())
        .layer(middleware::map_response(plain_errors_as_pages))
}

/// An error answered in plain text (an extractor's rejection: a path or
/// query parameter that does not parse) becomes an error page: pages answer
/// HTML.
async fn plain_errors_as_pages(resp: Response) -> Response {
    let status = resp.status();
    let plain = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/plain"));
    if !plain || !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let text = axum::body::to_bytes(resp.into_body(), 16 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    Page::error(status, &text)
}
