//! Opening a run's pull request (`labctl pr create` inside the run): lab
//! pushes the branch to a forge with its own credentials, or records it in
//! the built-in tracker, and notes it on the run's AFK claim.

use std::sync::Arc;

use base64::Engine;

use super::Scheduler;
use crate::domain::Run;
use crate::issues::{NewPull, PullRequest, SourceError, forge_token};
use crate::repo::Repo;
use crate::repo::issue_source::{GITHUB_API, SourceKind};
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
    /// The branch changes paths outside the run's `writes`: what the run's
    /// token is told names the count and the globs, never the paths.
    #[error(
        "{}: lab pushes none of it and opens no pull request while it does. Undo the changes \
         outside the scope in a new commit (`git diff --name-only` against the base branch lists \
         what the branch changes), then try again",
        .0.told()
    )]
    Scope(super::scope::Breach),
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Store(#[from] StoreError),
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

/// Why a push failed, with what to do where git's answer says it (the
/// answer is the forge's, about lab's own push of the repo's copy of the
/// branch).
fn push_failure(branch: &str, git: &str) -> String {
    let fix = if git.contains("workflow") && git.contains("scope") {
        " (the change touches .github/workflows: the forge token needs the `workflow` scope, \
         or the Workflows permission of a fine-grained token)"
    } else if git.contains("stale info")
        || git.contains("non-fast-forward")
        || git.contains("fetch first")
    {
        " (the branch on the forge moved since lab last read it)"
    } else {
        ""
    };
    format!("could not push {branch}: {git}{fix}")
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

/// What lab expects of the forge's copy of a run's branch when it pushes:
/// a round's push may replace a branch the agent rewrote (a rebase onto a
/// new base), but only the one lab last saw there (`--force-with-lease`).
#[derive(Debug, Clone)]
pub enum Lease {
    /// lab does not know what the forge holds: a plain (fast-forward) push.
    Unknown,
    /// The forge's branch is at this commit (its pull request's head).
    Head(String),
}

/// Brings a run's branch where its pull request is: the branch lives in the
/// run's own clone; lab takes it into the repo (or its mirror), where the
/// built-in tracker sees it, and for a forge pushes it there with lab's
/// credentials. Also after each round on a forge (`forge_follow.rs`).
pub(super) async fn deliver(
    runner: &crate::run::Runner,
    repo: &Repo,
    run: &Run,
    branch: &str,
    lease: Lease,
) -> Result<(), PullError> {
    collect(runner, repo, run, branch).await?;
    // A branch with no commit of its own is never proposed: its pull
    // request would be empty, and "green".
    if runner.workspaces().has_own_commits(repo, branch).await == Some(false) {
        return Err(PullError::Conflict(format!(
            "{branch} has no commit that {} lacks: commit the change first (git add, git commit), then open the pull request",
            repo.default_branch
        )));
    }
    // Nothing out of the run's scope is ever pushed or proposed (issue 28
    // §4).
    if let Some(b) = super::scope::breach_of(runner, repo, run, branch)
        .await
        .map_err(PullError::Push)?
    {
        return Err(PullError::Scope(b));
    }
    if repo.issues.source != SourceKind::Builtin {
        let remote = push_url(repo)
            .ok_or_else(|| PullError::Push("the repo has no URL to push to".into()))?;
        runner
            .workspaces()
            .push_branch(
                repo,
                branch,
                &remote,
                auth_header(repo).as_deref(),
                match &lease {
                    Lease::Head(sha) => Some(sha.as_str()),
                    Lease::Unknown => None,
                },
            )
            .await
            .map_err(|e| PullError::Push(push_failure(branch, &e.0)))?;
    }
    Ok(())
}

/// Takes a run's branch from its workspace into lab's repo (or mirror).
///
/// Which side of the boundary: git over the run's workspace runs in the
/// run's jail; a failure's text may hold the agent's bytes, so what a caller
/// gets (the run's own token, an issue) is only an error id (ADR 24).
pub(super) async fn collect(
    runner: &crate::run::Runner,
    repo: &Repo,
    run: &Run,
    branch: &str,
) -> Result<(), PullError> {
    let Some(ws) = run.workspace.as_deref() else {
        return Ok(());
    };
    let jail = runner.jail(run, Some(repo));
    runner
        .workspaces()
        .collect(repo, std::path::Path::new(ws), branch, jail.as_ref())
        .await
        .map_err(|e| {
            PullError::Push(crate::run::withheld(
                run.id,
                &format!("taking {branch} from the run"),
                &e.0,
            ))
        })
}

/// Whether run `run`'s branch holds a commit its repo's default branch
/// lacks: what a manual run's page offers a pull request for (issue 40
/// §9). The branch is taken from the workspace in the run's jail first
/// ([`collect`]); the commits are then compared in lab's own repo.
pub async fn has_commits(runner: &crate::run::Runner, repo: &Repo, run: &Run) -> bool {
    let Some(branch) = run.branch.as_deref() else {
        return false;
    };
    if collect(runner, repo, run, branch).await.is_err() {
        return false;
    }
    runner
        .workspaces()
        .has_own_commits(repo, branch)
        .await
        .unwrap_or(false)
}

/// Writes the run's receipt into its forge pull request's description when
/// it changed since lab last wrote it: with `full`, usage counts too (the
/// end of the run); otherwise only rounds, checks, scope and outcome do,
/// so a run's tokens alone never cost the forge a call. What stands before
/// lab's marker (the agent's description, a person's edits) is kept. The
/// built-in tracker shows the receipt on its page instead.
pub(super) async fn write_receipt(
    runner: &crate::run::Runner,
    claims: &super::claim_state::Claims,
    source: &dyn crate::issues::IssueSource,
    claim: &crate::store::Claim,
    full: bool,
) {
    use super::receipt;
    if source.kind() == SourceKind::Builtin {
        return;
    }
    let (Some(run_id), Some(number)) = (claim.run_id, claim.pr_number) else {
        return;
    };
    let Ok(r) = receipt::of_run(runner, run_id).await else {
        return;
    };
    let (text, key) = r.markdown();
    let same = claims
        .peek(claim.id, |c| {
            c.receipt_sent
                .as_ref()
                .is_some_and(|(t, k)| if full { *t == text } else { *k == key })
        })
        .unwrap_or(false);
    if same {
        return;
    }
    let written = async {
        let now = source.pull(number).await?;
        let body = receipt::with_receipt(&now.body, &text);
        if body != now.body {
            source.set_pull_body(number, &body).await?;
        }
        Ok::<_, SourceError>(())
    };
    match written.await {
        // Only into a state still held: an answer for a claim forgotten
        // meanwhile never makes it again.
        Ok(()) => {
            claims.land(claim.id, |c| c.receipt_sent = Some((text, key)));
        }
        Err(e) => {
            tracing::warn!(claim = claim.id, error = %e, "could not write the receipt into the pull request");
        }
    }
}

/// Opens the pull request of a run's branch against the repo's default
/// branch. One per run: a run that already opened one, or is opening one
/// right now, is told so. The work runs as a task of its own, so a caller
/// that goes away cannot leave a pull request opened but not noted.
pub async fn open(
    afk: &Arc<Scheduler>,
    run: &Run,
    title: &str,
    body: &str,
) -> Result<PullRequest, PullError> {
    let (title, body) = validate::title_and_body(title, body)?;
    let afk = afk.clone();
    let run = run.clone();
    crate::to_the_end(async move {
        let Some(_opening) = afk.opening_pull.enter(run.id) else {
            return Err(PullError::Conflict(format!(
                "run {} is already opening a pull request",
                run.id
            )));
        };
        open_now(&afk, &run, title, body).await
    })
    .await
}

async fn open_now(
    afk: &Scheduler,
    run: &Run,
    title: String,
    body: String,
) -> Result<PullRequest, PullError> {
    if matches!(
        run.kind,
        crate::domain::RunKind::Plan | crate::domain::RunKind::Review
    ) {
        // A planning or review run's word never opens a pull request: its
        // issue's work waits for a decision on the plan or the verdict.
        return Err(PullError::Conflict(format!(
            "run {} is a {} run: only a work run (AFK or manual) opens a pull request",
            run.id, run.kind
        )));
    }
    let runner = &afk.runner;
    let store = &runner.store();
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
    if let Err(e) = deliver(runner, &repo, run, &branch, Lease::Unknown).await {
        if let (PullError::Scope(b), Some(c)) = (&e, claim.as_ref()) {
            afk.claims.with(c.id, |s| {
                s.scope = Some(b.clone());
                s.scope_refusals += 1;
            });
        }
        return Err(e);
    }
    let source = afk.sources.of(&repo);
    // A forge's description carries lab's receipt from the start (one call,
    // not a create, a read and an edit); the built-in page shows it.
    let receipt = match (&claim, source.kind()) {
        (Some(_), kind) if kind != SourceKind::Builtin => super::receipt::of_run(runner, run.id)
            .await
            .ok()
            .map(|r| r.markdown()),
        _ => None,
    };
    let body = match &receipt {
        Some((text, _)) => super::receipt::with_receipt(&body, text),
        None => body,
    };
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
        && !store.set_claim_pr(c.id, &pr.url, pr.number).await?
    {
        return Err(PullError::Conflict(format!(
            "run {} already opened a pull request",
            run.id
        )));
    }
    tracing::info!(run = run.id, url = %pr.url, "pull request opened");
    // Its description gets lab's receipt (a forge's; the built-in page
    // shows it).
    if let Ok(Some(c)) = store.claim_of_run(run.id).await {
        // The claim is live and followed from now: its state is made here,
        // so what lab wrote is remembered.
        afk.claims.with(c.id, |s| s.receipt_sent = receipt);
        // Written again only if it changed meanwhile (the claim now names
        // its pull request).
        write_receipt(runner, &afk.claims, source.as_ref(), &c, true).await;
    }
    if let Err(e) = store.note_pull_opened(run, &pr.url).await {
        tracing::warn!(run = run.id, error = %e, "could not queue the pull request's notifications");
    }
    Ok(pr)
}
