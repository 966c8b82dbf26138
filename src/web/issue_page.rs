//! One issue's page: its text, labels and comments, the AFK runs that worked
//! on it (outcome, run, cost), and what a person does with it: close,
//! reopen, give it to the AFK scheduler (the repo's ready label on or off),
//! or start a manual run from it.

use askama::Template;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

use super::forms::{Form, FormErrors};
use super::issues_page::issue_error_page;
use super::{Chrome, Page};
use crate::auth::browser::BrowserSession;
use crate::domain::Stage;
use crate::domain::{IssueState, Outcome, Usage, compact_cost, compact_tokens, rfc3339};
use crate::issues::{Issue, IssueSource};
use crate::repo::Repo;
use crate::service::issues::IssueError;
use crate::service::{ServiceError, ServiceResult, issues, plans};
use crate::state::AppState;
use crate::store::{Claim, RepoKey};

/// Who decides a plan from the pages (a person signed in with the admin
/// token).
const OPERATOR: &str = "operator";

/// One AFK run of the issue, as its page lists it.
pub struct Attempt {
    /// Which attempt of its lineage (1 for the first; a failed one is tried
    /// again up to `afk.max_attempts`).
    pub attempt: i64,
    /// Rounds its run had on its pull request.
    pub rounds: i64,
    pub run_id: Option<i64>,
    /// Its planning run, once its work run took over (issue 28 §2).
    pub plan_run: Option<i64>,
    /// The outcome; while it lives, the stage: `planning`, `plan-review`
    /// or `live` (at work).
    pub outcome: String,
    pub detail: String,
    pub cost: String,
    pub tokens: String,
    pub started: String,
    pub pr_url: Option<String>,
}

/// One AFK run of an issue, from its claim and its run's usage.
fn attempt(c: Claim, usage: Option<Usage>) -> Attempt {
    let (cost, tokens) = usage_cells(usage.as_ref());
    Attempt {
        attempt: c.attempt,
        rounds: c.rounds,
        run_id: c.run_id,
        plan_run: c.plan_run_id,
        outcome: match (c.active, c.stage) {
            (true, Stage::Plan) => "planning".to_owned(),
            (true, Stage::PlanReview) => "plan-review".to_owned(),
            _ => outcome_text(c.active, c.outcome),
        },
        detail: first_line(c.detail.as_deref()),
        cost,
        tokens,
        started: short_time(c.started_at.unwrap_or(c.claimed_at)),
        pr_url: c.pr_url,
    }
}

/// A claim's outcome, or `live` while its run works.
fn outcome_text(active: bool, outcome: Option<Outcome>) -> String {
    match (active, outcome) {
        (false, Some(o)) => o.as_str().into(),
        _ => "live".into(),
    }
}

/// An outcome's detail as the table shows it: its first line (the rest is
/// in the issue's comment and on the run's page).
fn first_line(detail: Option<&str>) -> String {
    detail
        .and_then(|d| d.lines().next())
        .map(|l| l.chars().take(DETAIL).collect())
        .unwrap_or_default()
}

/// A run's cost and tokens, compact; `-` before lab has read any.
fn usage_cells(usage: Option<&Usage>) -> (String, String) {
    match usage {
        Some(u) => (compact_cost(u.cost_usd()), compact_tokens(u.tokens())),
        None => ("-".into(), "-".into()),
    }
}

/// The most characters of an outcome's detail the runs table shows.
const DETAIL: usize = 120;

fn short_time(ms: i64) -> String {
    rfc3339(ms).replace('T', " ").chars().take(16).collect()
}

#[derive(Template)]
#[template(path = "issue.html")]
struct IssuePage {
    chrome: Chrome,
    repo: String,
    source: &'static str,
    issue: Issue,
    open: bool,
    ready_label: String,
    ready: bool,
    afk_enabled: bool,
    attempts: Vec<Attempt>,
    /// The start form, with this repo and a prompt from the issue.
    start_link: String,
    /// Its directives (issue 27) and what its AFK run gets.
    knobs: super::issue_knobs::IssueKnobs,
    /// Its plans by version (issue 28 §2), and whether one waits for a
    /// decision here.
    plans: Vec<PlanView>,
    deciding: bool,
    /// The verdicts of its review runs (issue 28 §3), oldest first.
    reviews: Vec<ReviewView>,
}

/// One review run's verdict, as the issue's page shows it: the reviewer's
/// words, escaped by the template.
pub struct ReviewView {
    pub run_id: i64,
    pub round: i64,
    pub head: String,
    pub verdict: &'static str,
    pub at: String,
    pub summary: String,
    pub findings: Vec<crate::domain::Finding>,
}

impl From<crate::domain::Review> for ReviewView {
    fn from(r: crate::domain::Review) -> ReviewView {
        ReviewView {
            run_id: r.run_id,
            round: r.round,
            head: r.head.chars().take(12).collect(),
            verdict: r.verdict.as_str(),
            at: short_time(r.created_at),
            summary: r.summary,
            findings: r.findings,
        }
    }
}

