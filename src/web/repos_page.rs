//! Repo pages: the list with a create form, and each repo's settings with
//! the values its runs would get (from the resolver).

use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::forms::{Form, FormErrors, FormField, Section};
use super::repo_form::{create_fields, patch_from, sections};
use super::{Chrome, Page};
use crate::auth::browser::BrowserSession;
use crate::domain::{RunKind, Sourced};
use crate::repo::Repo;
use crate::resolve::{Request, Resolved, resolve};
use crate::service::{self, ServiceError};
use crate::state::AppState;
use crate::store::RepoKey;

/// A resolved value as the page shows it.
pub struct Shown {
    pub what: String,
    pub value: String,
    pub from: String,
}

fn shown(what: &str, s: &Sourced) -> Shown {
    Shown {
        what: what.to_owned(),
        value: s.value.clone(),
        from: s.layer.describe().to_owned(),
    }
}

pub fn resolved_rows(r: &Resolved) -> Vec<Shown> {
    sourced_rows(&r.model, &r.effort, &r.options)
}

/// A run's model, effort and options, each with where it came from.
pub fn sourced_rows(
    model: &Sourced,
    effort: &Sourced,
    options: &std::collections::BTreeMap<String, Sourced>,
) -> Vec<Shown> {
    let mut v = vec![shown("model", model), shown("effort", effort)];
    v.extend(options.iter().map(|(k, s)| shown(k, s)));
    v
}

/// Knobs as the page lists them: each value and where it came from.
pub fn knob_rows(knobs: &[crate::knob::Resolved]) -> Vec<Shown> {
    knobs
        .iter()
        .map(|k| Shown {
            what: k.key.clone(),
            value: match k.value.shown() {
                v if v.is_empty() => "none".to_owned(),
                v => v,
            },
            from: k.source.describe().to_owned(),
        })
        .collect()
}

#[derive(Template)]
#[template(path = "repos.html")]
struct ReposPage {
    chrome: Chrome,
    repos: Vec<Repo>,
    create: Vec<FormField>,
    problems: Vec<String>,
    failed: bool,
}

#[derive(Template)]
#[template(path = "repo.html")]
struct RepoPage {
    chrome: Chrome,
    repo: Repo,
    /// The forge account lab acts as, when the repo's issues are on a
    /// forge and it was read.
    forge_identity: Option<crate::issues::ForgeIdentity>,
    sections: Vec<Section>,
    manual: Vec<Shown>,
    afk: Vec<Shown>,
    /// Plan and review runs: a title (with their provider), the kind, and
    /// what each resolves to.
    kinds: Vec<(String, &'static str, Vec<Shown>)>,
    /// What lab last made of the repo's `.lab.toml`, when it has one.
    config_file: Option<crate::repo::config_file::ConfigState>,
    /// What the kept `.lab.toml` sets, each under its path in the file.
    config_entries: Vec<(String, String)>,
    saved: bool,
    problems: Vec<String>,
    failed: bool,
}

/// Splits an API error into field errors (shown inline), or hands it back
/// for an error page.
fn field_errors(e: ServiceError) -> Result<FormErrors, ServiceError> {
    match e {
        ServiceError::Invalid(i) => Ok(FormErrors::from(i)),
        ServiceError::Conflict(m) => Ok(FormErrors([("name".to_owned(), m)].into())),
        other => Err(other),
    }
}

async fn list(State(app): State<AppState>, session: BrowserSession) -> Response {
    let repos = match app.store.repos().await {
        Ok(r) => r,
        Err(e) => return super::internal(e),
    };
    let mut errors = FormErrors::default();
    Page::ok(&ReposPage {
        chrome: Chrome::new(&session, "repos", "Repos"),
        repos,
        create: create_fields(None, &mut errors),
        problems: Vec::new(),
        failed: false,
    })
}

async fn create(State(app): State<AppState>, session: BrowserSession, form: Form) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    let result = match patch_from(&form, None) {
        Ok(patch) => service::repos::create(&app.store, app.scheduler.sources(), &patch).await,
        Err(i) => Err(i.into()),
    };
    let mut errors = match result {
        Ok(repo) => return Redirect::to(&format!("/repos/{}?saved=1", repo.name)).into_response(),
        Err(e) => match field_errors(e) {
            Ok(errors) => errors,
            Err(e) => return super::service_error(e),
        },
    };
    let repos = app.store.repos().await.unwrap_or_default();
    let create = create_fields(Some(&form), &mut errors);
    Page::render(
        StatusCode::BAD_REQUEST,
        &ReposPage {
            chrome: Chrome::new(&session, "repos", "Repos"),
            repos,
            create,
            problems: errors.rest(),
            failed: true,
        },
    )
}

#[derive(Deserialize)]
struct Saved {
    saved: Option<String>,
}

