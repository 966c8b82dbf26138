//! A run's changes (`/runs/{id}/changes`), and a repo's pull requests:
//! the list, one with its diff, merge and close (built-in tracker).

use askama::Template;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use super::{Chrome, Page, diff_view};
use crate::auth::browser::BrowserSession;
use crate::diff::Limits;
use crate::domain::Run;
use crate::issues::PullRequest;
use crate::repo::issue_source::SourceKind;
use crate::service::ServiceError;
use crate::service::pulls::{self, PullView};
use crate::state::AppState;
use crate::store::{RepoKey, StoreError};

use super::forms::Form;

#[derive(Template)]
#[template(path = "changes.html")]
struct ChangesPage {
    chrome: Chrome,
    run: Run,
    live: bool,
    /// The diff as HTML, or why there is none.
    diff: String,
    problem: Option<String>,
    signature: String,
}

async fn changes(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(id): Path<String>,
) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return Page::error(StatusCode::NOT_FOUND, "Run ids are numbers.");
    };
    let run = match app.store.run(id).await {
        Ok(r) => r,
        Err(StoreError::NotFound) => {
            return Page::error(StatusCode::NOT_FOUND, &format!("There is no run {id}."));
        }
        Err(e) => return super::internal(e),
    };
    let (diff, problem, signature) =
        match pulls::run_diff(&app.scheduler, id, Limits::default()).await {
            Ok(d) => (diff_view::render(&d), None, diff_view::signature(&d)),
            Err(ServiceError::Internal(e)) => return super::internal(e),
            Err(e) => (String::new(), Some(e.to_string()), String::new()),
        };
    Page::ok(&ChangesPage {
        chrome: Chrome::new(&session, "runs", &format!("Run {id}: changes")),
        live: run.state.is_active(),
        run,
        diff,
        problem,
        signature,
    })
}

#[derive(Template)]
#[template(path = "pulls.html")]
struct PullsPage {
    chrome: Chrome,
    repo: String,
    builtin: bool,
    pulls: Vec<PullRequest>,
}

async fn list(
    State(app): State<AppState>,
    session: BrowserSession,
    Path(name): Path<String>,
) -> Response {
    let repo = match app.store.repo(&RepoKey::parse(&name)).await {
        Ok(r) => r,
        Err(StoreError::NotFound) => {
            return Page::error(
                StatusCode::NOT_FOUND,
                &format!("There is no repo '{name}'."),
            );
        }
        Err(e) => return super::internal(e),
    };
    let source = app.scheduler.sources().of(&repo);
    let pulls = match source.pulls().await {
        Ok(p) => p,
        Err(e) => return Page::error(StatusCode::BAD_GATEWAY, &e.to_string()),
    };
    Page::ok(&PullsPage {
        chrome: Chrome::new(&session, "repos", &format!("{}: pull requests", repo.name)),
        builtin: repo.issues.source == SourceKind::Builtin,
        repo: repo.name,
        pulls,
    })
}

#[derive(Template)]
#[template(path = "pull.html")]
struct PullPage {
    chrome: Chrome,
    repo: String,
    builtin: bool,
    default_branch: String,
    view: PullView,
    diff: String,
    /// Why the last merge or close was refused.
    refused: Option<String>,
    /// What its run's checks said (issue 14): the claim's `checks` and
    /// rounds; `None` when lab followed none.
    checks: Option<(String, i64)>,
    /// A forge pull request's checks, as the forge says them now.
    forge_checks: Option<String>,
    /// Its run's receipt, when an AFK run opened it (issue 28 §5).
    receipt: Option<ReceiptView>,
    /// The verdicts of its issue's review runs on it (issue 28 §3).
    reviews: Vec<super::issue_page::ReviewView>,
}

/// A receipt as the page shows it: lab's words, escaped by the template.
struct ReceiptView {
    /// `(label, value)` rows: the issue, the resolved values and knobs with
    /// where each came from, the scope, the attempt, usage, the outcome.
    facts: Vec<(String, String)>,
    /// One line per round: its number and what started it.
    rounds: Vec<String>,
    /// One line per check: round, command, how it ended, how long; and the
    /// end of its output.
    checks: Vec<(String, String)>,
}

