//! Repo pages: the list with a create form, and each repo's settings with
//! the values its runs would get (from the resolver).

use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::forms::{Errors, Field, Form, Kind, Section, select};
use super::settings_page::{change, number, option_fields, options_patch};
use super::{Chrome, Page, Session};
use crate::http::AppState;
use crate::http::error::ApiError;
use crate::provider::{self, Provider};
use crate::repo::{self, Repo, RepoPatch};
use crate::resolve::{Defaults, Request, Resolved, RunKind, Sourced, resolve};
use crate::settings::{Change, DefaultsPatch};
use crate::store::RepoKey;
use crate::validate::{Errors as FieldErrors, FieldError, Invalid};

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
        from: s.source.describe().to_owned(),
    }
}

pub fn resolved_rows(r: &Resolved) -> Vec<Shown> {
    let mut v = vec![shown("model", &r.model), shown("effort", &r.effort)];
    v.extend(r.options.iter().map(|(k, s)| shown(k, s)));
    v
}

#[derive(Template)]
#[template(path = "repos.html")]
struct ReposPage {
    chrome: Chrome,
    repos: Vec<Repo>,
    create: Vec<Field>,
    problems: Vec<String>,
    failed: bool,
}

#[derive(Template)]
#[template(path = "repo.html")]
struct RepoPage {
    chrome: Chrome,
    repo: Repo,
    sections: Vec<Section>,
    manual: Vec<Shown>,
    afk: Vec<Shown>,
    saved: bool,
    problems: Vec<String>,
    failed: bool,
}

fn text(name: &str, label: &str, value: String, placeholder: &str) -> Field {
    Field::new(
        name,
        label,
        Kind::Text {
            value,
            placeholder: placeholder.to_owned(),
        },
    )
}

fn provider_choice(current: &str) -> Kind {
    let ids = provider::ids();
    select(None, &ids, current)
}

fn create_fields(form: Option<&Form>, errors: &mut Errors) -> Vec<Field> {
    let v = |n: &str| form.and_then(|f| f.get(n)).unwrap_or("").to_owned();
    let provider = form
        .and_then(|f| f.get("provider"))
        .unwrap_or(provider::DEFAULT_PROVIDER);
    vec![
        text("name", "Name", v("name"), "my-repo")
            .help("Letters, digits, '.', '_' and '-'.")
            .error_from(errors),
        text("path", "Local path", v("path"), "/srv/src/my-repo")
            .help("A git repository on the lab server…")
            .error_from(errors),
        text(
            "url",
            "or clone URL",
            v("url"),
            "https://git.example.com/me/my-repo.git",
        )
        .help("…or a URL lab clones (and keeps a mirror of).")
        .error_from(errors),
        text(
            "default_branch",
            "Default branch",
            form.map_or("main".into(), |_| v("default_branch")),
            "main",
        )
        .error_from(errors),
        Field::new("provider", "Provider", provider_choice(provider)).error_from(errors),
    ]
}

/// What a repo value would be without the repo's own setting.
fn inherited(
    p: &dyn Provider,
    global: &Defaults,
    repo: &Defaults,
    kind: RunKind,
    clear: impl Fn(&mut Defaults),
) -> Resolved {
    let mut without = repo.clone();
    clear(&mut without);
    resolve(p, kind, global, &without, &Request::default())
}

fn same_as(s: &Sourced) -> String {
    format!("same as default: {} ({})", s.value, s.source.describe())
}

