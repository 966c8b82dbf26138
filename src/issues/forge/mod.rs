//! Gitea/Forgejo and GitHub, over their REST APIs, with the token lab holds.
//! The two differ in a few places (paths, auth header, paging, labels by id
//! or by name); everything else is shared. `http.rs`: one request and its
//! refusals; `paging.rs`: listings; `labels.rs`: Gitea's label ids;
//! `wire.rs`: what the forges send. Checked against GitHub's REST
//! description and Gitea's/Forgejo's swagger (`tests/fixtures/forge-schemas/`).

mod access;
mod http;
mod labels;
mod paging;
mod status;
mod wire;

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use super::{
    Comment, Issue, IssueSource, NewPull, PullRequest, PullStatus, Result, SourceError, forge_token,
};
use crate::domain::IssueState;
use crate::repo::Repo;
use crate::repo::issue_source::{GITHUB_API, SourceKind};
use paging::PAGE;
use wire::{ForgeComment, ForgeIssue, ForgePull, IssueLabel};

pub struct Forge {
    kind: SourceKind,
    /// `https://gitea.example.com/api/v1/repos/owner/name`.
    repo_api: String,
    /// `https://gitea.example.com/api/v1`.
    api: String,
    /// `owner/name` on the forge.
    forge_repo: String,
    /// The owner of the repo lab pushes branches to, when that is another
    /// repo on the forge than `forge_repo` (a fork): a pull request's
    /// `head` is then `owner:branch` (GitHub's and Gitea's "create a pull
    /// request").
    head_owner: Option<String>,
    token: Option<String>,
    http: reqwest::Client,
}

fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The HTTP client forge calls go through (lab keeps one: building one
/// loads the root certificates, too slow to do per repo per tick).
pub fn http_client() -> reqwest::Client {
    crate::init_tls();
    reqwest::Client::builder()
        .user_agent(concat!("lab/", env!("CARGO_PKG_VERSION")))
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap_or_default()
}

/// The host and `owner/name` a clone URL names: `https://host/o/n.git`,
/// `ssh://git@host:22/o/n.git`, `git@host:o/n.git`.
fn clone_target(url: &str) -> Option<(String, String)> {
    let (host, path) = match reqwest::Url::parse(url) {
        Ok(u) if u.host_str().is_some() => (u.host_str()?.to_owned(), u.path().to_owned()),
        _ => {
            let (user_host, path) = url.split_once(':')?;
            let host = user_host.rsplit('@').next()?;
            (host.to_owned(), path.to_owned())
        }
    };
    let mut parts = path.trim_matches('/').rsplit('/');
    let name = parts.next()?.trim_end_matches(".git");
    let owner = parts.next()?;
    (!owner.is_empty() && !name.is_empty()).then(|| (host, format!("{owner}/{name}")))
}

/// See `Forge::head_owner`.
fn head_owner(repo: &Repo, kind: SourceKind) -> Option<String> {
    let (host, target) = clone_target(repo.url()?)?;
    let api = reqwest::Url::parse(repo.issues.forge_url.as_deref()?).ok()?;
    let forge_host = match (kind, api.host_str()?) {
        (SourceKind::Github, _) if repo.issues.forge_url.as_deref() == Some(GITHUB_API) => {
            "github.com"
        }
        (_, h) => h,
    };
    let same_repo = repo
        .issues
        .forge_repo
        .as_deref()
        .is_some_and(|r| r.eq_ignore_ascii_case(&target));
    (host.eq_ignore_ascii_case(forge_host) && !same_repo)
        .then(|| target.split('/').next().unwrap_or_default().to_owned())
}

impl Forge {
    pub fn new(kind: SourceKind, repo: &Repo, http: reqwest::Client) -> Forge {
        let base = repo.issues.forge_url.clone().unwrap_or_default();
        let api = match kind {
            SourceKind::Gitea => format!("{base}/api/v1"),
            _ => base,
        };
        let forge_repo = repo.issues.forge_repo.clone().unwrap_or_default();
        Forge {
            kind,
            repo_api: format!("{api}/repos/{forge_repo}"),
            api,
            head_owner: head_owner(repo, kind),
            forge_repo,
            token: forge_token(repo),
            http,
        }
    }

    /// The API root (for tests and messages).
    pub fn api(&self) -> &str {
        &self.api
    }

    fn owner(&self) -> Option<&str> {
        self.forge_repo.split_once('/').map(|(o, _)| o)
    }

    /// The open pull request of a branch, if the forge has one.
    async fn pull_of_branch(&self, branch: &str) -> Result<Option<PullRequest>> {
        let mut found = None;
        self.pages(
            format!(
                "{}/pulls?state=open&per_page={PAGE}&limit={PAGE}",
                self.repo_api
            ),
            |items: Vec<ForgePull>| {
                found = items.into_iter().find(|p| p.head() == branch);
                found.is_none()
            },
        )
        .await?;
        Ok(found.map(PullRequest::from))
    }
}

#[async_trait::async_trait]
impl IssueSource for Forge {
    async fn identity(&self) -> Result<Option<super::ForgeIdentity>> {
        let u: wire::User = self
            .json(self.req(Method::GET, &format!("{}/user", self.api)))
            .await?;
        let person = u.kind.as_deref().is_none_or(|k| k == "User");
        let is_operator = person
            && self
                .owner()
                .is_some_and(|o| o.eq_ignore_ascii_case(&u.login));
        Ok(Some(super::ForgeIdentity {
            login: u.login,
            is_operator,
        }))
    }

    async fn access(&self) -> Result<Vec<super::TokenNeed>> {
        self.token_access().await
    }

    async fn reachable(&self) -> Result<()> {
        self.send(self.req(Method::GET, &self.repo_api))
            .await
            .map(|_| ())
    }

    fn kind(&self) -> SourceKind {
        self.kind
    }

    /// With a label on Gitea/Forgejo: its `labels=` filter knows only the
    /// repo's labels and drops an unknown name, answering every issue
    /// (`ListIssues`, `GetLabelIDsInRepoByNames`). So lab keeps only the
    /// issues that carry the label; when the first page shows the filter
    /// was dropped, the label is an org's (then lab reads on) or nobody's
    /// (then the listing is empty).
    async fn list(&self, label: Option<&str>, state: Option<IssueState>) -> Result<Vec<Issue>> {
        let mut url = match self.kind {
            SourceKind::Github => format!("{}/issues?per_page={PAGE}", self.repo_api),
            _ => format!("{}/issues?type=issues&limit={PAGE}", self.repo_api),
        };
        // No state: every issue (both forges take `all`).
        let state = state.map_or("all", IssueState::as_str);
        url.push_str(&format!("&state={state}"));
        if let Some(l) = label {
            url.push_str(&format!("&labels={}", enc(l)));
        }
        let carries = |i: &ForgeIssue| label.is_none_or(|l| i.has_label(l));
        let mut out = Vec::new();
        let mut dropped = false;
        self.pages(url.clone(), |items: Vec<ForgeIssue>| {
            let items: Vec<ForgeIssue> = items.into_iter().filter(|i| !i.is_pull()).collect();
            dropped = self.kind == SourceKind::Gitea
                && out.is_empty()
                && items.iter().any(|i| !carries(i));
            out.extend(items.into_iter().filter(carries));
            !dropped
        })
        .await?;
        if dropped && self.kind == SourceKind::Gitea {
            let l = label.unwrap_or_default();
            if !self.org_labels().await?.iter().any(|o| o.name == l) {
                return Ok(Vec::new());
            }
            out.clear();
            self.pages(url, |items: Vec<ForgeIssue>| {
                out.extend(items.into_iter().filter(|i| !i.is_pull() && carries(i)));
                true
            })
            .await?;
        }
        Ok(out.into_iter().map(Issue::from).collect())
    }

    async fn issue(&self, number: i64) -> Result<Issue> {
        let i: ForgeIssue = self
            .json(self.req(Method::GET, &format!("{}/issues/{number}", self.repo_api)))
            .await?;
        let comments: Vec<ForgeComment> = self
            .all(format!(
                "{}/issues/{number}/comments?per_page={PAGE}&limit={PAGE}",
                self.repo_api
            ))
            .await?;
        let mut issue = Issue::from(i);
        issue.comments = comments
            .into_iter()
            .map(|c| Comment {
                author: c.user.map(|u| u.login).unwrap_or_default(),
                body: c.body.unwrap_or_default(),
                created_at: c.created_at,
            })
            .collect();
        Ok(issue)
    }

    async fn create_issue(
        &self,
        title: &str,
        body: &str,
        labels: &[String],
        knobs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Issue> {
        if !knobs.is_empty() {
            return Err(SourceError::Invalid(
                "knobs: on a forge an issue's knobs are a ```lab block in its body".to_owned(),
            ));
        }
        let url = format!("{}/issues", self.repo_api);
        if self.kind == SourceKind::Github {
            let i: ForgeIssue = self
                .json(
                    self.req(Method::POST, &url)
                        .json(&json!({"title": title, "body": body, "labels": labels})),
                )
                .await?;
            return Ok(i.into());
        }
        let i: ForgeIssue = self
            .json(
                self.req(Method::POST, &url)
                    .json(&json!({"title": title, "body": body})),
            )
            .await?;
        let number = i.number;
        if !labels.is_empty() {
            let names: Vec<&str> = labels.iter().map(String::as_str).collect();
            let ids = self.label_ids(&names).await?;
            let url = format!("{}/issues/{number}/labels", self.repo_api);
            self.send(self.req(Method::POST, &url).json(&json!({"labels": ids})))
                .await?;
        }
        self.issue(number).await
    }

    /// Gitea/Forgejo answer this PATCH with 201, GitHub with 200: any
    /// success will do.
    async fn close_issue(&self, number: i64) -> Result<()> {
        self.send(
            self.req(Method::PATCH, &format!("{}/issues/{number}", self.repo_api))
                .json(&json!({"state": IssueState::Closed})),
        )
        .await?;
        Ok(())
    }

    /// GitHub says the author's standing on the issue itself
    /// (`author_association`); Gitea is asked for the author's permission
    /// on the repo (`GET /repos/{owner}/{repo}/collaborators/{user}/permission`:
    /// `owner`, `admin` or `write`). A user the forge does not know, or
    /// cannot say about (404), may not.
    async fn may_direct(&self, issue: &Issue) -> Result<bool> {
        if self.kind == SourceKind::Github {
            return Ok(issue
                .author_association
                .as_deref()
                .is_some_and(super::directives::github_may_write));
        }
        let Some(author) = issue.author.as_deref().filter(|a| !a.is_empty()) else {
            return Ok(false);
        };
        self.may_write(author).await
    }

    // Gitea and GitHub both answer a collaborator's permission on the
    // repo (GitHub's `maintain` role reads as `write`).
    async fn may_write(&self, author: &str) -> Result<bool> {
        if author.is_empty() {
            return Ok(false);
        }
        let url = format!("{}/collaborators/{}/permission", self.repo_api, enc(author));
        #[derive(serde::Deserialize)]
        struct Permission {
            permission: String,
        }
        match self.json::<Permission>(self.req(Method::GET, &url)).await {
            Ok(p) => Ok(matches!(p.permission.as_str(), "owner" | "admin" | "write")),
            Err(SourceError::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    // Gitea and GitHub both reopen with the close's PATCH, state "open".
    async fn reopen_issue(&self, number: i64) -> Result<()> {
        self.send(
            self.req(Method::PATCH, &format!("{}/issues/{number}", self.repo_api))
                .json(&json!({"state": IssueState::Open})),
        )
        .await?;
        Ok(())
    }

    async fn comment(&self, number: i64, body: &str) -> Result<()> {
        let url = format!("{}/issues/{number}/comments", self.repo_api);
        self.send(self.req(Method::POST, &url).json(&json!({"body": body})))
            .await?;
        Ok(())
    }

    // Gitea and GitHub both take a review with the event `COMMENT`.
    async fn review_comment(&self, number: i64, body: &str) -> Result<()> {
        let url = format!("{}/pulls/{number}/reviews", self.repo_api);
        self.send(
            self.req(Method::POST, &url)
                .json(&json!({"body": body, "event": "COMMENT"})),
        )
        .await?;
        Ok(())
    }

    async fn relabel(&self, number: i64, remove: &str, add: &str) -> Result<()> {
        let labels_url = format!("{}/issues/{number}/labels", self.repo_api);
        if self.kind == SourceKind::Github {
            if !remove.is_empty() {
                let url = format!("{labels_url}/{}", enc(remove));
                match self.send(self.req(Method::DELETE, &url)).await {
                    Ok(_) | Err(SourceError::NotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            if !add.is_empty() {
                self.send(
                    self.req(Method::POST, &labels_url)
                        .json(&json!({"labels": [add]})),
                )
                .await?;
            }
            return Ok(());
        }
        // The issue's own labels keep their ids (an org's label stays the
        // org's); only the added one is looked up.
        let issue: ForgeIssue = self
            .json(self.req(Method::GET, &format!("{}/issues/{number}", self.repo_api)))
            .await?;
        let mut ids: Vec<i64> = Vec::new();
        let mut has_add = false;
        for l in issue.labels {
            if let IssueLabel::Object(l) = l {
                has_add |= l.name == add;
                if l.name != remove {
                    ids.push(l.id);
                }
            }
        }
        if !add.is_empty() && !has_add {
            ids.extend(self.label_ids(&[add]).await?);
        }
        self.send(
            self.req(Method::PUT, &labels_url)
                .json(&json!({"labels": ids})),
        )
        .await?;
        Ok(())
    }

    /// A pull request the forge already has for the branch (Gitea/Forgejo
    /// answer 409, GitHub 422 "A pull request already exists") is the one
    /// lab opened before: lab takes it.
    async fn create_pull(&self, p: &NewPull) -> Result<PullRequest> {
        let head = match &self.head_owner {
            Some(owner) => format!("{owner}:{}", p.head),
            None => p.head.clone(),
        };
        let resp = self
            .send_any(
                self.req(Method::POST, &format!("{}/pulls", self.repo_api))
                    .json(&json!({"title": p.title, "body": p.body, "head": head, "base": p.base})),
            )
            .await?;
        let status = resp.status();
        let pr = if status.is_success() {
            PullRequest::from(http::read::<ForgePull>(resp).await?)
        } else {
            let err = http::refusal(resp).await;
            let exists = status == StatusCode::CONFLICT
                || (status == StatusCode::UNPROCESSABLE_ENTITY
                    && err.to_string().contains("already exists"));
            match exists {
                true => self.pull_of_branch(&p.head).await?.ok_or(err)?,
                false => return Err(err),
            }
        };
        let mut pr = pr;
        pr.issue = p.issue;
        pr.run_id = p.run_id;
        Ok(pr)
    }

    async fn set_pull_body(&self, number: i64, body: &str) -> Result<()> {
        self.send(
            self.req(Method::PATCH, &format!("{}/pulls/{number}", self.repo_api))
                .json(&json!({ "body": body })),
        )
        .await?;
        Ok(())
    }

    async fn pulls(&self) -> Result<Vec<PullRequest>> {
        let items: Vec<ForgePull> = self
            .all(format!(
                "{}/pulls?state=all&per_page={PAGE}&limit={PAGE}",
                self.repo_api
            ))
            .await?;
        Ok(items.into_iter().map(PullRequest::from).collect())
    }

    async fn pull(&self, number: i64) -> Result<PullRequest> {
        let pr: ForgePull = self
            .json(self.req(Method::GET, &format!("{}/pulls/{number}", self.repo_api)))
            .await?;
        Ok(pr.into())
    }

    async fn pull_status(&self, number: i64) -> Result<PullStatus> {
        self.read_pull_status(number).await
    }
}
