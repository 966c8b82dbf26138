//! Registering, changing and removing repos.

use crate::domain::Change;
use crate::issues::{SourceError, Sources};
use crate::repo::issue_source::SourceKind;
use crate::repo::{self, Repo, RepoPatch};
use crate::run::workspace;
use crate::store::{RepoKey, Store};
use crate::validate;

use super::{ServiceError, ServiceResult};

fn named(key: &RepoKey) -> impl FnOnce() -> String + '_ {
    move || format!("repo '{key}'")
}

/// Whether a forge repo's address, repo and token reach it, with one call
/// (the repo itself); refused with what to fix when not. Its forge account
/// is read then too (`GET /user`), once. A rate limit lets it through: the
/// forge answered.
async fn check_forge(sources: &Sources, repo: &Repo) -> ServiceResult<()> {
    if repo.issues.source == SourceKind::Builtin {
        return Ok(());
    }
    let name = repo.issues.forge_repo.as_deref().unwrap_or("");
    let url = repo.issues.forge_url.as_deref().unwrap_or("");
    let refused = |field: &str, why: String| {
        Err(ServiceError::Invalid(
            validate::FieldError::new(field, why).into(),
        ))
    };
    match sources.of(repo).reachable().await {
        Ok(()) | Err(SourceError::RateLimited { .. }) => {
            if let Err(e) = sources.identity(repo).await {
                tracing::warn!(repo = %repo.name, error = %e, "could not read lab's forge account");
            }
            Ok(())
        }
        Err(SourceError::NotFound(e)) => refused(
            "forge_repo",
            format!(
                "{name} is not on the forge at {url}: {e}; check the name, and that the token can see it"
            ),
        ),
        Err(SourceError::Denied(e)) => refused(
            "forge_token",
            format!("the forge refused lab's token for {name}: {e}"),
        ),
        Err(e) => refused(
            "forge_url",
            format!("lab could not ask the forge at {url} about {name}: {e}"),
        ),
    }
}

/// Registers a repo: checks the change, its source, its forge, then writes.
pub async fn create(store: &Store, sources: &Sources, patch: &RepoPatch) -> ServiceResult<Repo> {
    let repo = repo::create(patch)?;
    workspace::check_source(&repo.source)?;
    check_forge(sources, &repo).await?;
    let created = store
        .create_repo(&repo)
        .await
        .map_err(|e| ServiceError::from_store(e, || "repo".into()))?;
    tracing::info!(repo = %created.name, id = created.id, "repo added");
    Ok(created)
}

/// Changes a repo.
pub async fn update(
    store: &Store,
    sources: &Sources,
    key: &RepoKey,
    patch: &RepoPatch,
) -> ServiceResult<Repo> {
    // The source and the forge are checked before the transaction: they
    // are IO, and what answers now is all lab can promise.
    if let Change::Set(p) = &patch.path {
        workspace::check_source(&repo::RepoSource::Path(validate::repo_path("path", p)?))?;
    }
    let i = &patch.issues;
    if !(i.source.is_keep()
        && i.forge_url.is_keep()
        && i.forge_repo.is_keep()
        && i.forge_token.is_keep())
    {
        let cur = store
            .repo(key)
            .await
            .map_err(|e| ServiceError::from_store(e, named(key)))?;
        check_forge(sources, &repo::apply(&cur, patch)?).await?;
    }
    store
        .update_repo(key, |cur| repo::apply(cur, patch))
        .await
        .map_err(|e| ServiceError::from_store(e, named(key)))
}

/// Removes a repo that has no live run (and this node's spare workspace of
/// it).
pub async fn remove(
    store: &Store,
    runner: &crate::run::Runner,
    key: &RepoKey,
) -> ServiceResult<()> {
    let repo = store
        .repo(key)
        .await
        .map_err(|e| ServiceError::from_store(e, named(key)))?;
    let live = store
        .active_runs_of_repo(repo.id)
        .await
        .map_err(|e| ServiceError::Internal(e.to_string()))?;
    if live > 0 {
        return Err(ServiceError::Conflict(format!(
            "repo '{}' has {live} live run(s): stop them first",
            repo.name
        )));
    }
    store
        .delete_repo(&RepoKey::Id(repo.id))
        .await
        .map_err(|e| ServiceError::from_store(e, named(key)))?;
    runner.workspaces().forget_repo(repo.id).await;
    Ok(())
}
