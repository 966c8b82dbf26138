//! Who is calling an `/api/v1` route: the bearer token is the admin token or
//! a live run's token (ADR 9); a run's token reaches only its own things.

use axum::extract::{Request, State};
use axum::http::Method;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::Response;

use super::error::{ApiError, ApiResult};
use crate::auth::{Principal, digest};
use crate::state::AppState;
use crate::store::RepoKey;

/// Where a path is, for a run's token: reachable, refused, or reachable if
/// the repo it names is the run's own.
enum Scope {
    Allowed,
    Refused,
    OwnRepo(String),
}

/// What a run's token may reach: `GET /runs/<its id>`, `POST /runs/<its
/// id>/pull`, `POST /runs/<its id>/hook`, `POST /runs/<its id>/plan`, `POST /runs/<its id>/review`, `GET /repos/<its repo>/issues[/<n>]`.
fn scope(run_id: i64, method: &Method, path: &str) -> Scope {
    let segs: Vec<String> = path
        .trim_start_matches("/api/v1/")
        .split('/')
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let own_run = |s: &str| s.parse::<i64>().ok() == Some(run_id);
    let get = method == Method::GET;
    match segs
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["runs", id] if get && own_run(id) => Scope::Allowed,
        ["runs", id, "pull"] if method == Method::POST && own_run(id) => Scope::Allowed,
        ["runs", id, "hook"] if method == Method::POST && own_run(id) => Scope::Allowed,
        ["runs", id, "plan"] if method == Method::POST && own_run(id) => Scope::Allowed,
        ["runs", id, "review"] if method == Method::POST && own_run(id) => Scope::Allowed,
        ["repos", r, "issues"] if get => Scope::OwnRepo((*r).to_owned()),
        ["repos", r, "issues", n] if get && n.parse::<i64>().is_ok() => {
            Scope::OwnRepo((*r).to_owned())
        }
        _ => Scope::Refused,
    }
}

/// Whether `who` may make this request. A repo in the path is compared by
/// id: a name is looked up the way the handler will look it up, so a renamed
/// repo stays its runs' and a new repo that took the old name does not.
async fn may(app: &AppState, who: &Principal, method: &Method, path: &str) -> ApiResult<bool> {
    let Principal::Run { run_id, repo_id } = who else {
        return Ok(true);
    };
    match scope(*run_id, method, path) {
        Scope::Allowed => Ok(true),
        Scope::Refused => Ok(false),
        Scope::OwnRepo(named) => {
            let Some(own) = repo_id else {
                return Ok(false);
            };
            let named = match RepoKey::parse(&named) {
                RepoKey::Id(id) => Some(id),
                key => app.store.repo_id(&key).await.map_err(ApiError::internal)?,
            };
            Ok(named == Some(*own))
        }
    }
}

pub fn bearer(req: &Request) -> Option<&str> {
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
    // A call another node of the fleet signed (checked before routing) acts
    // for an operator that node authenticated.
    if req
        .extensions()
        .get::<crate::fleet::key::NodeCall>()
        .is_some()
    {
        req.extensions_mut().insert(Principal::Admin);
        return Ok(next.run(req).await);
    }
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
            },
            Ok(None) => {
                return Err(ApiError::unauthorized(
                    "the bearer token is not valid (a run's token ends with its run)",
                ));
            }
            Err(e) => return Err(ApiError::internal(e)),
        },
    };
    if !may(&app, &who, req.method(), req.uri().path()).await? {
        return Err(ApiError::forbidden(
            "a run's token may only read its repo's issues, read its own run, report its agent's state, and open its run's pull request",
        ));
    }
    req.extensions_mut().insert(who);
    Ok(next.run(req).await)
}
