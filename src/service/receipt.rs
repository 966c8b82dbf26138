//! An AFK run's receipt (issue 28 §5): what lab knows of the work behind
//! its pull request, written by lab, never by the agent. Read from the run,
//! its claim and the claim's steps (`claim_steps`), and the scope checked
//! now on the branch as lab's repo holds it. The API serialises it
//! (`http/receipt.rs`) and the pull request's page shows it.
//!
//! Host side: the only part that reads the agent's data is the scope
//! check (`afk::scope::breach_of`, trees in lab's own repo); the receipt
//! carries its count, never the paths. A check's output tail is the checked
//! code's doing: it is for lab's pages and the API, never a forge.

use super::{ServiceError, ServiceResult};
use crate::afk::Scheduler;
use crate::domain::{Run, RunKind, Step};
use crate::store::{Claim, RepoKey, StoreError};

/// The receipt of one AFK run.
#[derive(Debug, Clone)]
pub struct Receipt {
    pub run: Run,
    pub claim: Claim,
    /// The rounds lab started and the checks it ran, oldest first, each
    /// with when (ms).
    pub steps: Vec<(i64, Step)>,
    pub scope: ScopeCheck,
}

/// The run's scope, checked on its branch now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeCheck {
    /// No `writes`: any path may change.
    Unrestricted,
    /// Every path the branch changes matches the globs.
    InScope { globs: Vec<String> },
    /// This many paths do not.
    Outside { globs: Vec<String>, count: usize },
    /// The branch is not in lab's repo (yet), or could not be read.
    NotRead { globs: Vec<String> },
}

impl ScopeCheck {
    pub fn globs(&self) -> &[String] {
        match self {
            ScopeCheck::Unrestricted => &[],
            ScopeCheck::InScope { globs }
            | ScopeCheck::Outside { globs, .. }
            | ScopeCheck::NotRead { globs } => globs,
        }
    }

    /// `unrestricted`, `in-scope`, `outside`, `not-read`.
    pub fn state(&self) -> &'static str {
        match self {
            ScopeCheck::Unrestricted => "unrestricted",
            ScopeCheck::InScope { .. } => "in-scope",
            ScopeCheck::Outside { .. } => "outside",
            ScopeCheck::NotRead { .. } => "not-read",
        }
    }
}

/// The receipt of run `id`: an AFK run's; a manual run has none.
pub async fn of_run(afk: &Scheduler, id: i64) -> ServiceResult<Receipt> {
    let store = afk.runner().store();
    let run = store
        .run(id)
        .await
        .map_err(|e| ServiceError::from_store(e, || format!("run {id}")))?;
    let claim = match store.claim_of_run(id).await {
        Ok(Some(c)) if run.kind == RunKind::Afk => c,
        Ok(_) => {
            return Err(ServiceError::Conflict(format!(
                "run {id} is a manual run: only an AFK run's pull request has a receipt"
            )));
        }
        Err(e) => return Err(ServiceError::Internal(e.to_string())),
    };
    let steps = store
        .claim_steps(claim.id)
        .await
        .map_err(|e| ServiceError::Internal(e.to_string()))?;
    let scope = scope_now(afk, &run).await;
    Ok(Receipt {
        run,
        claim,
        steps,
        scope,
    })
}

async fn scope_now(afk: &Scheduler, run: &Run) -> ScopeCheck {
    let Some(scope) = crate::afk::scope::Scope::of(run) else {
        return ScopeCheck::Unrestricted;
    };
    let globs = scope.globs.clone();
    let (Some(repo_id), Some(branch)) = (run.repo_id, run.branch.as_deref()) else {
        return ScopeCheck::NotRead { globs };
    };
    let repo = match afk.runner().store().repo(&RepoKey::Id(repo_id)).await {
        Ok(r) => r,
        Err(StoreError::NotFound) | Err(_) => return ScopeCheck::NotRead { globs },
    };
    match crate::afk::scope::breach_of(afk.runner(), &repo, run, branch).await {
        Ok(None) => ScopeCheck::InScope { globs },
        Ok(Some(b)) => ScopeCheck::Outside {
            globs,
            count: b.count,
        },
        Err(_) => ScopeCheck::NotRead { globs },
    }
}
