//! Browser sessions: the admin token pasted once buys an HttpOnly,
//! SameSite=Strict cookie; every form of the session carries its CSRF token.
//! The cookie's value is a secret; only its digest is stored.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::HeaderValue;
use axum::http::header::SET_COOKIE;

use super::{digest, new_token};
use crate::store::{Store, StoreError};

pub const COOKIE_NAME: &str = "lab_session";
const TTL_MS: i64 = 7 * 24 * 3_600_000;

/// A logged-in browser.
#[derive(Debug, Clone)]
pub struct BrowserSession {
    pub id_hash: String,
    pub csrf: String,
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

/// The browser session whose cookie value is `id`, from this node's cache or
/// the store.
pub async fn find(store: &Store, cache: &SessionCache, id: &str) -> Option<BrowserSession> {
    find_by_digest(store, cache, &hex::encode(digest(id))).await
}

/// The browser session whose stored digest is `id_hash` (what a node that
/// forwards a page's request names it by).
pub async fn find_by_digest(
    store: &Store,
    cache: &SessionCache,
    id_hash: &str,
) -> Option<BrowserSession> {
    let id_hash = id_hash.to_owned();
    if let Some(csrf) = cache.get(&id_hash) {
        return Some(BrowserSession { id_hash, csrf });
    }
    let s = store.session(&id_hash).await.ok()??;
    cache.put(&id_hash, &s.csrf);
    Some(BrowserSession {
        id_hash,
        csrf: s.csrf,
    })
}

/// Starts a session; returns its cookie.
pub async fn start(store: &Store, secure: bool) -> Result<HeaderValue, StoreError> {
    let id = new_token();
    let csrf = new_token();
    store
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
