//! The fake forge's gate and paging: which `Authorization` each forge
//! takes, its rate-limit refusals, and its pages and paging headers.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Fake, Flavor, Limit};

/// Whether an `Authorization` header carries the token the way the forge
/// takes it.
fn authorized(f: &Fake, given: &str) -> bool {
    let Some((scheme, value)) = given.split_once(' ') else {
        return false;
    };
    let scheme = scheme.to_ascii_lowercase();
    let value = value.trim();
    match (f.flavor, scheme.as_str()) {
        (_, "token") | (_, "bearer") => value == f.token,
        (Flavor::Gitea, "basic") => {
            let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(value) else {
                return false;
            };
            let raw = String::from_utf8_lossy(&raw).into_owned();
            let (u, p) = raw.split_once(':').unwrap_or((&raw, ""));
            p == f.token || (u == f.token && (p.is_empty() || p == "x-oauth-basic"))
        }
        _ => false,
    }
}

fn limit_response(limit: Limit) -> Response {
    let mut h = HeaderMap::new();
    let msg = match limit {
        Limit::Primary => {
            let reset = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
                + 42;
            h.insert("x-ratelimit-remaining", "0".parse().unwrap());
            h.insert("x-ratelimit-reset", reset.to_string().parse().unwrap());
            "API rate limit exceeded for user ID 7."
        }
        Limit::RetryAfter(s) => {
            h.insert("x-ratelimit-remaining", "4000".parse().unwrap());
            h.insert("retry-after", s.to_string().parse().unwrap());
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
        }
        Limit::SecondaryMessage => {
            h.insert("x-ratelimit-remaining", "4000".parse().unwrap());
            "You have exceeded a secondary rate limit and have been temporarily blocked from content creation."
        }
    };
    let body = json!({"message": msg, "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"});
    (StatusCode::FORBIDDEN, h, Json(body)).into_response()
}

/// Auth, rate limits, and the request log.
pub(super) async fn gate(
    State(f): State<Fake>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let line = format!("{} {}", req.method(), req.uri());
    let given = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    {
        let mut s = f.state.lock().unwrap();
        s.log.push(line);
        s.log_at.push(std::time::Instant::now());
        let limit = if std::mem::take(&mut s.rate_limited) {
            Some(Limit::Primary)
        } else {
            s.limit.take()
        };
        if let Some(l) = limit {
            s.limited = Some((s.log.len() - 1, std::time::Instant::now()));
            return limit_response(l);
        }
    }
    let revoked = f.state.lock().unwrap().revoked;
    if revoked || !authorized(&f, &given) {
        let msg = match f.flavor {
            Flavor::Gitea => {
                json!({"message": "user does not exist [uid: 0, name: ]", "url": format!("{}/api/swagger", f.base)})
            }
            Flavor::Github => {
                json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"})
            }
        };
        return (StatusCode::UNAUTHORIZED, Json(msg)).into_response();
    }
    next.run(req).await
}

#[derive(Deserialize)]
pub(super) struct ListQ {
    pub state: Option<String>,
    pub labels: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub page: Option<usize>,
    pub per_page: Option<usize>,
    pub limit: Option<usize>,
}

/// One page of `items` as the forge pages it: Gitea with `X-Total-Count`
/// and (when `link`) a `Link` from its ROOT_URL; GitHub with a `Link`.
pub(super) fn paged(f: &Fake, uri: &Uri, q: &ListQ, items: Vec<Value>, link: bool) -> Response {
    let max = f.state.lock().unwrap().max_items;
    let (per, base) = {
        let s = f.state.lock().unwrap();
        let base = s.link_base.clone().unwrap_or_else(|| f.base.clone());
        match f.flavor {
            Flavor::Gitea => {
                let max = if max == 0 { 50 } else { max };
                (q.limit.unwrap_or(30).clamp(1, max), base)
            }
            Flavor::Github => (q.per_page.unwrap_or(30).clamp(1, 100), base),
        }
    };
    let page = q.page.unwrap_or(1).max(1);
    let total = items.len();
    let pages = total.div_ceil(per).max(1);
    let chunk: Vec<Value> = items.into_iter().skip((page - 1) * per).take(per).collect();
    let mut h = HeaderMap::new();
    if f.flavor == Flavor::Gitea {
        h.insert("x-total-count", total.to_string().parse().unwrap());
    }
    if link && page < pages {
        let query: Vec<String> = uri
            .query()
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty() && !p.starts_with("page="))
            .map(str::to_owned)
            .collect();
        let at = |n: usize| format!("<{base}{}?{}&page={n}>", uri.path(), query.join("&"));
        h.insert(
            "link",
            format!(
                "{}; rel=\"next\", {}; rel=\"last\"",
                at(page + 1),
                at(pages)
            )
            .parse()
            .unwrap(),
        );
    }
    (h, Json(Value::Array(chunk))).into_response()
}
