//! Who is calling: the admin token (created on first start, mode 0600 in the
//! data dir) opens everything under `/api/v1`.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};

use super::AppState;
use super::error::ApiError;

/// The caller of a request, once authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Admin,
    /// A live run's own token: it may read its repo's issues, read its run,
    /// and open its run's pull request; nothing else.
    Run {
        run_id: i64,
        repo_id: Option<i64>,
        repo: String,
    },
}

pub struct Auth {
    admin: [u8; 32],
}

impl Auth {
    pub fn new(admin_token: &str) -> Auth {
        Auth {
            admin: digest(admin_token),
        }
    }

    /// Who a bearer token belongs to, if anyone.
    pub fn principal(&self, token: &str) -> Option<Principal> {
        // Comparing digests keeps the comparison's timing independent of how
        // much of the token matched.
        (digest(token) == self.admin).then_some(Principal::Admin)
    }
}

pub fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A new random token: 32 bytes, hex.
pub fn new_token() -> String {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).expect("the OS random source failed");
    hex::encode(b)
}

/// Reads the admin token from `path`, or creates it (mode 0600). Returns the
/// token and whether it was just created.
pub fn load_or_create_token(path: &Path) -> std::io::Result<(String, bool)> {
    match std::fs::read_to_string(path) {
        Ok(t) if !t.trim().is_empty() => return Ok((t.trim().to_owned(), false)),
        Ok(_) => {
            return Err(std::io::Error::other(format!(
                "{} is empty: delete it to have lab create a new token",
                path.display()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let token = new_token();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    writeln!(f, "{token}")?;
    f.sync_all()?;
    Ok((token, true))
}

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
