//! A run's changes, and the built-in tracker's pull requests read, merged
//! and closed: what the API, the pages and (through the API) labctl share.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ServiceError, ServiceResult};
use crate::afk::Scheduler;
use crate::diff::{Diff, Limits};
use crate::issues::PullRequest;
use crate::repo::Repo;
use crate::repo::issue_source::SourceKind;
use crate::run::merge::MergeError;
use crate::store::RepoKey;

/// A pull request with how it ended and, when asked, its diff.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PullView {
    #[serde(flatten)]
    pub pull: PullRequest,
    /// The default branch's commit the merge made (built-in tracker).
    pub merged_sha: Option<String>,
    /// When it was merged (RFC 3339).
    pub merged_at: Option<String>,
    /// The diff of its branch against the default branch (built-in tracker
    /// only; after a merge, the diff that was merged).
    pub diff: Option<Diff>,
    /// Why the diff could not be read (e.g. its branch is gone).
    pub diff_error: Option<String>,
}

/// A merge made: the default branch's new commit and the pull request.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MergeDone {
    pub sha: String,
    /// Whether the default branch only moved forward (no merge commit).
    pub fast_forward: bool,
    pub pull: PullView,
}

async fn repo(afk: &Scheduler, key: &str) -> ServiceResult<Repo> {
    let key = RepoKey::parse(key);
    afk.runner()
        .store()
        .repo(&key)
        .await
        .map_err(|e| ServiceError::from_store(e, || format!("repo '{key}'")))
}

/// The diff of run `id`'s work (live: its workspace, untracked files too).
pub async fn run_diff(afk: &Scheduler, id: i64, limits: Limits) -> ServiceResult<Diff> {
    let store = &afk.runner().store();
    let run = store
        .run(id)
        .await
        .map_err(|e| ServiceError::from_store(e, || format!("run {id}")))?;
    let repo_id = run
        .repo_id
        .ok_or_else(|| ServiceError::Conflict(format!("run {id}'s repo was removed from lab")))?;
    let branch = run
        .branch
        .clone()
        .ok_or_else(|| ServiceError::Conflict(format!("run {id} has no branch")))?;
    let repo = store
        .repo(&RepoKey::Id(repo_id))
        .await
        .map_err(|e| ServiceError::from_store(e, || format!("run {id}'s repo")))?;
    // A live run's diff reads its workspace (in its jail): a failure's text
    // may hold the agent's bytes, so the answer carries only an id (ADR 24).
    let jail = afk.runner().jail(&run, Some(&repo));
    afk.runner()
        .workspaces()
        .run_diff(
            &repo,
            run.workspace.as_deref().map(Path::new),
            &branch,
            limits,
            jail.as_ref(),
        )
        .await
        .map_err(|e| {
            ServiceError::Conflict(crate::run::withheld(id, "reading the run's changes", &e.0))
        })
}

/// What a manual run's page offers of a pull request (issue 40 §9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullOffer {
    /// The one it opened.
    Opened(String),
    /// Its branch has commits: a pull request can be opened from it.
    Open,
    /// Nothing: not a manual run, no branch or repo, or no commits yet.
    Nothing,
}

/// What run `run`'s page offers of a pull request: a manual run's opened
/// one, or one to open when its branch has commits of its own.
pub async fn offer(afk: &Scheduler, run: &crate::domain::Run) -> ServiceResult<PullOffer> {
    if run.kind != crate::domain::RunKind::Manual {
        return Ok(PullOffer::Nothing);
    }
    let store = afk.runner().store();
    if let Some(url) = store
        .pull_of_run(run.id)
        .await
        .map_err(|e| ServiceError::Internal(e.to_string()))?
    {
        return Ok(PullOffer::Opened(url));
    }
    let Some(repo_id) = run.repo_id.filter(|_| run.branch.is_some()) else {
        return Ok(PullOffer::Nothing);
    };
    let Ok(repo) = store.repo(&RepoKey::Id(repo_id)).await else {
        return Ok(PullOffer::Nothing);
    };
    Ok(
        if crate::afk::pull::has_commits(afk.runner(), &repo, run).await {
            PullOffer::Open
        } else {
            PullOffer::Nothing
        },
    )
}

/// Opens the pull request of run `id`'s branch (the run page's form; the
/// API's `POST /runs/{id}/pull` maps the same errors to its statuses).
pub async fn open(
    afk: &Arc<Scheduler>,
    id: i64,
    title: &str,
    body: &str,
) -> ServiceResult<PullRequest> {
    use crate::afk::pull::PullError;
    let run = afk
        .runner()
        .store()
        .run(id)
        .await
        .map_err(|e| ServiceError::from_store(e, || format!("run {id}")))?;
    crate::afk::pull::open(afk, &run, title, body)
        .await
        .map_err(|e| match e {
            PullError::Invalid(i) => ServiceError::Invalid(i),
            PullError::Store(s) => ServiceError::from_store(s, || format!("run {id}'s repo")),
            e => ServiceError::Conflict(e.to_string()),
        })
}

