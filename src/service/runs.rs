//! Starting a manual run, stopping and removing runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::domain::{Run, RunKind, StopCause};
use crate::run::{LaunchError, LaunchRequest, LaunchTimings, RunError, Runner};
use crate::store::{RepoKey, Store};

use super::{ServiceError, ServiceResult};

/// A launch's failure as the API and the pages report it.
pub fn launch_error(e: LaunchError) -> ServiceError {
    match e {
        LaunchError::Invalid(i) => ServiceError::Invalid(i),
        LaunchError::Unavailable(m) => ServiceError::Unavailable(m.to_string()),
        LaunchError::Unsandboxed(m) => ServiceError::Unsandboxed(m),
        LaunchError::Store(s) => ServiceError::from_store(s, || "run".into()),
    }
}

/// A failure of something done to run `id`.
pub fn run_error(id: i64) -> impl FnOnce(RunError) -> ServiceError {
    move |e| match e {
        RunError::NotFound => ServiceError::NotFound(format!("run {id} not found")),
        RunError::Conflict(m) => ServiceError::Conflict(m),
        RunError::Store(s) => ServiceError::Internal(s.to_string()),
        RunError::Io(m) => ServiceError::Internal(m),
    }
}

/// Starts a manual run: the model and effort asked for override the repo's
/// resolved base defaults for this one start.
pub async fn start_manual(
    store: &Store,
    runner: &Arc<Runner>,
    repo: &str,
    model: Option<String>,
    effort: Option<String>,
    prompt: String,
) -> ServiceResult<(Run, LaunchTimings)> {
    let key = RepoKey::parse(repo);
    let (repo, global) = store
        .repo_with_global(&key)
        .await
        .map_err(|e| ServiceError::from_store(e, || format!("repo '{key}'")))?;
    let req = LaunchRequest {
        repo,
        global,
        kind: RunKind::Manual,
        model,
        effort,
        prompt,
        prompt_names_branch: false,
        env: BTreeMap::new(),
        afk_claim: None,
    };
    // A task of its own: a client that hangs up mid-launch still gets its
    // run started and recorded, not half of one.
    let runner = runner.clone();
    crate::to_the_end(async move { runner.launch_timed(req).await })
        .await
        .map_err(launch_error)
}

/// Stops a live run: its whole process tree, then its session.
pub async fn stop(runner: &Arc<Runner>, id: i64, why: &str) -> ServiceResult<Run> {
    runner
        .stop(id, StopCause::Operator, why)
        .await
        .map_err(run_error(id))
}

/// Removes an ended run, its workspace and its log. Its branch stays.
pub async fn remove(runner: &Arc<Runner>, id: i64) -> ServiceResult<()> {
    runner.remove(id).await.map_err(run_error(id))
}
