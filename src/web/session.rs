//! Browser sessions: paste the admin token once, get an HttpOnly,
//! SameSite=Strict cookie. Every form carries the session's CSRF token.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use axum::http::header::{COOKIE, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

use super::Page;
use crate::http::AppState;
use crate::http::auth::{digest, new_token};

pub const COOKIE_NAME: &str = "lab_session";
const TTL_MS: i64 = 7 * 24 * 3_600_000;

/// A logged-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    pub id_hash: String,
    pub csrf: String,
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

/// Sessions this node looked up lately, so a page does not cost a database
/// round trip for its session. An entry is trusted for [`CACHE_FOR`]; a
/// logout on this node drops it at once.
#[derive(Default)]
pub struct SessionCache {
    seen: Mutex<HashMap<String, (String, Instant)>>,
}

const CACHE_FOR: Duration = Duration::from_secs(30);

impl SessionCache {
    fn get(&self, id_hash: &str) -> Option<String> {
        let seen = self.seen.lock().expect("poisoned");
        seen.get(id_hash)
            .filter(|(_, at)| at.elapsed() < CACHE_FOR)
            .map(|(csrf, _)| csrf.clone())
    }

    fn put(&self, id_hash: &str, csrf: &str) {
        let mut seen = self.seen.lock().expect("poisoned");
        if seen.len() > 1000 {
            seen.retain(|_, (_, at)| at.elapsed() < CACHE_FOR);
        }
        seen.insert(id_hash.to_owned(), (csrf.to_owned(), Instant::now()));
    }

    pub fn forget(&self, id_hash: &str) {
        self.seen.lock().expect("poisoned").remove(id_hash);
    }
}

async fn lookup(parts: &Parts, app: &AppState) -> Option<Session> {
    let id = cookie_value(parts)?;
    let id_hash = hex::encode(digest(&id));
    if let Some(csrf) = app.sessions.get(&id_hash) {
        return Some(Session { id_hash, csrf });
    }
    let s = app.store.session(&id_hash).await.ok()??;
    app.sessions.put(&id_hash, &s.csrf);
    Some(Session {
        id_hash,
        csrf: s.csrf,
    })
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

impl FromRequestParts<AppState> for Session {
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

impl OptionalFromRequestParts<AppState> for Session {
    type Rejection = std::convert::Infallible;
    async fn from_request_parts(
        parts: &mut Parts,
        app: &AppState,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(lookup(parts, app).await)
    }
}

impl Session {
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

/// Starts a session; returns its cookie.
pub async fn start(app: &AppState, secure: bool) -> Result<HeaderValue, crate::store::StoreError> {
    let id = new_token();
    let csrf = new_token();
    app.store
        .create_session(&hex::encode(digest(&id)), &csrf, TTL_MS)
        .await?;
    let secure = if secure { "; Secure" } else { "" };
    Ok(HeaderValue::from_str(&format!(
        "{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
        TTL_MS / 1000
    ))
    .expect("a cookie of hex and fixed text is a valid header"))
}

/// The cookie that ends a session in the browser.
pub fn clear_cookie() -> (axum::http::HeaderName, HeaderValue) {
    (
        SET_COOKIE,
        HeaderValue::from_static("lab_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
    )
}