fn sections(
    repo: &Repo,
    global: &Defaults,
    form: Option<&Form>,
    errors: &mut Errors,
) -> Vec<Section> {
    let p = repo.provider().unwrap_or_else(|_| provider::all()[0]);
    let d = &repo.defaults;
    let v = |name: &str, stored: Option<&str>| match form {
        Some(f) => f.get(name).unwrap_or("").to_owned(),
        None => stored.unwrap_or("").to_owned(),
    };
    let manual_model = inherited(p, global, d, RunKind::Manual, |x| x.model_default = None).model;
    let manual_effort =
        inherited(p, global, d, RunKind::Manual, |x| x.effort_default = None).effort;
    let afk_model = inherited(p, global, d, RunKind::Afk, |x| x.afk_model_default = None).model;
    let afk_effort = inherited(p, global, d, RunKind::Afk, |x| x.afk_effort_default = None).effort;
    let inherit_option = |key: &str| {
        let r = inherited(p, global, d, RunKind::Afk, |x| {
            x.afk_options.remove(key);
        });
        match r.options.get(key) {
            Some(s) => {
                let value = match s.value.as_str() {
                    "true" => "on",
                    "false" => "off",
                    other => other,
                };
                format!("inherit: {value} ({})", s.source.describe())
            }
            None => "inherit".to_owned(),
        }
    };
    let enabled = match form {
        Some(f) => f.get("afk_enabled") == Some("true"),
        None => repo.afk_enabled,
    };
    let mut afk = vec![
        Field::new(
            "afk_enabled",
            "Let the AFK scheduler take this repo's issues",
            Kind::Checkbox(enabled),
        )
        .error_from(errors),
        text(
            "afk_label",
            "Label of ready issues",
            v("afk_label", Some(&repo.afk_label)),
            repo::DEFAULT_AFK_LABEL,
        )
        .error_from(errors),
        Field::new(
            "afk_max_concurrent",
            "Most AFK runs at once",
            Kind::Number {
                value: v(
                    "afk_max_concurrent",
                    Some(&repo.afk_max_concurrent.to_string()),
                ),
                min: repo::AFK_MAX_CONCURRENT.0,
                max: repo::AFK_MAX_CONCURRENT.1,
            },
        )
        .error_from(errors),
        Field::new(
            "afk_model_default",
            "AFK model",
            select(
                Some(same_as(&afk_model)),
                p.models(),
                &v("afk_model_default", d.afk_model_default.as_deref()),
            ),
        )
        .error_from(errors),
        Field::new(
            "afk_effort_default",
            "AFK effort",
            select(
                Some(same_as(&afk_effort)),
                p.efforts(),
                &v("afk_effort_default", d.afk_effort_default.as_deref()),
            ),
        )
        .error_from(errors),
    ];
    afk.extend(option_fields(p, "", d, v, Some(&inherit_option), errors));
    vec![
        Section {
            title: "Repository".into(),
            intro: String::new(),
            fields: vec![
                text("name", "Name", v("name", Some(&repo.name)), "").error_from(errors),
                text("path", "Local path", v("path", repo.path()), "").error_from(errors),
                text("url", "or clone URL", v("url", repo.url()), "").error_from(errors),
                text(
                    "default_branch",
                    "Default branch",
                    v("default_branch", Some(&repo.default_branch)),
                    "main",
                )
                .error_from(errors),
                Field::new(
                    "provider",
                    "Provider",
                    provider_choice(&v("provider", Some(&repo.provider))),
                )
                .help("Changing it reports the values below that do not fit the new provider.")
                .error_from(errors),
            ],
        },
        Section {
            title: "Defaults".into(),
            intro: "What a manual start is pre-filled with, and what AFK runs fall back to.".into(),
            fields: vec![
                Field::new(
                    "model_default",
                    "Model",
                    select(
                        Some(same_as(&manual_model)),
                        p.models(),
                        &v("model_default", d.model_default.as_deref()),
                    ),
                )
                .error_from(errors),
                Field::new(
                    "effort_default",
                    "Effort",
                    select(
                        Some(same_as(&manual_effort)),
                        p.efforts(),
                        &v("effort_default", d.effort_default.as_deref()),
                    ),
                )
                .error_from(errors),
            ],
        },
        Section {
            title: "Issues".into(),
            intro: "Where AFK work comes from: lab's own tracker, or a forge.".into(),
            fields: vec![
                Field::new(
                    "issue_source",
                    "Issue source",
                    select(
                        None,
                        crate::issues::config::SOURCE_KINDS,
                        &v("issue_source", Some(repo.issues.source.as_str())),
                    ),
                )
                .help("gitea also serves Forgejo.")
                .error_from(errors),
                text(
                    "forge_url",
                    "Forge URL",
                    v("forge_url", repo.issues.forge_url.as_deref()),
                    "https://git.example.com",
                )
                .error_from(errors),
                text(
                    "forge_repo",
                    "Forge repository",
                    v("forge_repo", repo.issues.forge_repo.as_deref()),
                    "owner/name",
                )
                .error_from(errors),
                Field::new("forge_token", "Forge token", Kind::Password)
                    .help(match repo.issues.token_hint() {
                        Some(h) => format!("A token is stored ({h}); leave empty to keep it."),
                        None => {
                            "Or set LAB_GITEA_TOKEN / LAB_GITHUB_TOKEN for lab. Runs never see it."
                                .to_owned()
                        }
                    })
                    .error_from(errors),
            ],
        },
        Section {
            title: "AFK".into(),
            intro: "What AFK runs of this repo use. An empty choice inherits the value it names."
                .into(),
            fields: afk,
        },
    ]
}

/// The patch a repo form posts: every field it shows is set (empty clears).
/// The create form shows only the repository's own fields.
fn patch_from(form: &Form, p: &dyn Provider, editing: bool) -> Result<RepoPatch, Invalid> {
    let mut errs = FieldErrors::default();
    let set_if = |name: &str| form.value(name).map_or(Change::Keep, Change::Set);
    let (path, url) = (set_if("path"), set_if("url"));
    if editing && path.is_keep() && url.is_keep() {
        errs.push(FieldError::new(
            "path",
            "a repo needs a local path or a clone URL",
        ));
    }
    let mut patch = RepoPatch {
        name: set_if("name"),
        path,
        url,
        default_branch: change(form, "default_branch"),
        provider: change(form, "provider"),
        ..RepoPatch::default()
    };
    if editing {
        patch.defaults = DefaultsPatch {
            model_default: change(form, "model_default"),
            effort_default: change(form, "effort_default"),
            afk_model_default: change(form, "afk_model_default"),
            afk_effort_default: change(form, "afk_effort_default"),
            afk_options: options_patch(p, "", form, false),
        };
        if form.has("afk_enabled.shown") {
            patch.afk_enabled = Change::Set(form.get("afk_enabled") == Some("true"));
        }
        patch.afk_label = change(form, "afk_label");
        patch.afk_max_concurrent = number(form, "afk_max_concurrent", &mut errs);
        patch.issues = crate::issues::config::IssueConfigPatch {
            source: change(form, "issue_source"),
            forge_url: change(form, "forge_url"),
            forge_repo: change(form, "forge_repo"),
            // An empty password field keeps the stored token.
            forge_token: set_if("forge_token"),
        };
    }
    errs.finish()?;
    Ok(patch)
}

