//! The pages' side of browser sessions (`auth::browser`): reading the cookie
//! of a request, sending a browser without one to the login form, refusing
//! a form whose CSRF token is not its session's.

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use axum::http::StatusCode;
use axum::http::header::COOKIE;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};

use super::Page;
use crate::auth::browser::{self, BrowserSession, COOKIE_NAME};
use crate::state::AppState;

async fn lookup(parts: &Parts, app: &AppState) -> Option<BrowserSession> {
    // A call another node forwarded acts for the session that node found
    // (named by its stored digest: the cookie never leaves the first node).
    if let Some(call) = parts.extensions.get::<crate::fleet::key::NodeCall>() {
        return browser::find_by_digest(&app.store, &app.sessions, call.session.as_deref()?).await;
    }
    browser::find(&app.store, &app.sessions, &cookie_value(parts)?).await
}

/// The browser session of a request's cookie, if it has one that is valid.
pub async fn of_request(parts: &Parts, app: &AppState) -> Option<BrowserSession> {
    lookup(parts, app).await
}

fn cookie_value(parts: &Parts) -> Option<String> {
    parts
        .headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE_NAME)
        .map(|(_, v)| v.to_owned())
}

/// No session: a page sends the browser to the login form, a form post is
/// refused.
pub struct NotLoggedIn {
    next: String,
    post: bool,
}

impl IntoResponse for NotLoggedIn {
    fn into_response(self) -> Response {
        if self.post {
            return Page::error(
                StatusCode::FORBIDDEN,
                "Your session has ended: log in again, then repeat what you did.",
            );
        }
        let next =
            percent_encoding::utf8_percent_encode(&self.next, percent_encoding::NON_ALPHANUMERIC);
        Redirect::to(&format!("/login?next={next}")).into_response()
    }
}

impl FromRequestParts<AppState> for BrowserSession {
    type Rejection = NotLoggedIn;
    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, NotLoggedIn> {
        match lookup(parts, app).await {
            Some(s) => Ok(s),
            None => Err(NotLoggedIn {
                next: parts
                    .uri
                    .path_and_query()
                    .map(|p| p.as_str().to_owned())
                    .unwrap_or_else(|| "/".into()),
                post: parts.method != axum::http::Method::GET,
            }),
        }
    }
}

impl OptionalFromRequestParts<AppState> for BrowserSession {
    type Rejection = std::convert::Infallible;
    async fn from_request_parts(
        parts: &mut Parts,
        app: &AppState,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(lookup(parts, app).await)
    }
}

impl BrowserSession {
    /// The refusal of a posted form whose CSRF token is not this session's.
    pub fn refuse_forged(&self, form: &super::forms::Form) -> Option<Response> {
        (form.get("csrf") != Some(self.csrf.as_str())).then(|| {
            Page::error(
                StatusCode::FORBIDDEN,
                "This form is out of date (its security token does not match): reload the page and try again.",
            )
        })
    }
}