/// A repo's pull request, with its diff when `with_diff`.
pub async fn view(
    afk: &Scheduler,
    key: &str,
    number: i64,
    with_diff: bool,
) -> ServiceResult<(Repo, PullView)> {
    let repo = repo(afk, key).await?;
    let source = afk.sources().of(&repo);
    let pull = source.pull(number).await.map_err(|e| match e {
        crate::issues::SourceError::NotFound(m) => ServiceError::NotFound(m),
        crate::issues::SourceError::Invalid(m) => {
            ServiceError::Invalid(crate::validate::FieldError::new("number", &m).into())
        }
        other => ServiceError::Unavailable(other.to_string()),
    })?;
    let view = describe(afk, &repo, pull, with_diff).await?;
    Ok((repo, view))
}

/// A pull request as lab shows it: how it ended and, when asked, its diff.
pub async fn describe(
    afk: &Scheduler,
    repo: &Repo,
    pull: PullRequest,
    with_diff: bool,
) -> ServiceResult<PullView> {
    let mut view = PullView {
        pull,
        merged_sha: None,
        merged_at: None,
        diff: None,
        diff_error: None,
    };
    if repo.issues.source != SourceKind::Builtin {
        return Ok(view);
    }
    let merge = afk
        .runner()
        .store()
        .pull_merge(repo.id, view.pull.number)
        .await
        .map_err(|e| ServiceError::Internal(e.to_string()))?;
    view.merged_sha = merge.merged_sha;
    view.merged_at = merge.merged_at.map(crate::domain::rfc3339);
    if !with_diff {
        return Ok(view);
    }
    let (target, head) = match (merge.merged_base, merge.merged_head) {
        (Some(b), Some(h)) => (b, h),
        _ => (
            format!("refs/heads/{}", repo.default_branch),
            format!("refs/heads/{}", view.pull.head),
        ),
    };
    match afk
        .runner()
        .workspaces()
        .range_diff(repo, &target, &head, Limits::default())
        .await
    {
        Ok(d) => view.diff = Some(d),
        Err(e) => view.diff_error = Some(e.0),
    }
    Ok(view)
}

/// An open built-in pull request of the repo, or why it cannot be acted on
/// (a forge's pull request is refused before the forge is asked).
async fn open_pull(afk: &Scheduler, key: &str, number: i64) -> ServiceResult<(Repo, PullView)> {
    let found = repo(afk, key).await?;
    if found.issues.source != SourceKind::Builtin {
        return Err(ServiceError::Conflict(format!(
            "the repo's pull requests live on its forge: merge or close #{number} there"
        )));
    }
    let (repo, view) = view(afk, key, number, false).await?;
    if view.pull.state != "open" {
        return Err(ServiceError::Conflict(format!(
            "pull request #{number} is already {}",
            view.pull.state
        )));
    }
    Ok((repo, view))
}

/// Merges a built-in pull request into the repo's default branch (see
/// `run::merge`); a refusal changes nothing and says why.
pub async fn merge(afk: &Arc<Scheduler>, key: &str, number: i64) -> ServiceResult<MergeDone> {
    let (repo, view) = open_pull(afk, key, number).await?;
    let afk = afk.clone();
    crate::to_the_end(async move {
        let message = format!(
            "Merge pull request #{number} ({}): {}",
            view.pull.head, view.pull.title
        );
        let merged = afk
            .runner()
            .workspaces()
            .merge(&repo, &view.pull.head, &message)
            .await
            .map_err(|e| match e {
                MergeError::Refused(r) => ServiceError::Conflict(r.to_string()),
                MergeError::Git(g) => ServiceError::Internal(g.0),
            })?;
        let store = &afk.runner().store();
        let marked = store
            .set_pull_merged(repo.id, number, &merged.sha, &merged.base, &merged.head)
            .await
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        if !marked {
            tracing::warn!(number, "a pull request ended while lab merged it");
        }
        tracing::info!(repo = repo.id, number, sha = %merged.sha, "pull request merged");
        let source = afk.sources().of(&repo);
        // The issue it resolves closes, as a forge closes one a merged pull
        // request resolves; the merge stands if the issue cannot be told.
        if let Some(issue) = view.pull.issue {
            let text = format!(
                "lab closed this issue: pull request #{number} was merged ({}).",
                merged.sha
            );
            let closed = async {
                source.comment(issue, &text).await?;
                source.close_issue(issue).await
            };
            if let Err(e) = closed.await {
                tracing::warn!(number, issue, error = %e, "could not close the issue a merged pull request resolves");
            }
        }
        let pull = source
            .pull(number)
            .await
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        Ok(MergeDone {
            sha: merged.sha,
            fast_forward: merged.fast_forward,
            pull: describe(&afk, &repo, pull, false).await?,
        })
    })
    .await
}

/// Closes a built-in pull request without merging; its branch stays.
pub async fn close(afk: &Arc<Scheduler>, key: &str, number: i64) -> ServiceResult<PullView> {
    let (repo, _) = open_pull(afk, key, number).await?;
    let store = &afk.runner().store();
    if !store
        .set_pull_closed(repo.id, number)
        .await
        .map_err(|e| ServiceError::Internal(e.to_string()))?
    {
        return Err(ServiceError::Conflict(format!(
            "pull request #{number} is no longer open"
        )));
    }
    let (_, view) = view(afk, key, number, false).await?;
    Ok(view)
}
