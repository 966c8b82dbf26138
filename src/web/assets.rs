//! Static assets, embedded in the binary. URLs carry a hash of the content
//! (`?v=…`), so a browser may keep them for a year.

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::Router;
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rust_embed::RustEmbed;
use serde::Deserialize;

use crate::state::AppState;

#[derive(RustEmbed)]
#[folder = "web/static"]
struct Assets;

fn hashes() -> &'static HashMap<String, String> {
    static H: OnceLock<HashMap<String, String>> = OnceLock::new();
    H.get_or_init(|| {
        Assets::iter()
            .filter_map(|name| {
                let file = Assets::get(&name)?;
                Some((
                    name.to_string(),
                    hex::encode(&file.metadata.sha256_hash()[..6]),
                ))
            })
            .collect()
    })
}

/// The URL of an asset, with its content hash.
pub fn asset(name: &str) -> String {
    match hashes().get(name) {
        Some(h) => format!("/static/{name}?v={h}"),
        None => format!("/static/{name}"),
    }
}

#[derive(Deserialize)]
struct V {
    v: Option<String>,
}

async fn serve(Path(name): Path<String>, Query(q): Query<V>, headers: HeaderMap) -> Response {
    let Some(file) = Assets::get(&name) else {
        return (StatusCode::NOT_FOUND, "no such asset").into_response();
    };
    let hash = hex::encode(&file.metadata.sha256_hash()[..6]);
    let etag = format!("\"{hash}\"");
    let cache = if q.v.as_deref() == Some(hash.as_str()) {
        "public, max-age=31536000, immutable"
    } else {
        "public, max-age=300"
    };
    let mut h = HeaderMap::new();
    h.insert(
        header::ETAG,
        HeaderValue::from_str(&etag).expect("hex is a valid header"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        == Some(etag.as_str())
    {
        return (StatusCode::NOT_MODIFIED, h).into_response();
    }
    let mime = file.metadata.mimetype();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(mime).unwrap_or(HeaderValue::from_static("application/octet-stream")),
    );
    (h, file.data.into_owned()).into_response()
}

pub fn router() -> Router<AppState> {
    Router::new().route("/static/{*name}", get(serve))
}
