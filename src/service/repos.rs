//! Registering, changing and removing repos.

use crate::domain::Change;
use crate::repo::{self, Repo, RepoPatch};
use crate::run::workspace;
use crate::store::{RepoKey, Store};
use crate::validate;

use super::{ServiceError, ServiceResult};

fn named(key: &RepoKey) -> impl FnOnce() -> String + '_ {
    move || format!("repo '{key}'")
}

/// Registers a repo: checks the change, its source, then writes.
pub async fn create(store: &Store, patch: &RepoPatch) -> ServiceResult<Repo> {
    let repo = repo::create(patch)?;
    workspace::check_source(&repo.source)?;
    let created = store
        .create_repo(&repo)
        .await
        .map_err(|e| ServiceError::from_store(e, || "repo".into()))?;
    tracing::info!(repo = %created.name, id = created.id, "repo added");
    Ok(created)
}

/// Changes a repo.
pub async fn update(store: &Store, key: &RepoKey, patch: &RepoPatch) -> ServiceResult<Repo> {
    // The source is checked before the transaction: it is IO, and a path
    // that exists now is all lab can promise.
    if let Change::Set(p) = &patch.path {
        workspace::check_source(&repo::RepoSource::Path(validate::repo_path("path", p)?))?;
    }
    store
        .update_repo(key, |cur| repo::apply(cur, patch))
        .await
        .map_err(|e| ServiceError::from_store(e, named(key)))
}

/// Removes a repo that has no live run.
pub async fn remove(store: &Store, key: &RepoKey) -> ServiceResult<()> {
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
        .map_err(|e| ServiceError::from_store(e, named(key)))
}
