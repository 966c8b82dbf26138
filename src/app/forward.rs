//! Any node serves every run (issue 29 §2), the application's part: a
//! request for a run that another node owns is forwarded to it, signed
//! (`fleet::key`), once this node has checked who asks; a signed request
//! from another node is checked before anything else reads it.
//!
//! Host side only: a run's agent calls the node that owns its run, with its
//! run token, and such requests are never forwarded.

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{MAX_BODY, is_api};
use crate::auth::Principal;
use crate::fleet::key::{NodeCall, SIGNATURE};
use crate::http::error::ApiError;
use crate::state::AppState;
use crate::web::Page;

/// What a route of a run does with the run's node: the routes that read or
/// drive what lives on the node (its screen, output, diff, session and
/// workspace, the branch its pull request pushes, the scope its receipt
/// checks); the rest read the shared database and are served anywhere.
fn run_route(method: &axum::http::Method, path: &str) -> Option<i64> {
    use axum::http::Method;
    // The id as the router reads it: percent-decoded.
    let id_of = |id: &str| -> Option<i64> {
        percent_encoding::percent_decode_str(id)
            .decode_utf8()
            .ok()?
            .parse()
            .ok()
    };
    if let Some(rest) = path.strip_prefix("/api/v1/runs/") {
        let (id, tail) = rest.split_once('/').unwrap_or((rest, ""));
        let forwarded = match tail {
            "" => method == Method::DELETE,
            "screen" | "input" | "stop" | "resume" | "output" | "diff" | "pull" | "receipt" => true,
            _ => false,
        };
        return forwarded.then(|| id_of(id)).flatten();
    }
    if let Some(id) = path.strip_prefix("/live/runs/") {
        return id_of(id);
    }
    let rest = path.strip_prefix("/runs/")?;
    let (id, tail) = rest.split_once('/').unwrap_or((rest, ""));
    matches!(
        tail,
        "" | "stop" | "input" | "remove" | "resume" | "changes"
    )
    .then(|| id_of(id))
    .flatten()
}

fn refused(api: bool, status: StatusCode, code: &'static str, why: String) -> Response {
    if api {
        ApiError::new(status, code, why).into_response()
    } else {
        Page::error(status, &why)
    }
}

