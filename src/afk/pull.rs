//! Opening a run's pull request (`labctl pr create` inside the run): lab
//! pushes the branch to a forge with its own credentials, or records it in
//! the built-in tracker, and notes it on the run's AFK claim.

use std::sync::Arc;

use base64::Engine;

use crate::domain::Run;
use crate::issues::config::{GITHUB_API, SourceKind};
use crate::issues::{NewPull, PullRequest, SourceError, forge_token, source_for};
use crate::repo::Repo;
use crate::run::Runner;
use crate::store::{RepoKey, StoreError};
use crate::validate::{self, Invalid};

#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Push(String),
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn check(title: &str, body: &str) -> Result<(String, String), Invalid> {
    let mut errs = validate::Errors::default();
    let title = errs.check(validate::title("title", title));
    let body = errs.check(validate::text("body", body));
    errs.finish()?;
    Ok((title.unwrap_or_default(), body.unwrap_or_default()))
}

/// Where a forge repo's branches are pushed: the repo's clone URL, or the
/// forge's.
fn push_url(repo: &Repo) -> Option<String> {
    if let Some(u) = repo.url() {
        return Some(u.to_owned());
    }
    let base = repo.issues.forge_url.as_deref()?;
    let name = repo.issues.forge_repo.as_deref()?;
    let web = match repo.issues.source {
        SourceKind::Github if base == GITHUB_API => "https://github.com".to_owned(),
        SourceKind::Github => base.trim_end_matches("/api/v3").to_owned(),
        _ => base.to_owned(),
    };
    Some(format!("{web}/{name}.git"))
}

/// The HTTP header git sends to the forge.
fn auth_header(repo: &Repo) -> Option<String> {
    let token = forge_token(repo)?;
    let user = if repo.issues.source == SourceKind::Github {
        "x-access-token"
    } else {
        "lab"
    };
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{token}"));
    Some(format!("Authorization: Basic {basic}"))
}

/// Opens the pull request of a run's branch against the repo's default
/// branch. One per run: a run that already opened one, or is opening one
/// right now, is told so. The work runs as a task of its own, so a caller
/// that goes away cannot leave a pull request opened but not noted.
pub async fn open(
    runner: &Arc<Runner>,
    run: &Run,
    title: &str,
    body: &str,
) -> Result<PullRequest, PullError> {
    let (title, body) = check(title, body)?;
    let runner = runner.clone();
    let run = run.clone();
    crate::to_the_end(async move {
        let Some(_opening) = runner.opening_pull.enter(run.id) else {
            return Err(PullError::Conflict(format!(
                "run {} is already opening a pull request",
                run.id
            )));
        };
        open_now(&runner, &run, title, body).await
    })
    .await
}

async fn open_now(
    runner: &Runner,
    run: &Run,
    title: String,
    body: String,
) -> Result<PullRequest, PullError> {
    let store = &runner.store;
    let repo_id = run.repo_id.ok_or_else(|| {
        PullError::Conflict(format!("run {}'s repo was removed from lab", run.id))
    })?;
    let repo = store.repo(&RepoKey::Id(repo_id)).await?;
    let branch = run
        .branch
        .clone()
        .ok_or_else(|| PullError::Conflict(format!("run {} has no branch", run.id)))?;
    let claim = store.claim_of_run(run.id).await?;
    let opened = match claim.as_ref().and_then(|c| c.pr_url.clone()) {
        Some(url) => Some(url),
        None => store.pull_of_run(run.id).await?,
    };
    if let Some(url) = opened {
        return Err(PullError::Conflict(format!(
            "run {} already opened a pull request: {url}",
            run.id
        )));
    }
    let source = source_for(&repo, runner);
    if source.kind() != SourceKind::Builtin {
        let remote = push_url(&repo)
            .ok_or_else(|| PullError::Push("the repo has no URL to push to".into()))?;
        runner
            .workspaces
            .push_branch(&repo, &branch, &remote, auth_header(&repo).as_deref())
            .await
            .map_err(|e| PullError::Push(format!("could not push {branch}: {e}")))?;
    }
    let pr = source
        .create_pull(&NewPull {
            title,
            body,
            head: branch,
            base: repo.default_branch.clone(),
            issue: claim.as_ref().map(|c| c.issue_number),
            run_id: Some(run.id),
        })
        .await?;
    if let Some(c) = claim
        && !store.set_claim_pr(c.id, &pr.url).await?
    {
        return Err(PullError::Conflict(format!(
            "run {} already opened a pull request",
            run.id
        )));
    }
    tracing::info!(run = run.id, url = %pr.url, "pull request opened");
    Ok(pr)
}
