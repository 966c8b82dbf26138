//! The start form (`/runs/new`): a manual run's repo, provider, model,
//! effort, spawn options, node and first message, pre-filled from the
//! repo's manual resolution; started here or on the node chosen.

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;
use std::collections::BTreeMap;

use super::forms::{Form, FormErrors, FormField, Kind, select};
use super::{Chrome, Page};
use crate::auth::browser::BrowserSession;
use crate::domain::RunKind;
use crate::repo::Repo;
use crate::resolve::{Request, resolve};
use crate::service::{self, ServiceError};
use crate::state::AppState;
use crate::store::RepoKey;

#[derive(Template)]
#[template(path = "run_new.html")]
struct NewRunPage {
    chrome: Chrome,
    repos: Vec<Repo>,
    selected: String,
    fields: Vec<FormField>,
    problems: Vec<String>,
    failed: bool,
}

#[derive(Deserialize)]
struct RepoQuery {
    repo: Option<String>,
    /// A first message to start with (an issue's page links here with one).
    prompt: Option<String>,
}

/// The start form's fields for `repo`, pre-filled from its manual resolution.
async fn new_fields(
    app: &AppState,
    repo: &str,
    form: Option<&Form>,
    errors: &mut FormErrors,
) -> Vec<FormField> {
    let v = |n: &str| form.and_then(|f| f.get(n)).unwrap_or("").to_owned();
    let mut fields = Vec::new();
    if let Ok((r, global)) = app.store.repo_with_global(&RepoKey::parse(repo)).await
        && let Ok(id) = r.provider()
    {
        let p = id.provider();
        let res = resolve(
            id,
            RunKind::Manual,
            &global,
            &r.defaults,
            &Request::default(),
        );
        let label =
            |s: &crate::domain::Sourced| format!("{} (from {})", s.value, s.layer.describe());
        let ids = crate::provider::ids();
        fields.push(
            FormField::new(
                "provider",
                "Provider",
                select(Some(format!("{} (the repo's)", id.as_str())), &ids, &v("provider")),
            )
            .help("For this run only: another provider runs its own defaults, and the model and effort below are the repo's provider's.")
            .error_from(errors),
        );
        fields.push(
            FormField::new(
                "model",
                "Model",
                select(Some(label(&res.model)), p.models(), &v("model")),
            )
            .help("For this run only.")
            .error_from(errors),
        );
        fields.push(
            FormField::new(
                "effort",
                "Effort",
                select(Some(label(&res.effort)), p.efforts(), &v("effort")),
            )
            .error_from(errors),
        );
        // The options of the repo's provider; without a choice, the CLI's
        // own default.
        for o in p.spawn_options() {
            let name = format!("{OPTION_FIELD}{}", o.key);
            let values = o.manual_values();
            fields.push(
                FormField::new(
                    &name,
                    o.label,
                    select(Some("the CLI's own".to_owned()), &values, &v(&name)),
                )
                .help(o.description)
                .error_from(errors),
            );
        }
    }
    let nodes: Vec<String> = app
        .fleet
        .nodes()
        .await
        .map(|n| n.iter().map(|n| n.id.clone()).collect())
        .unwrap_or_default();
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    fields.push(
        FormField::new(
            "node",
            "Node",
            select(Some("any (lab picks)".to_owned()), &names, &v("node")),
        )
        .help("The lab node it runs on (Nodes lists them).")
        .error_from(errors),
    );
    fields.push(
        FormField::new(
            "prompt",
            "First message (optional)",
            Kind::TextArea(v("prompt")),
        )
        .help("Sent to the agent as it starts. Leave empty to start it idle.")
        .error_from(errors),
    );
    fields
}

async fn new_form(
    State(app): State<AppState>,
    session: BrowserSession,
    Query(q): Query<RepoQuery>,
) -> Response {
    let repos = app.store.repos().await.unwrap_or_default();
    let chosen = q
        .repo
        .or_else(|| repos.first().map(|r| r.name.clone()))
        .unwrap_or_default();
    let mut errors = FormErrors::default();
    let given = q.prompt.map(|p| Form([("prompt".to_owned(), p)].into()));
    let fields = new_fields(&app, &chosen, given.as_ref(), &mut errors).await;
    Page::ok(&NewRunPage {
        chrome: Chrome::new(&session, "new", "Start a run"),
        repos,
        selected: chosen,
        fields,
        problems: Vec::new(),
        failed: false,
    })
}

async fn start(State(app): State<AppState>, session: BrowserSession, form: Form) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    let repo = form.value("repo").unwrap_or_default();
    // A browser's form: never a call another node forwarded.
    let result = match app.fleet.place(form.value("node").as_deref(), false).await {
        Ok(crate::fleet::Place::Here) => service::runs::start_manual(
            &app.store,
            &app.runner,
            service::runs::ManualStart {
                repo: &repo,
                provider: form.value("provider").as_deref(),
                model: form.value("model"),
                effort: form.value("effort"),
                options: form_options(&form),
                prompt: form.get("prompt").unwrap_or("").to_owned(),
            },
        )
        .await
        .map(|(run, _)| run.id),
        Ok(crate::fleet::Place::There(node)) => start_on(&app, &node, &form, &repo).await,
        Err(e) => Err(ServiceError::Conflict(e.to_string())),
    };
    let mut errors = match result {
        Ok(id) => return Redirect::to(&format!("/runs/{id}")).into_response(),
        Err(ServiceError::Invalid(i)) => FormErrors::from(i),
        Err(
            ServiceError::NotFound(m)
            | ServiceError::Conflict(m)
            | ServiceError::Unavailable(m)
            | ServiceError::Unsandboxed(m),
        ) => FormErrors([("repo".to_owned(), m)].into()),
        Err(e) => return super::service_error(e),
    };
    let repos = app.store.repos().await.unwrap_or_default();
    let fields = new_fields(&app, &repo, Some(&form), &mut errors).await;
    Page::render(
        StatusCode::BAD_REQUEST,
        &NewRunPage {
            chrome: Chrome::new(&session, "new", "Start a run"),
            repos,
            selected: repo,
            fields,
            problems: errors.rest(),
            failed: true,
        },
    )
}

/// Starts the form's run on another node (issue 29 §4): the run's id, or
/// what that node refused.
/// The start form's spawn options (`options.<key>`), those chosen.
fn form_options(form: &Form) -> BTreeMap<String, String> {
    form.0
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(OPTION_FIELD)?.to_owned(), v.clone())))
        .filter(|(_, v)| !v.trim().is_empty())
        .collect()
}

/// The prefix of the start form's option fields: the API's field names.
const OPTION_FIELD: &str = "options.";

async fn start_on(
    app: &AppState,
    node: &crate::domain::Node,
    form: &Form,
    repo: &str,
) -> Result<i64, ServiceError> {
    let start = crate::fleet::Start {
        repo: repo.to_owned(),
        provider: form.value("provider"),
        model: form.value("model"),
        effort: form.value("effort"),
        options: form_options(form),
        prompt: form.get("prompt").map(str::to_owned),
        node: Some(node.id.clone()),
    };
    app.fleet.start_on(node, &start).await.map_err(|e| match e {
        crate::fleet::StartElsewhere::Refused(m) => ServiceError::Conflict(m),
        e => ServiceError::Unavailable(e.to_string()),
    })
}

pub fn router() -> Router<AppState> {
    Router::new().route("/runs/new", get(new_form).post(start))
}
