//! Issues: a repo's list and the list across repos (filtered by state and
//! label), and the new-issue form. Every source reads through
//! `service::issues` (the built-in tracker, a forge); a forge's refusal is a
//! page that says so, never a 5xx. One issue's page is `issue_page.rs`.

use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use futures_util::future::join_all;
use serde::Deserialize;

use super::forms::{Form, FormErrors, FormField, Kind};
use super::{Chrome, Page};
use crate::auth::browser::BrowserSession;
use crate::domain::IssueFilter;
use crate::issues::{Issue, SourceError};
use crate::repo::Repo;
use crate::service::issues::{self, IssueError};
use crate::state::AppState;
use crate::store::RepoKey;
use crate::validate::{self, Errors};

/// An issue as a list shows it.
pub struct Listed {
    pub repo: String,
    pub number: i64,
    pub title: String,
    pub state: &'static str,
    pub labels: Vec<String>,
}

fn listed(repo: &Repo, i: Issue) -> Listed {
    Listed {
        repo: repo.name.clone(),
        number: i.number,
        title: i.title,
        state: i.state.as_str(),
        labels: i.labels,
    }
}

#[derive(Template)]
#[template(path = "issues.html")]
struct IssuesPage {
    chrome: Chrome,
    /// The repo, for a repo's list; `None` across repos.
    repo: Option<String>,
    state: &'static str,
    label: String,
    filter_error: Option<String>,
    issues: Vec<Listed>,
    /// Repos whose source could not be read (across repos), or the repo's.
    failures: Vec<String>,
}

#[derive(Template)]
#[template(path = "issue_new.html")]
struct NewIssuePage {
    chrome: Chrome,
    repo: String,
    fields: Vec<FormField>,
    problems: Vec<String>,
    failed: bool,
}

/// The filters of a list, as the query string gives them.
#[derive(Deserialize)]
pub struct ListQuery {
    state: Option<String>,
    label: Option<String>,
}

/// The filter and label asked for, checked as the API checks them (a blank
/// value is no filter).
fn filters(q: &ListQuery) -> Result<(IssueFilter, Option<String>), String> {
    let mut errs = Errors::default();
    let state = match q.state.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => Some(IssueFilter::Open),
        Some(s) => errs.check(validate::choice::<IssueFilter>("state", s)),
    };
    let label = match q.label.as_deref().filter(|l| !l.trim().is_empty()) {
        None => None,
        Some(l) => errs.check(validate::label("label", l)),
    };
    match errs.finish() {
        Ok(()) => Ok((state.unwrap_or(IssueFilter::Open), label)),
        Err(e) => Err(e.to_string()),
    }
}

/// A list page, empty yet, and the filters it asks for; `None` when they
/// are refused (the page then says why).
fn filtered_page(
    chrome: Chrome,
    repo: Option<String>,
    q: &ListQuery,
) -> (IssuesPage, Option<(IssueFilter, Option<String>)>) {
    let checked = filters(q);
    let page = IssuesPage {
        chrome,
        repo,
        state: checked
            .as_ref()
            .map_or(IssueFilter::Open, |(f, _)| *f)
            .as_str(),
        label: q.label.clone().unwrap_or_default(),
        filter_error: checked.as_ref().err().cloned(),
        issues: Vec::new(),
        failures: Vec::new(),
    };
    (page, checked.ok())
}

/// A source's failure as a page's status and sentence. A forge that refused
/// or could not be reached is the forge's failure, told as such (424), not
/// lab's (5xx).
pub(super) fn source_failure(e: &SourceError) -> (StatusCode, String) {
    match e {
        SourceError::NotFound(m) => (StatusCode::NOT_FOUND, m.clone()),
        SourceError::Invalid(m) => (StatusCode::BAD_REQUEST, m.clone()),
        SourceError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, e.to_string()),
        SourceError::Forge(m) | SourceError::Denied(m) => (
            StatusCode::FAILED_DEPENDENCY,
            format!("lab could not get this from the forge: {m}"),
        ),
        SourceError::Store(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "Something failed on lab's side; the server log has the cause.".into(),
        ),
    }
}

/// An issue operation's failure as an error page.
pub(super) fn issue_error_page(e: IssueError) -> Response {
    match e {
        IssueError::Service(s) => super::service_error(s),
        IssueError::Source(SourceError::Store(s)) => super::internal(s),
        IssueError::Source(s) => {
            let (status, message) = source_failure(&s);
            Page::error(status, &message)
        }
    }
}

async fn repo_list(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(name): Path<String>,
    Query(q): Query<ListQuery>,
) -> Response {
    let (repo, source) =
        match issues::source(&app.store, app.scheduler.sources(), &RepoKey::parse(&name)).await {
            Ok(x) => x,
            Err(e) => return super::service_error(e),
        };
    let chrome = Chrome::new(&session, "issues", &format!("Issues of {}", repo.name));
    let (mut page, filters) = filtered_page(chrome, Some(repo.name.clone()), &q);
    let Some((filter, label)) = filters else {
        return Page::render(StatusCode::BAD_REQUEST, &page);
    };
    match issues::list(source.as_ref(), label.as_deref(), filter).await {
        Ok(list) => {
            page.issues = list.into_iter().map(|i| listed(&repo, i)).collect();
            Page::ok(&page)
        }
        Err(SourceError::Store(e)) => super::internal(e),
        Err(e) => {
            let (status, message) = source_failure(&e);
            page.failures.push(message);
            Page::render(status, &page)
        }
    }
}

