//! lab's own tracker: issues and pull requests in its database; a pull
//! request is a branch in the repo plus a record.

use super::{Comment, Issue, IssueSource, NewPull, PullRequest, Result, SourceError};
use crate::domain::{IssueState, rfc3339};
use crate::repo::Repo;
use crate::repo::issue_source::SourceKind;
use crate::store::{IssueRow, NewPullRow, PullRow, Store, StoreError};

pub struct Builtin {
    store: Store,
    repo_id: i64,
    repo_name: String,
    lab_url: String,
}

impl Builtin {
    pub fn new(store: Store, repo: &Repo, lab_url: &str) -> Builtin {
        Builtin {
            store,
            repo_id: repo.id,
            repo_name: repo.name.clone(),
            lab_url: lab_url.trim_end_matches('/').to_owned(),
        }
    }

    /// lab's API URL of this repo's pull requests.
    fn api_base(&self) -> String {
        format!("{}/api/v1/repos/{}/pulls", self.lab_url, self.repo_name)
    }
}

fn issue(r: IssueRow) -> Issue {
    Issue {
        number: r.number,
        title: r.title,
        body: r.body,
        state: r.state,
        labels: r.labels,
        url: None,
        comments: Vec::new(),
        knobs: r.knobs,
        author: None,
        author_association: None,
    }
}

/// A stored pull request; `api` is lab's API URL of the repo's pulls.
fn pull(p: PullRow, api: &str) -> PullRequest {
    PullRequest {
        api_url: Some(format!("{api}/{}", p.number)),
        number: p.number,
        title: p.title,
        body: p.body,
        url: p.url,
        head: p.head_branch,
        base: p.base_branch,
        state: p.state,
        issue: p.issue_number,
        run_id: p.run_id,
    }
}

fn not_found(e: StoreError, what: String) -> SourceError {
    match e {
        StoreError::NotFound => SourceError::NotFound(what),
        other => SourceError::Store(other),
    }
}

#[async_trait::async_trait]
impl IssueSource for Builtin {
    fn kind(&self) -> SourceKind {
        SourceKind::Builtin
    }

    async fn list(&self, label: Option<&str>, state: Option<IssueState>) -> Result<Vec<Issue>> {
        Ok(self
            .store
            .issues(self.repo_id, label, state)
            .await?
            .into_iter()
            .map(issue)
            .collect())
    }

    async fn issue(&self, number: i64) -> Result<Issue> {
        let (row, comments) = self.store.issue(self.repo_id, number).await.map_err(|e| {
            not_found(
                e,
                format!("repo '{}' has no issue {number}", self.repo_name),
            )
        })?;
        let mut i = issue(row);
        i.comments = comments
            .into_iter()
            .map(|c| Comment {
                author: c.author,
                body: c.body,
                created_at: rfc3339(c.created_at),
            })
            .collect();
        Ok(i)
    }

    async fn create_issue(
        &self,
        title: &str,
        body: &str,
        labels: &[String],
        knobs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Issue> {
        Ok(issue(
            self.store
                .create_issue(self.repo_id, title, body, labels, knobs)
                .await?,
        ))
    }

    async fn set_knobs(
        &self,
        number: i64,
        knobs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        self.store
            .set_issue_knobs(self.repo_id, number, knobs)
            .await
            .map_err(|e| {
                not_found(
                    e,
                    format!("repo '{}' has no issue {number}", self.repo_name),
                )
            })
    }

    async fn close_issue(&self, number: i64) -> Result<()> {
        self.store
            .set_issue_state(self.repo_id, number, IssueState::Closed)
            .await
            .map_err(|e| {
                not_found(
                    e,
                    format!("repo '{}' has no issue {number}", self.repo_name),
                )
            })
    }

    async fn comment(&self, number: i64, body: &str) -> Result<()> {
        self.store
            .comment_issue(self.repo_id, number, "lab", body)
            .await
            .map_err(|e| {
                not_found(
                    e,
                    format!("repo '{}' has no issue {number}", self.repo_name),
                )
            })
    }

    async fn relabel(&self, number: i64, remove: &str, add: &str) -> Result<()> {
        self.store
            .relabel_issue(self.repo_id, number, remove, add)
            .await
            .map_err(|e| {
                not_found(
                    e,
                    format!("repo '{}' has no issue {number}", self.repo_name),
                )
            })
    }

    async fn create_pull(&self, p: &NewPull) -> Result<PullRequest> {
        // The page a person opens; the API's URL is `api_url`.
        let base = format!("{}/repos/{}/pulls", self.lab_url, self.repo_name);
        let url = move |n: i64| format!("{base}/{n}");
        let row = self
            .store
            .create_pull(
                self.repo_id,
                &NewPullRow {
                    title: &p.title,
                    body: &p.body,
                    head: &p.head,
                    base: &p.base,
                    issue: p.issue,
                    run_id: p.run_id,
                    url: &url,
                },
            )
            .await?;
        Ok(pull(row, &self.api_base()))
    }

    async fn pulls(&self) -> Result<Vec<PullRequest>> {
        Ok(self
            .store
            .pulls(self.repo_id)
            .await?
            .into_iter()
            .map(|p| pull(p, &self.api_base()))
            .collect())
    }

    async fn pull(&self, number: i64) -> Result<PullRequest> {
        let row = self.store.pull(self.repo_id, number).await.map_err(|e| {
            not_found(
                e,
                format!("repo '{}' has no pull request {number}", self.repo_name),
            )
        })?;
        Ok(pull(row, &self.api_base()))
    }

    async fn reopen_issue(&self, number: i64) -> Result<()> {
        self.store
            .set_issue_state(self.repo_id, number, IssueState::Open)
            .await
            .map_err(|e| {
                not_found(
                    e,
                    format!("repo '{}' has no issue {number}", self.repo_name),
                )
            })
    }
}