async fn render_repo(
    app: &AppState,
    session: &BrowserSession,
    key: &RepoKey,
    form: Option<&Form>,
    mut errors: FormErrors,
    saved: bool,
) -> Response {
    let (repo, global) = match app.store.repo_with_global(key).await {
        Ok(x) => x,
        Err(crate::store::StoreError::NotFound) => {
            return Page::error(StatusCode::NOT_FOUND, &format!("There is no repo '{key}'."));
        }
        Err(e) => return super::internal(e),
    };
    let p = match repo.provider() {
        Ok(p) => p,
        Err(e) => return unknown_provider(&repo.name, &e),
    };
    let manual = resolved_rows(&resolve(
        p,
        RunKind::Manual,
        &global,
        &repo.defaults,
        &Request::default(),
    ));
    let settings = match app.store.settings().await {
        Ok(s) => s,
        Err(e) => return super::internal(e),
    };
    let mut afk = resolved_rows(
        &crate::resolve::resolve_afk(&repo, &global, None).unwrap_or_else(|_| {
            resolve(
                p,
                RunKind::Afk,
                &global,
                &repo.defaults,
                &Request::default(),
            )
        }),
    );
    afk.extend(knob_rows(&crate::resolve::run_knobs(
        crate::resolve::KnobContext {
            repo: &repo,
            settings: &settings,
        },
        None,
    )));
    let kinds = [RunKind::Plan, RunKind::Review]
        .into_iter()
        .filter_map(|kind| {
            let r = crate::resolve::resolve_kind(&repo, &settings, kind, None).ok()?;
            let title = match kind {
                RunKind::Plan => "Plan run",
                _ => "Review run",
            };
            Some((
                format!("{title} (on {})", r.provider),
                kind.as_str(),
                resolved_rows(&r),
            ))
        })
        .collect();
    let config_file = Some(repo.config.clone()).filter(|c| c.file.is_some() || c.error.is_some());
    let config_entries = repo.file().map(|f| f.entries()).unwrap_or_default();
    let sections = sections(&repo, p, &global, &settings, form, &mut errors);
    // The forge account is read once (and not waited for long).
    let sources = &app.scheduler.sources();
    if sources.known_identity(&repo).is_none() {
        let _ =
            tokio::time::timeout(std::time::Duration::from_secs(3), sources.identity(&repo)).await;
    }
    let forge_identity = sources.known_identity(&repo);
    let status = if form.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    Page::render(
        status,
        &RepoPage {
            chrome: Chrome::new(session, "repos", &repo.name),
            repo,
            forge_identity,
            sections,
            manual,
            afk,
            kinds,
            config_file,
            config_entries,
            saved,
            problems: errors.rest(),
            failed: form.is_some(),
        },
    )
}

async fn show(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(name): Path<String>,
    Query(q): Query<Saved>,
) -> Response {
    render_repo(
        &app,
        &session,
        &RepoKey::parse(&name),
        None,
        FormErrors::default(),
        q.saved.is_some(),
    )
    .await
}

/// A repo whose stored provider this lab does not know (a database edited
/// by hand, or written by a newer lab): its page names the id and the fix
/// rather than showing another provider's options.
fn unknown_provider(repo: &str, e: &crate::validate::FieldError) -> Response {
    Page::error(
        StatusCode::CONFLICT,
        &format!(
            "Repo '{repo}': {}. Set one with: labctl repo set {repo} --provider ID",
            e.message
        ),
    )
}

async fn save(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(name): Path<String>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    let key = RepoKey::parse(&name);
    let p = match app.store.repo(&key).await {
        Ok(r) => match r.provider() {
            Ok(p) => p,
            Err(e) => return unknown_provider(&r.name, &e),
        },
        Err(crate::store::StoreError::NotFound) => {
            return Page::error(StatusCode::NOT_FOUND, &format!("There is no repo '{key}'."));
        }
        Err(e) => return super::internal(e),
    };
    let result = match patch_from(&form, Some(p.provider())) {
        Ok(patch) => {
            service::repos::update(&app.store, app.scheduler.sources(), &key, &patch).await
        }
        Err(i) => Err(i.into()),
    };
    match result {
        Ok(repo) => Redirect::to(&format!("/repos/{}?saved=1", repo.name)).into_response(),
        Err(e) => match field_errors(e) {
            Ok(errors) => render_repo(&app, &session, &key, Some(&form), errors, false).await,
            Err(e) => super::service_error(e),
        },
    }
}

async fn delete(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(name): Path<String>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    match service::repos::remove(&app.store, &app.runner, &RepoKey::parse(&name)).await {
        Ok(()) => Redirect::to("/repos").into_response(),
        Err(e) => super::service_error(e),
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/repos", get(list).post(create))
        .route("/repos/{name}", get(show).post(save))
        .route("/repos/{name}/delete", post(delete))
}
