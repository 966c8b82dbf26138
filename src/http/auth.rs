//! Who is calling an `/api/v1` route: the bearer token is the admin token or
//! a live run's token (ADR 9); a run's token reaches only its own things.

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::Response;

use super::error::ApiError;
use crate::auth::{Principal, digest};
use crate::state::AppState;

/// What a run's token may reach: `GET /runs/<its id>`, `POST /runs/<its
/// id>/pull`, `GET /repos/<its repo>/issues[/<n>]`.
fn run_may(who: &Principal, method: &axum::http::Method, path: &str) -> bool {
    let Principal::Run {
        run_id,
        repo_id,
        repo,
    } = who
    else {
        return true;
    };
    let segs: Vec<String> = path
        .trim_start_matches("/api/v1/")
        .split('/')
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let own_run = |s: &str| s.parse::<i64>().ok() == Some(*run_id);
    let own_repo = |s: &str| s == repo || (repo_id.is_some() && s.parse::<i64>().ok() == *repo_id);
    let get = method == axum::http::Method::GET;
    match segs
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["runs", id] => get && own_run(id),
        ["runs", id, "pull"] => method == axum::http::Method::POST && own_run(id),
        ["repos", r, "issues"] => get && own_repo(r),
        ["repos", r, "issues", n] => get && own_repo(r) && n.parse::<i64>().is_ok(),
        _ => false,
    }
}

fn bearer(req: &Request) -> Option<&str> {
    let v = req.headers().get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Rejects requests without a valid bearer token; records the caller.
pub async fn require_token(
    State(app): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let Some(token) = bearer(&req) else {
        return Err(ApiError::unauthorized(
            "missing 'Authorization: Bearer <token>'; the admin token is in <data-dir>/token",
        ));
    };
    let who = match app.auth.principal(token) {
        Some(p) => p,
        None => match app.store.run_for_token(&hex::encode(digest(token))).await {
            Ok(Some(run)) => Principal::Run {
                run_id: run.id,
                repo_id: run.repo_id,
                repo: run.repo_name,
            },
            Ok(None) => {
                return Err(ApiError::unauthorized(
                    "the bearer token is not valid (a run's token ends with its run)",
                ));
            }
            Err(e) => return Err(ApiError::internal(e)),
        },
    };
    if let Principal::Run { .. } = &who
        && !run_may(&who, req.method(), req.uri().path())
    {
        return Err(ApiError::forbidden(
            "a run's token may only read its repo's issues, read its own run, and open its run's pull request",
        ));
    }
    req.extensions_mut().insert(who);
    Ok(next.run(req).await)
}
