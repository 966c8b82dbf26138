//! The plan phase for the front ends (issue 28 §2): a planning run submits
//! its plan; a person lists, approves or rejects an issue's plans.
//! `afk::plan` decides; this names its failures as the API and the pages
//! answer them.

use std::sync::Arc;

use super::{ServiceError, ServiceResult};
use crate::afk::Scheduler;
use crate::afk::plan::PlanError;
use crate::domain::{Plan, Run};
use crate::repo::Repo;
use crate::store::{RepoKey, Store};

fn from(e: PlanError) -> ServiceError {
    match e {
        PlanError::Conflict(m) => ServiceError::Conflict(m),
        PlanError::Invalid(i) => ServiceError::Invalid(i),
        PlanError::Store(s) => ServiceError::from_store(s, || "the plan".to_owned()),
    }
}

async fn repo(store: &Store, id: &str) -> ServiceResult<Repo> {
    store
        .repo(&RepoKey::parse(id))
        .await
        .map_err(|e| ServiceError::from_store(e, || format!("repo '{id}'")))
}

/// Records the plan run `run` submitted.
pub async fn submit(afk: &Arc<Scheduler>, run: &Run, text: &str) -> ServiceResult<Plan> {
    afk.submit_plan(run, text).await.map_err(from)
}

/// Every plan of an issue of repo `id` (an id or a name), by version.
pub async fn list(store: &Store, id: &str, issue: i64) -> ServiceResult<Vec<Plan>> {
    let r = repo(store, id).await?;
    store
        .plans_of_issue(r.id, issue)
        .await
        .map_err(|e| ServiceError::from_store(e, || format!("issue {issue}")))
}

/// Approves the plan that waits for a decision on the issue.
pub async fn approve(afk: &Arc<Scheduler>, id: &str, issue: i64, by: &str) -> ServiceResult<Plan> {
    let r = repo(afk.runner().store(), id).await?;
    afk.approve_plan(&r, issue, by).await.map_err(from)
}

/// Rejects the plan that waits for a decision on the issue, saying why.
pub async fn reject(
    afk: &Arc<Scheduler>,
    id: &str,
    issue: i64,
    by: &str,
    reason: &str,
) -> ServiceResult<Plan> {
    let r = repo(afk.runner().store(), id).await?;
    afk.reject_plan(&r, issue, by, reason).await.map_err(from)
}
