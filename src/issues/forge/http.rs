//! One forge request: the auth header each forge takes, and a refusal turned
//! into a clear error (the forge's own message, never the token), rate
//! limits into `SourceError::RateLimited`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Forge;
use crate::issues::{Result, SourceError};
use crate::repo::issue_source::SourceKind;

/// How long lab waits after a secondary rate limit that names no time:
/// GitHub's REST docs ("Rate limits for the REST API", secondary limits) say
/// to wait at least one minute when there is no `retry-after` and no
/// `x-ratelimit-reset`.
const SECONDARY_WAIT: u64 = 60;

impl Forge {
    /// A request to the forge, with lab's token. GitHub takes `Bearer`;
    /// Gitea/Forgejo take `token` or `bearer` (Forgejo's
    /// `services/auth/oauth2.go` `parseToken`, any case; `Basic` only with
    /// the token as password, `services/auth/basic.go`). Only ever called
    /// with URLs on the configured forge's origin (`paging.rs`).
    pub(super) fn req(&self, method: Method, url: &str) -> RequestBuilder {
        // One `Accept`: GitHub's own media type there, JSON elsewhere.
        let rb = self.http.request(method, url);
        let rb = match self.kind {
            SourceKind::Github => rb
                .header("accept", "application/vnd.github+json")
                .header("x-github-api-version", "2022-11-28"),
            _ => rb.header("accept", "application/json"),
        };
        match (&self.token, self.kind) {
            (Some(t), SourceKind::Github) => rb.bearer_auth(t),
            (Some(t), _) => rb.header("authorization", format!("token {t}")),
            (None, _) => rb,
        }
    }

    /// Sends; a refusal becomes an error.
    pub(super) async fn send(&self, rb: RequestBuilder) -> Result<Response> {
        let resp = self.send_any(rb).await?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        Err(refusal(resp).await)
    }

    /// Sends, and hands back whatever the forge answered (the caller reads
    /// the refusals it expects, and passes the others to `refusal`).
    pub(super) async fn send_any(&self, rb: RequestBuilder) -> Result<Response> {
        rb.send()
            .await
            .map_err(|e| SourceError::Forge(format!("cannot reach the forge: {}", e.without_url())))
    }

    pub(super) async fn json<T: DeserializeOwned>(&self, rb: RequestBuilder) -> Result<T> {
        read(self.send(rb).await?).await
    }
}

pub(super) async fn read<T: DeserializeOwned>(resp: Response) -> Result<T> {
    resp.json()
        .await
        .map_err(|e| SourceError::Forge(format!("the forge sent an answer lab cannot read: {e}")))
}

fn header_num(h: &HeaderMap, k: &str) -> Option<u64> {
    h.get(k)?.to_str().ok()?.trim().parse().ok()
}

/// `Retry-After` in seconds: a number, or an HTTP date (RFC 9110 allows
/// both; a proxy may send the date) as the seconds until then.
fn retry_after(h: &HeaderMap) -> Option<u64> {
    if let Some(s) = header_num(h, "retry-after") {
        return Some(s);
    }
    let v = h.get("retry-after")?.to_str().ok()?;
    let at = httpdate::parse_http_date(v.trim()).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .map_or(0, |d| d.as_secs()),
    )
}

/// How long a rate-limit refusal asks lab to wait, or None when it is not
/// one. GitHub's primary limit: 403/429 with `x-ratelimit-remaining: 0`,
/// until `x-ratelimit-reset`. Its secondary limits: 403/429 with
/// `retry-after`, or only a message saying "secondary rate limit" (then at
/// least a minute). Any 429 is a limit too (Gitea's, a proxy's).
fn rate_limit_wait(status: StatusCode, h: &HeaderMap, message: &str) -> Option<u64> {
    if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    if let Some(s) = retry_after(h) {
        return Some(s);
    }
    if header_num(h, "x-ratelimit-remaining") == Some(0) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        return Some(
            header_num(h, "x-ratelimit-reset")
                .map(|at| at.saturating_sub(now))
                .unwrap_or(SECONDARY_WAIT),
        );
    }
    let m = message.to_ascii_lowercase();
    (status == StatusCode::TOO_MANY_REQUESTS || m.contains("rate limit")).then_some(SECONDARY_WAIT)
}

/// The error a refusal stands for.
pub(super) async fn refusal(resp: Response) -> SourceError {
    let status = resp.status();
    let headers = resp.headers().clone();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    // GitHub's validation errors say what failed in `errors[].message`
    // (`validation-error` in its description), beside "Validation Failed".
    let details: Vec<&str> = body["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["message"].as_str())
        .collect();
    let mut message = body["message"].as_str().unwrap_or("").to_owned();
    if !details.is_empty() {
        message = format!("{message} ({})", details.join("; "));
    }
    if let Some(wait) = rate_limit_wait(status, &headers, &message) {
        return SourceError::RateLimited {
            retry_after: Duration::from_secs(wait.clamp(1, 3600)),
        };
    }
    let what = format!(
        "the forge answered {status}{}{message}",
        if message.is_empty() { "" } else { ": " }
    );
    match status {
        StatusCode::NOT_FOUND => SourceError::NotFound(format!(
            "{what} (a forge answers 404 also for a private repo its token cannot see)"
        )),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => SourceError::Denied(format!(
            "{what} (check the forge token lab holds for this repo, and its permissions)"
        )),
        s if s.is_client_error() => SourceError::Invalid(what),
        _ => SourceError::Forge(what),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "120".parse().unwrap());
        assert_eq!(retry_after(&h), Some(120));
        h.insert(
            "retry-after",
            "Thu, 01 Jan 1970 00:00:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(0));
    }
}