/// One version of the issue's plan, as its page shows it.
pub struct PlanView {
    pub version: i64,
    pub state: &'static str,
    pub by: String,
    pub at: String,
    pub reason: Option<String>,
    /// The planning run's words (escaped by the template).
    pub text: String,
}

impl From<crate::domain::Plan> for PlanView {
    fn from(p: crate::domain::Plan) -> PlanView {
        PlanView {
            version: p.version,
            state: p.state.as_str(),
            by: p.by(),
            at: short_time(p.at()),
            reason: p.reason.clone(),
            text: p.text,
        }
    }
}

/// The most characters of an issue's body a manual run's prompt carries;
/// the rest stays on the issue (the prompt says where).
const PROMPT_BODY: usize = 4000;

/// The first message of a manual run started from an issue: the issue's
/// title and body, and where to read the rest.
pub fn manual_prompt(repo: &str, issue: &Issue) -> String {
    let title = issue.title.lines().next().unwrap_or("");
    let mut body: String = issue.body.chars().take(PROMPT_BODY).collect();
    if body.len() < issue.body.len() {
        body.push_str("\n[…]");
    }
    format!(
        "Work on issue #{n} of {repo}: {title}\n\n{body}\n\n\
         The whole issue and its comments: `labctl issue view {n} --repo {repo}`",
        n = issue.number,
        body = body.trim_end(),
    )
}

/// The start form's address, pre-filled with a repo and a prompt.
pub fn start_link(repo: &str, prompt: &str) -> String {
    format!(
        "/runs/new?repo={}&prompt={}",
        utf8_percent_encode(repo, NON_ALPHANUMERIC),
        utf8_percent_encode(prompt, NON_ALPHANUMERIC)
    )
}

/// An issue number from a path (a whole number from 1), its repo and the
/// repo's issue source.
async fn issue_of(
    app: &AppState,
    name: &str,
    n: &str,
) -> ServiceResult<(i64, Repo, Box<dyn IssueSource>)> {
    let n =
        n.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| {
            ServiceError::NotFound("Issue numbers are whole numbers from 1.".into())
        })?;
    let (repo, source) =
        issues::source(&app.store, app.scheduler.sources(), &RepoKey::parse(name)).await?;
    Ok((n, repo, source))
}

async fn show(
    State(app): State<AppState>,
    session: BrowserSession,
    Path((name, n)): Path<(String, String)>,
) -> Response {
    render(&app, &session, &name, &n, None, FormErrors::default()).await
}

/// The issue's page; `form` and `errors` are a refused directives post's
/// (the page then answers 400 with what was typed).
async fn render(
    app: &AppState,
    session: &BrowserSession,
    name: &str,
    n: &str,
    form: Option<&Form>,
    mut errors: FormErrors,
) -> Response {
    let (n, repo, source) = match issue_of(app, name, n).await {
        Ok(x) => x,
        Err(e) => return super::service_error(e),
    };
    let issue = match source.issue(n).await {
        Ok(i) => i,
        Err(e) => return issue_error_page(e.into()),
    };
    let attempts = match issues::runs_of_issue(&app.store, repo.id, n).await {
        Ok(a) => a,
        Err(e) => return super::service_error(e),
    };
    let (settings, global) = match (
        app.store.settings().await,
        app.store.repo_with_global(&RepoKey::Id(repo.id)).await,
    ) {
        (Ok(s), Ok((_, g))) => (s, g),
        (Err(e), _) | (_, Err(e)) => return super::internal(e),
    };
    let cx = crate::resolve::KnobContext {
        repo: &repo,
        settings: &settings,
    };
    let directives = match crate::issues::directives::of(source.as_ref(), &issue, cx).await {
        Ok(d) => d,
        Err(e) => return issue_error_page(e.into()),
    };
    let claimed = attempts.iter().any(|(c, _)| c.active);
    let deciding = attempts
        .iter()
        .any(|(c, _)| c.active && c.stage == Stage::PlanReview);
    let plans = match app.store.plans_of_issue(repo.id, n).await {
        Ok(p) => p.into_iter().map(PlanView::from).collect(),
        Err(e) => return super::internal(e),
    };
    let reviews = match app.store.reviews_of_issue(repo.id, n).await {
        Ok(r) => r.into_iter().map(ReviewView::from).collect(),
        Err(e) => return super::internal(e),
    };
    let knobs = super::issue_knobs::view(
        &repo,
        &global,
        &settings,
        &issue,
        &directives,
        claimed,
        form,
        &mut errors,
    );
    let status = if form.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    Page::render(
        status,
        &IssuePage {
            chrome: Chrome::new(session, "issues", &format!("#{n} {}", issue.title)),
            source: source.kind().as_str(),
            open: issue.state == IssueState::Open,
            ready: issue.labels.iter().any(|l| l == repo.effective_label()),
            ready_label: repo.effective_label().to_owned(),
            afk_enabled: repo.afk_enabled,
            attempts: attempts
                .into_iter()
                .map(|(c, r)| attempt(c, r.and_then(|r| r.usage)))
                .collect(),
            start_link: start_link(&repo.name, &manual_prompt(&repo.name, &issue)),
            repo: repo.name,
            issue,
            knobs,
            plans,
            deciding,
            reviews,
        },
    )
}