async fn all_list(
    State(app): State<AppState>,
    session: BrowserSession,
    Query(q): Query<ListQuery>,
) -> Response {
    let (mut page, filters) = filtered_page(Chrome::new(&session, "issues", "Issues"), None, &q);
    let Some((filter, label)) = filters else {
        return Page::render(StatusCode::BAD_REQUEST, &page);
    };
    let repos = match app.store.repos().await {
        Ok(r) => r,
        Err(e) => return super::internal(e),
    };
    // Every repo's source at once: a slow forge costs its own time only.
    let lists = join_all(repos.iter().map(|r| {
        let label = label.clone();
        let source = app.scheduler.sources().of(r);
        async move { issues::list(source.as_ref(), label.as_deref(), filter).await }
    }))
    .await;
    for (repo, list) in repos.iter().zip(lists) {
        match list {
            Ok(list) => page
                .issues
                .extend(list.into_iter().map(|i| listed(repo, i))),
            Err(SourceError::Store(e)) => return super::internal(e),
            Err(e) => page
                .failures
                .push(format!("{}: {}", repo.name, source_failure(&e).1)),
        }
    }
    Page::ok(&page)
}

/// The new-issue form's fields, keeping what was typed.
fn new_fields(form: Option<&Form>, errors: &mut FormErrors) -> Vec<FormField> {
    let v = |n: &str| form.and_then(|f| f.get(n)).unwrap_or("").to_owned();
    vec![
        FormField::new(
            "title",
            "Title",
            Kind::Text {
                value: v("title"),
                placeholder: "What should change".into(),
            },
        )
        .error_from(errors),
        FormField::new("body", "Description", Kind::TextArea(v("body")))
            .help("What an agent (or a person) needs to know to do it.")
            .error_from(errors),
        FormField::new(
            "labels",
            "Labels",
            Kind::Text {
                value: v("labels"),
                placeholder: "bug, docs".into(),
            },
        )
        .help("Separated by commas. The repo's ready label gives the issue to the AFK scheduler.")
        .error_from(errors),
    ]
}

/// A form's comma-separated labels, blanks left out.
fn split_labels(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

async fn new_form(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(name): Path<String>,
) -> Response {
    let repo = match app.store.repo(&RepoKey::parse(&name)).await {
        Ok(r) => r,
        Err(e) => {
            return super::service_error(crate::service::ServiceError::from_store(e, || {
                format!("repo '{name}'")
            }));
        }
    };
    Page::ok(&NewIssuePage {
        chrome: Chrome::new(&session, "issues", "New issue"),
        fields: new_fields(None, &mut FormErrors::default()),
        repo: repo.name,
        problems: Vec::new(),
        failed: false,
    })
}

async fn create(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(name): Path<String>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    let (repo, source) =
        match issues::source(&app.store, app.scheduler.sources(), &RepoKey::parse(&name)).await {
            Ok(x) => x,
            Err(e) => return super::service_error(e),
        };
    // Browsers send a text area's line breaks as CRLF.
    let body = form.get("body").unwrap_or("").replace("\r\n", "\n");
    let labels = split_labels(form.get("labels").unwrap_or(""));
    let result = issues::create(
        &app.store,
        &repo,
        source.as_ref(),
        &issues::NewIssue {
            title: form.get("title").unwrap_or(""),
            body: &body,
            labels: &labels,
            knobs: None,
        },
    )
    .await;
    let invalid = match result {
        Ok(i) => {
            return Redirect::to(&format!("/repos/{}/issues/{}", repo.name, i.number))
                .into_response();
        }
        Err(IssueError::Service(crate::service::ServiceError::Invalid(i))) => i,
        Err(e) => return issue_error_page(e),
    };
    // `labels[2]` is the form's one labels field.
    let mut errors = FormErrors::default();
    for e in invalid.0 {
        let (field, message) = match e.field.strip_prefix("labels[") {
            Some(_) => (
                "labels".to_owned(),
                format!("'{}' {}", e.value.unwrap_or_default(), e.message),
            ),
            None => (e.field, e.message),
        };
        errors.0.entry(field).or_insert(message);
    }
    Page::render(
        StatusCode::BAD_REQUEST,
        &NewIssuePage {
            chrome: Chrome::new(&session, "issues", "New issue"),
            fields: new_fields(Some(&form), &mut errors),
            repo: repo.name,
            problems: errors.rest(),
            failed: true,
        },
    )
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/issues", get(all_list))
        .route("/repos/{name}/issues", get(repo_list).post(create))
        .route("/repos/{name}/issues/new", get(new_form))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_checked_like_the_api() {
        let q = |state: &str, label: &str| ListQuery {
            state: Some(state.into()),
            label: Some(label.into()),
        };
        assert_eq!(filters(&q("", "")).unwrap(), (IssueFilter::Open, None));
        assert_eq!(
            filters(&q("all", " bug ")).unwrap(),
            (IssueFilter::All, Some("bug".into()))
        );
        let e = filters(&q("shut", "a,b")).unwrap_err();
        assert!(
            e.contains("state") && e.contains("open, closed or all"),
            "{e}"
        );
        assert!(e.contains("label") && e.contains("without commas"), "{e}");
        assert_eq!(split_labels(" a, ,b,"), vec!["a", "b"]);
    }
}
