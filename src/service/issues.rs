//! Issues of any source, as the API and the pages both write and read them:
//! a repo's source, a new issue, labels on and off (the repo's ready label
//! among them), close and reopen, a filtered listing, and the AFK runs that
//! worked on an issue.

use crate::domain::{IssueFilter, Run};
use crate::issues::{Issue, IssueSource, SourceError, Sources};
use crate::repo::Repo;
use crate::store::{Claim, RepoKey, Store, StoreError};
use crate::validate::{self, Invalid};

use super::{ServiceError, ServiceResult};

/// Why an issue operation failed: a value (nothing was asked of the
/// source), the repo, or the source itself (kept whole, so a front end
/// can tell a forge's rate limit from a missing issue).
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error(transparent)]
    Source(#[from] SourceError),
}

impl From<Invalid> for IssueError {
    fn from(e: Invalid) -> Self {
        IssueError::Service(ServiceError::Invalid(e))
    }
}

pub type IssueResult<T> = Result<T, IssueError>;

/// A repo and its issue source.
pub async fn source(
    store: &Store,
    sources: &Sources,
    key: &RepoKey,
) -> ServiceResult<(Repo, Box<dyn IssueSource>)> {
    let repo = store
        .repo(key)
        .await
        .map_err(|e| ServiceError::from_store(e, || format!("repo '{key}'")))?;
    let source = sources.of(&repo);
    Ok((repo, source))
}

/// Opens an issue: every value is checked before the source is asked.
/// `knobs` (issue 27) are checked against the repo first too; only the
/// built-in tracker keeps them.
pub async fn create(
    store: &Store,
    repo: &Repo,
    source: &dyn IssueSource,
    new: &NewIssue<'_>,
) -> IssueResult<Issue> {
    let mut errs = validate::Errors::default();
    let checked = errs.check_all(validate::new_issue(new.title, new.body, new.labels));
    let knobs = match new.knobs.filter(|k| !k.is_empty()) {
        Some(k) => {
            errs.check_all(issue_knobs(store, repo, &crate::knob::Input::Json(k.clone())).await?)
        }
        None => Some(serde_json::Map::new()),
    };
    errs.finish()?;
    let (Some((title, body, labels)), Some(knobs)) = (checked, knobs) else {
        unreachable!("every error was reported");
    };
    if !knobs.is_empty() && source.kind() != crate::repo::issue_source::SourceKind::Builtin {
        return Err(SourceError::Invalid(
            "knobs: on a forge an issue's knobs are a ```lab block in its body (one `key: value` \
             line each), not a field"
                .to_owned(),
        )
        .into());
    }
    // One write: an issue created ready is never claimed before its knobs.
    Ok(source.create_issue(&title, &body, &labels, &knobs).await?)
}

/// A new issue's values, unchecked.
pub struct NewIssue<'a> {
    pub title: &'a str,
    pub body: &'a str,
    pub labels: &'a [String],
    pub knobs: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

/// An issue's knobs checked against its repo and the settings (the issue
/// layer's rules, `resolve::IssueLayer::parse`), canonical; `Err` inside
/// names every wrong entry.
async fn issue_knobs(
    store: &Store,
    repo: &Repo,
    knobs: &crate::knob::Input,
) -> ServiceResult<Result<serde_json::Map<String, serde_json::Value>, Invalid>> {
    let settings = store
        .settings()
        .await
        .map_err(|e| ServiceError::from_store(e, || "the settings".to_owned()))?;
    Ok(crate::resolve::IssueLayer::parse(
        "knobs",
        knobs,
        crate::resolve::KnobContext {
            repo,
            settings: &settings,
        },
    )
    .map(|l| l.to_json()))
}

/// Replaces a built-in issue's knobs (issue 27), checked against its repo;
/// a claimed issue's are fixed (a conflict). The issue as it is after.
pub async fn set_knobs(
    store: &Store,
    repo: &Repo,
    source: &dyn IssueSource,
    number: i64,
    knobs: &crate::knob::Input,
) -> IssueResult<Issue> {
    let checked = issue_knobs(store, repo, knobs).await??;
    source.set_knobs(number, &checked).await?;
    Ok(source.issue(number).await?)
}

/// Puts labels on an issue and takes others off; the issue as it is after.
pub async fn edit_labels(
    source: &dyn IssueSource,
    number: i64,
    add: &[String],
    remove: &[String],
) -> IssueResult<Issue> {
    let (add, remove) = validate::label_change(add, remove)?;
    source.edit_labels(number, &add, &remove).await?;
    Ok(source.issue(number).await?)
}

/// Puts the repo's ready label (the one its AFK runs take issues by) on an
/// issue, or takes it off.
pub async fn set_ready(
    repo: &Repo,
    source: &dyn IssueSource,
    number: i64,
    ready: bool,
) -> IssueResult<Issue> {
    let label = vec![repo.effective_label().to_owned()];
    let (add, remove) = if ready {
        (label, Vec::new())
    } else {
        (Vec::new(), label)
    };
    edit_labels(source, number, &add, &remove).await
}

/// Closes (`open` false) or reopens an issue; the issue as it is after.
pub async fn set_open(source: &dyn IssueSource, number: i64, open: bool) -> IssueResult<Issue> {
    if open {
        source.reopen_issue(number).await?;
    } else {
        source.close_issue(number).await?;
    }
    Ok(source.issue(number).await?)
}

/// A repo's issues in a filter, newest first (all: the open ones, then the
/// closed ones, each asked of the source).
pub async fn list(
    source: &dyn IssueSource,
    label: Option<&str>,
    filter: IssueFilter,
) -> Result<Vec<Issue>, SourceError> {
    let mut out = Vec::new();
    for state in filter.states() {
        out.extend(source.list(label, Some(*state)).await?);
    }
    out.sort_by_key(|i| std::cmp::Reverse(i.number));
    Ok(out)
}

/// The AFK runs that worked on an issue, oldest first: each claim with its
/// run, when the run is still recorded.
pub async fn runs_of_issue(
    store: &Store,
    repo_id: i64,
    number: i64,
) -> ServiceResult<Vec<(Claim, Option<Run>)>> {
    let claims = store
        .claims_of_issue(repo_id, number)
        .await
        .map_err(|e| ServiceError::Internal(e.to_string()))?;
    let mut out = Vec::with_capacity(claims.len());
    for c in claims {
        let run = match c.run_id {
            Some(id) => match store.run(id).await {
                Ok(r) => Some(r),
                // A removed run: the claim still says how it ended.
                Err(StoreError::NotFound) => None,
                Err(e) => return Err(ServiceError::Internal(e.to_string())),
            },
            None => None,
        };
        out.push((c, run));
    }
    Ok(out)
}