/// Checks a request another node signed: refused at once when its
/// signature does not hold, else marked as that node's call ([`NodeCall`])
/// for the token and session checks.
pub async fn node_calls(State(app): State<AppState>, req: Request, next: Next) -> Response {
    if !req.headers().contains_key(SIGNATURE) {
        return next.run(req).await;
    }
    let api = is_api(req.uri());
    let (mut parts, body) = req.into_parts();
    let Ok(body) = to_bytes(body, MAX_BODY).await else {
        return refused(
            api,
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the request body is over {MAX_BODY} bytes"),
        );
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    match app.fleet.key().verify(
        &parts.headers,
        app.fleet.me(),
        &parts.method,
        path,
        &body,
        crate::store::now_ms(),
    ) {
        Ok(call) => {
            parts.extensions.insert(call);
            next.run(Request::from_parts(parts, Body::from(body))).await
        }
        Err(why) => {
            tracing::warn!(%why, path, "refused a request signed as a lab node's");
            let mut r = refused(
                api,
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                format!("the lab node credential was refused: {why}"),
            );
            r.headers_mut().insert(
                crate::fleet::key::REFUSED,
                axum::http::HeaderValue::from_static(why.code()),
            );
            r
        }
    }
}

/// Forwards a request for a run another node owns (and that node answers)
/// to that node, once the caller is known here: the admin token for the
/// API, a browser session (and a form from lab's own pages) for the pages.
/// Anything else is answered here as if the run were this node's: refused,
/// or a clear conflict when its node is down.
pub async fn to_owner(State(app): State<AppState>, req: Request, next: Next) -> Response {
    if req.extensions().get::<NodeCall>().is_some() {
        // Forwarded once already: answered here, whatever it asks.
        return next.run(req).await;
    }
    let Some(run) = run_route(req.method(), req.uri().path()) else {
        return next.run(req).await;
    };
    let api = is_api(req.uri());
    let session = if api {
        let admin = crate::http::auth::bearer(&req)
            .and_then(|t| app.auth.principal(t))
            .is_some_and(|p| p == Principal::Admin);
        if !admin {
            return next.run(req).await;
        }
        None
    } else {
        let (parts, body) = req.into_parts();
        let found = crate::web::session::of_request(&parts, &app).await;
        let req = Request::from_parts(parts, body);
        match found {
            Some(s) if !crate::web::from_another_site(&app, req.method(), req.headers()) => {
                return forward(&app, run, req, Some(s.id_hash), api, next).await;
            }
            _ => return next.run(req).await,
        }
    };
    forward(&app, run, req, session, api, next).await
}

async fn forward(
    app: &AppState,
    run: i64,
    req: Request,
    session: Option<String>,
    api: bool,
    next: Next,
) -> Response {
    let Some(node) = app.fleet.remote_owner(run).await else {
        return next.run(req).await;
    };
    let (parts, body) = req.into_parts();
    let Ok(body) = to_bytes(body, MAX_BODY).await else {
        return refused(
            api,
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the request body is over {MAX_BODY} bytes"),
        );
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    match app
        .fleet
        .forward(
            &node,
            parts.method.clone(),
            path,
            &parts.headers,
            session.as_deref(),
            body.clone(),
        )
        .await
    {
        Ok(r) => r,
        Err(e) if parts.uri.path().starts_with("/live/") => {
            // A live page's stream is served here instead: the run's state
            // from the shared database, until the fleet decides its node
            // is down (a browser's EventSource would not ask again after
            // an error page).
            tracing::warn!(error = %e, run, "could not reach the node that owns a run; its live stream is served here");
            next.run(Request::from_parts(parts, Body::from(body))).await
        }
        Err(e) => {
            tracing::warn!(error = %e, run, "could not reach the node that owns a run");
            refused(
                api,
                StatusCode::BAD_GATEWAY,
                "node_unreachable",
                format!("run {run} lives on {e}; try again, or see labctl node ls"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::run_route;
    use axum::http::Method;

    #[test]
    fn only_what_lives_on_a_node_is_forwarded() {
        let get = Method::GET;
        assert_eq!(run_route(&get, "/api/v1/runs/7/screen"), Some(7));
        assert_eq!(run_route(&Method::POST, "/api/v1/runs/7/input"), Some(7));
        assert_eq!(run_route(&Method::DELETE, "/api/v1/runs/7"), Some(7));
        assert_eq!(run_route(&get, "/api/v1/runs/7"), None);
        assert_eq!(run_route(&Method::POST, "/api/v1/runs/7/hook"), None);
        assert_eq!(run_route(&Method::POST, "/api/v1/runs/7/review"), None);
        assert_eq!(run_route(&get, "/api/v1/runs/x/screen"), None);
        assert_eq!(run_route(&get, "/api/v1/runs/%37/screen"), Some(7));
        assert_eq!(run_route(&Method::POST, "/api/v1/runs/7/pull"), Some(7));
        assert_eq!(run_route(&get, "/api/v1/runs/7/receipt"), Some(7));
        assert_eq!(run_route(&Method::POST, "/api/v1/runs/7/plan"), None);
        assert_eq!(run_route(&get, "/runs/7"), Some(7));
        assert_eq!(run_route(&get, "/runs/new"), None);
        assert_eq!(run_route(&Method::POST, "/runs/7/stop"), Some(7));
        assert_eq!(run_route(&get, "/live/runs/7"), Some(7));
        assert_eq!(run_route(&get, "/live/runs"), None);
        assert_eq!(run_route(&get, "/repos/r/issues/7"), None);
    }
}
