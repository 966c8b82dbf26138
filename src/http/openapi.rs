//! The OpenAPI document: its header, the bearer scheme, and the answers
//! every operation shares because a layer or an extractor gives them, not
//! the handler: 401 and 403 (the token check in front of every route), 400
//! (a path, query or body that does not decode), 404 (an id in the path that
//! names nothing), 413 and 415 (a body over the limit or not JSON).

use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{Content, Ref, RefOr, Response};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(title = "lab", description = "Runs coding-agent CLIs in tmux for the repositories it manages."),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub(super) struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

fn error(description: &str) -> RefOr<Response> {
    let mut r = Response::new(description);
    r.content.insert(
        "application/json".into(),
        Content::new(Some(Ref::from_schema_name("ErrorBody"))).into(),
    );
    r.into()
}

/// Adds the shared answers to every operation of `doc` (keeping an
/// operation's own description of a status), and names every answer.
pub(super) fn add_shared_responses(doc: &mut utoipa::openapi::OpenApi) {
    for item in doc.paths.paths.values_mut() {
        for op in [
            &mut item.get,
            &mut item.post,
            &mut item.patch,
            &mut item.put,
            &mut item.delete,
        ]
        .into_iter()
        .flatten()
        {
            add_to(op);
        }
    }
}

fn add_to(op: &mut Operation) {
    let params = op.parameters.as_deref().unwrap_or_default();
    let in_path = params
        .iter()
        .any(|p| matches!(p, RefOr::T(p) if matches!(p.parameter_in, ParameterIn::Path)));
    let takes_input = !params.is_empty() || op.request_body.is_some();
    let mut shared = vec![
        (
            "401",
            "No bearer token, or one that is not valid (a run's token ends with its run)",
        ),
        (
            "403",
            "A run's token, which reaches only its run, its repo's issues and its pull request",
        ),
    ];
    if takes_input {
        shared.push((
            "400",
            "A parameter or the body is invalid; `errors` names each field",
        ));
    }
    if in_path {
        shared.push(("404", "Nothing has the id in the path"));
    }
    if op.request_body.is_some() {
        shared.push(("413", "The body is over 1 MiB"));
        shared.push(("415", "The body is not `Content-Type: application/json`"));
    }
    let responses = &mut op.responses.responses;
    for (status, description) in shared {
        responses
            .entry(status.to_owned())
            .or_insert_with(|| error(description));
    }
    for (status, r) in responses.iter_mut() {
        if let RefOr::T(r) = r
            && r.description.is_empty()
        {
            r.description = status
                .parse::<u16>()
                .ok()
                .and_then(|s| axum::http::StatusCode::from_u16(s).ok())
                .and_then(|s| s.canonical_reason())
                .unwrap_or("The answer")
                .to_owned();
        }
    }
}
