//! The review phase for the front ends (issue 28 §3): a review run submits
//! its verdict; anyone with the admin token lists an issue's verdicts.
//! `afk::review` decides; this names its failures as the API answers them.

use std::sync::Arc;

use super::{ServiceError, ServiceResult};
use crate::afk::Scheduler;
use crate::afk::review::ReviewError;
use crate::domain::{Review, Run, Submission};
use crate::store::{RepoKey, Store};

fn from(e: ReviewError) -> ServiceError {
    match e {
        ReviewError::Conflict(m) => ServiceError::Conflict(m),
        ReviewError::Invalid { mut invalid, last } => {
            if let Some(first) = invalid.0.first_mut().filter(|_| last) {
                first.message.push_str(
                    " (this was the retry: lab stopped the review and the issue needs a person)",
                );
            }
            ServiceError::Invalid(invalid)
        }
        ReviewError::Store(s) => ServiceError::from_store(s, || "the review".to_owned()),
    }
}

/// Records the verdict review run `run` submitted. In a task of its own: a
/// second refusal stops the run, whose `labctl` (the caller) dies with it,
/// and the stop must not be cut short when the caller hangs up.
pub async fn submit(afk: &Arc<Scheduler>, run: &Run, sub: &Submission) -> ServiceResult<Review> {
    let (afk, run, sub) = (afk.clone(), run.clone(), sub.clone());
    crate::to_the_end(async move { afk.submit_review(&run, &sub).await })
        .await
        .map_err(from)
}

/// Every verdict on an issue's pull requests of repo `id` (an id or a
/// name), oldest first.
pub async fn list(store: &Store, id: &str, issue: i64) -> ServiceResult<Vec<Review>> {
    let r = store
        .repo(&RepoKey::parse(id))
        .await
        .map_err(|e| ServiceError::from_store(e, || format!("repo '{id}'")))?;
    store
        .reviews_of_issue(r.id, issue)
        .await
        .map_err(|e| ServiceError::from_store(e, || format!("issue {issue}")))
}