impl ReceiptView {
    fn new(r: crate::service::receipt::Receipt) -> ReceiptView {
        use crate::domain::{Step, rfc3339};
        let run = &r.run;
        let mut facts = vec![
            ("provider".to_owned(), run.provider.clone()),
            (
                "model".to_owned(),
                format!("{} (from {})", run.model.value, run.model.layer),
            ),
            (
                "effort".to_owned(),
                format!("{} (from {})", run.effort.value, run.effort.layer),
            ),
        ];
        for k in &run.knobs {
            facts.push((
                format!("knob {}", k.key),
                format!("{} (from {})", k.value.shown(), k.source.as_str()),
            ));
        }
        let scope = match &r.scope {
            crate::service::receipt::ScopeCheck::Outside { count, .. } => {
                format!("{count} path(s) outside {}", r.scope.globs().join(", "))
            }
            s if s.globs().is_empty() => "unrestricted".to_owned(),
            s => format!("{} ({})", s.state(), s.globs().join(", ")),
        };
        facts.push((
            "plan".to_owned(),
            match r.approved_plan() {
                None => "none (the issue was not planned first)".to_owned(),
                Some(p) => format!(
                    "version {} approved by {} at {}{}",
                    p.version,
                    p.by(),
                    rfc3339(p.at()),
                    match r.rejected_plans() {
                        0 => String::new(),
                        n => format!(", after {n} rejected version(s)"),
                    }
                ),
            },
        ));
        facts.push(("scope".to_owned(), scope));
        facts.push(("attempt".to_owned(), r.claim.attempt.to_string()));
        if let Some(u) = &run.usage {
            facts.push((
                "used".to_owned(),
                format!(
                    "{} tokens, {}, {} turn(s)",
                    u.input_tokens
                        + u.output_tokens
                        + u.cache_read_tokens
                        + u.cache_creation_tokens,
                    crate::domain::compact_cost(u.cost_usd()),
                    u.turns
                ),
            ));
        }
        for v in &r.reviews {
            // The verdict and its counts; the findings are on the issue.
            let blocking = v.blocking().count();
            facts.push((
                format!("review of round {}", v.round),
                format!(
                    "{} by run {} ({blocking} blocking, {} advisory) at {}",
                    v.verdict,
                    v.run_id,
                    v.findings.len() - blocking,
                    rfc3339(v.created_at)
                ),
            ));
        }
        if let Some(o) = r.claim.outcome {
            facts.push(("outcome".to_owned(), o.to_string()));
        }
        let rounds = r
            .rounds()
            .into_iter()
            .map(|(round, cause, at)| format!("round {round}: {cause}, started {}", rfc3339(at)))
            .collect();
        let mut checks = Vec::new();
        for (at, step) in &r.steps {
            match step {
                Step::Round(_) => {}
                Step::Check(c) => checks.push((
                    format!(
                        "round {}: `{}` {} in {:.1} s, at {}",
                        c.round,
                        c.command,
                        match c.status {
                            Some(0) => "passed".to_owned(),
                            Some(n) => format!("failed ({n})"),
                            None => "did not finish".to_owned(),
                        },
                        c.duration_ms as f64 / 1000.0,
                        rfc3339(*at)
                    ),
                    c.output_tail.clone(),
                )),
            }
        }
        ReceiptView {
            facts,
            rounds,
            checks,
        }
    }
}