/// What a post on an issue does: the last segment of its path.
#[derive(Clone, Copy)]
enum Act {
    Close,
    Reopen,
    Ready,
    NotReady,
    Knobs,
    ApprovePlan,
    RejectPlan,
}

impl Act {
    fn parse(s: &str) -> Option<Act> {
        Some(match s {
            "close" => Act::Close,
            "reopen" => Act::Reopen,
            "ready" => Act::Ready,
            "not-ready" => Act::NotReady,
            "knobs" => Act::Knobs,
            "plan-approve" => Act::ApprovePlan,
            "plan-reject" => Act::RejectPlan,
            _ => return None,
        })
    }
}

/// Closes, reopens, or puts the ready label on or off, then shows the issue.
async fn act(
    State(app): State<AppState>,
    session: BrowserSession,
    Path((name, n, act)): Path<(String, String, String)>,
    form: Form,
) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    let Some(act) = Act::parse(&act) else {
        return Page::error(
            StatusCode::NOT_FOUND,
            "An issue takes close, reopen, ready, not-ready, knobs, plan-approve or plan-reject.",
        );
    };
    let (n, repo, source) = match issue_of(&app, &name, &n).await {
        Ok(x) => x,
        Err(e) => return super::service_error(e),
    };
    if let Act::ApprovePlan | Act::RejectPlan = act {
        let id = repo.id.to_string();
        let decided = match act {
            Act::ApprovePlan => plans::approve(&app.scheduler, &id, n, OPERATOR).await,
            _ => {
                let reason = form.get("reason").unwrap_or_default();
                plans::reject(&app.scheduler, &id, n, OPERATOR, reason).await
            }
        };
        return match decided {
            Ok(_) => Redirect::to(&format!("/repos/{}/issues/{n}", repo.name)).into_response(),
            Err(e) => super::service_error(e),
        };
    }
    let source = source.as_ref();
    if let Act::Knobs = act {
        let input = super::issue_knobs::input(&form);
        return match issues::set_knobs(&app.store, &repo, source, n, &input).await {
            Ok(_) => Redirect::to(&format!("/repos/{}/issues/{n}", repo.name)).into_response(),
            Err(IssueError::Service(crate::service::ServiceError::Invalid(i))) => {
                render(
                    &app,
                    &session,
                    &repo.name,
                    &n.to_string(),
                    Some(&form),
                    FormErrors::from(i),
                )
                .await
            }
            Err(e) => issue_error_page(e),
        };
    }
    let done = match act {
        Act::Close => issues::set_open(source, n, false).await,
        Act::Reopen => issues::set_open(source, n, true).await,
        Act::Ready => issues::set_ready(&repo, source, n, true).await,
        Act::NotReady => issues::set_ready(&repo, source, n, false).await,
        Act::Knobs | Act::ApprovePlan | Act::RejectPlan => unreachable!("handled above"),
    };
    match done {
        Ok(_) => Redirect::to(&format!("/repos/{}/issues/{n}", repo.name)).into_response(),
        Err(e) => issue_error_page(e),
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/repos/{name}/issues/{n}", get(show))
        .route("/repos/{name}/issues/{n}/{act}", post(act))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_prompt_carries_the_issue_and_its_link_is_encoded() {
        let issue = Issue {
            number: 7,
            title: "Fix & test\nsecond".into(),
            body: "x".repeat(PROMPT_BODY + 10),
            state: IssueState::Open,
            labels: vec![],
            url: None,
            comments: vec![],
            knobs: Default::default(),
            author: None,
            author_association: None,
        };
        let p = manual_prompt("r", &issue);
        assert!(
            p.starts_with("Work on issue #7 of r: Fix & test\n\nxxx"),
            "{p}"
        );
        assert!(
            p.contains("[…]") && p.ends_with("`labctl issue view 7 --repo r`"),
            "{p}"
        );
        let link = start_link("r", "a b&c=d\n");
        assert_eq!(link, "/runs/new?repo=r&prompt=a%20b%26c%3Dd%0A");
    }

    #[test]
    fn an_attempt_shows_its_outcome_detail_cost_and_tokens() {
        let o = Outcome::ALL[0];
        assert_eq!(outcome_text(false, Some(o)), o.as_str());
        assert_eq!(outcome_text(true, None), "live");
        assert_eq!(first_line(Some("why\nand more")), "why");
        assert_eq!(first_line(Some(&"y".repeat(500))).len(), DETAIL);
        assert_eq!(first_line(None), "");
        let usage = Usage {
            input_tokens: 1000,
            output_tokens: 500,
            cost_nano_usd: Some(123_000_000),
            ..Usage::default()
        };
        assert_eq!(usage_cells(Some(&usage)), ("$0.12".into(), "1.5k".into()));
        assert_eq!(usage_cells(None), ("-".into(), "-".into()));
        assert_eq!(short_time(60_000), "1970-01-01 00:01");
    }
}