/// Splits an API error into field errors (shown inline), or hands it back
/// for an error page.
fn field_errors(e: ApiError) -> Result<Errors, Box<ApiError>> {
    if e.status == StatusCode::BAD_REQUEST && !e.errors.is_empty() {
        Ok(Errors::from(Invalid(e.errors)))
    } else if e.status == StatusCode::CONFLICT || e.status == StatusCode::BAD_REQUEST {
        Ok(Errors([("name".to_owned(), e.message)].into()))
    } else {
        Err(Box::new(e))
    }
}

async fn list(State(app): State<AppState>, session: Session) -> Response {
    let repos = match app.store.repos().await {
        Ok(r) => r,
        Err(e) => return super::internal(e),
    };
    let mut errors = Errors::default();
    Page::ok(&ReposPage {
        chrome: Chrome::new(&session, "repos", "Repos"),
        repos,
        create: create_fields(None, &mut errors),
        problems: Vec::new(),
        failed: false,
    })
}

async fn create(State(app): State<AppState>, session: Session, form: Form) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    let result = match patch_from(&form, provider::all()[0], false) {
        Ok(patch) => crate::http::repos::create(&app, &patch).await,
        Err(i) => Err(ApiError::invalid(i)),
    };
    let mut errors = match result {
        Ok(repo) => return Redirect::to(&format!("/repos/{}?saved=1", repo.name)).into_response(),
        Err(e) => match field_errors(e) {
            Ok(errors) => errors,
            Err(e) => return Page::error(e.status, &e.message),
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
    session: &Session,
    key: &RepoKey,
    form: Option<&Form>,
    mut errors: Errors,
    saved: bool,
) -> Response {
    let (repo, global) = match app.store.repo_with_global(key).await {
        Ok(x) => x,
        Err(crate::store::StoreError::NotFound) => {
            return Page::error(StatusCode::NOT_FOUND, &format!("There is no repo '{key}'."));
        }
        Err(e) => return super::internal(e),
    };
    let p = repo.provider().unwrap_or_else(|_| provider::all()[0]);
    let manual = resolved_rows(&resolve(
        p,
        RunKind::Manual,
        &global,
        &repo.defaults,
        &Request::default(),
    ));
    let afk = resolved_rows(&resolve(
        p,
        RunKind::Afk,
        &global,
        &repo.defaults,
        &Request::default(),
    ));
    let sections = sections(&repo, &global, form, &mut errors);
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
            sections,
            manual,
            afk,
            saved,
            problems: errors.rest(),
            failed: form.is_some(),
        },
    )
}

async fn show(
    State(app): State<AppState>,
    session: Session,
    Path(name): Path<String>,
    Query(q): Query<Saved>,
) -> Response {
    render_repo(
        &app,
        &session,
        &RepoKey::parse(&name),
        None,
        Errors::default(),
        q.saved.is_some(),
    )
    .await
}

async fn save(
    State(app): State<AppState>,
    session: Session,
    Path(name): Path<String>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    let key = RepoKey::parse(&name);
    let p = match app.store.repo(&key).await {
        Ok(r) => r.provider().unwrap_or_else(|_| provider::all()[0]),
        Err(_) => return Page::error(StatusCode::NOT_FOUND, &format!("There is no repo '{key}'.")),
    };
    let result = match patch_from(&form, p, true) {
        Ok(patch) => crate::http::repos::update(&app, &key, &patch).await,
        Err(i) => Err(ApiError::invalid(i)),
    };
    match result {
        Ok(repo) => Redirect::to(&format!("/repos/{}?saved=1", repo.name)).into_response(),
        Err(e) => match field_errors(e) {
            Ok(errors) => render_repo(&app, &session, &key, Some(&form), errors, false).await,
            Err(e) => Page::error(e.status, &e.message),
        },
    }
}

async fn delete(
    State(app): State<AppState>,
    session: Session,
    Path(name): Path<String>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    match crate::http::repos::remove(&app, &RepoKey::parse(&name)).await {
        Ok(()) => Redirect::to("/repos").into_response(),
        Err(e) => Page::error(e.status, &e.message),
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/repos", get(list).post(create))
        .route("/repos/{name}", get(show).post(save))
        .route("/repos/{name}/delete", post(delete))
}