/// A forge's checks in a few words: `passed`, `running`, `none reported`,
/// or `failed: ` and the failing checks' names.
fn forge_checks_text(c: &crate::issues::CheckState) -> String {
    use crate::issues::CheckState;
    match c {
        CheckState::None => "none reported".into(),
        CheckState::Pending => "running".into(),
        CheckState::Green => "passed".into(),
        CheckState::Red(f) => format!(
            "failed: {}",
            f.iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        CheckState::Blocked(f) => format!(
            "waiting for a person: {}",
            f.iter()
                .map(|f| f.text.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

async fn pull_page(
    app: &AppState,
    session: &BrowserSession,
    name: &str,
    number: &str,
    refused: Option<String>,
) -> Response {
    let Ok(number) = number.parse::<i64>() else {
        return Page::error(StatusCode::NOT_FOUND, "Pull request numbers are numbers.");
    };
    let (repo, view) = match pulls::view(&app.scheduler, name, number, true).await {
        Ok(v) => v,
        Err(e) => return super::service_error(e),
    };
    let builtin = repo.issues.source == SourceKind::Builtin;
    // A forge's pull request: its checks as the forge says them now.
    let forge_checks = if builtin {
        None
    } else {
        Some(
            match app.scheduler.sources().of(&repo).pull_status(number).await {
                Ok(st) => forge_checks_text(&st.checks),
                Err(e) => format!("the forge did not say: {e}"),
            },
        )
    };
    let claim = match view.pull.run_id {
        Some(run) => app.store.claim_of_run(run).await.ok().flatten(),
        None => None,
    };
    let reviews = match &claim {
        Some(c) => app
            .store
            .reviews_of_claim(c.id)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(super::issue_page::ReviewView::from)
            .collect(),
        None => Vec::new(),
    };
    let checks = claim.and_then(|c| c.checks.map(|k| (k, c.rounds)));
    let receipt = match view.pull.run_id {
        Some(run) => crate::service::receipt::of_run(app.scheduler.runner(), run)
            .await
            .ok()
            .map(ReceiptView::new),
        None => None,
    };
    let status = if refused.is_some() {
        StatusCode::CONFLICT
    } else {
        StatusCode::OK
    };
    Page::render(
        status,
        &PullPage {
            chrome: Chrome::new(
                session,
                "repos",
                &format!("{} #{}: {}", repo.name, number, view.pull.title),
            ),
            builtin,
            forge_checks,
            reviews,
            default_branch: repo.default_branch.clone(),
            repo: repo.name,
            diff: view
                .diff
                .as_ref()
                .map(diff_view::render)
                .unwrap_or_default(),
            view,
            refused,
            checks,
            receipt,
        },
    )
}

async fn show(
    State(app): State<AppState>,
    session: BrowserSession,
    Path((name, number)): Path<(String, String)>,
) -> Response {
    pull_page(&app, &session, &name, &number, None).await
}

/// Merge or close from the page: a refusal shows the page again with the
/// reason (409), nothing changed.
async fn act(
    app: AppState,
    session: BrowserSession,
    name: String,
    number: String,
    form: Form,
    merge: bool,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    let Ok(n) = number.parse::<i64>() else {
        return Page::error(StatusCode::NOT_FOUND, "Pull request numbers are numbers.");
    };
    let done = if merge {
        pulls::merge(&app.scheduler, &name, n).await.map(|_| ())
    } else {
        pulls::close(&app.scheduler, &name, n).await.map(|_| ())
    };
    match done {
        Ok(()) => Redirect::to(&format!("/repos/{name}/pulls/{n}")).into_response(),
        Err(ServiceError::Conflict(m)) => pull_page(&app, &session, &name, &number, Some(m)).await,
        Err(e) => super::service_error(e),
    }
}

async fn merge(
    State(app): State<AppState>,
    session: BrowserSession,
    Path((name, number)): Path<(String, String)>,
    form: Form,
) -> Response {
    act(app, session, name, number, form, true).await
}

async fn close(
    State(app): State<AppState>,
    session: BrowserSession,
    Path((name, number)): Path<(String, String)>,
    form: Form,
) -> Response {
    act(app, session, name, number, form, false).await
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/runs/{id}/changes", get(changes))
        .route("/repos/{name}/pulls", get(list))
        .route("/repos/{name}/pulls/{number}", get(show))
        .route("/repos/{name}/pulls/{number}/merge", post(merge))
        .route("/repos/{name}/pulls/{number}/close", post(close))
}
