//! Gitea/Forgejo and GitHub, over their REST APIs, with the token lab holds.
//! The two differ in a few places (paths, auth header, labels by id or by
//! name); everything else is shared.

use std::time::Duration;

use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{Comment, Issue, IssueSource, NewPull, PullRequest, Result, SourceError, forge_token};
use crate::domain::IssueState;
use crate::repo::Repo;
use crate::repo::issue_source::SourceKind;

pub struct Forge {
    kind: SourceKind,
    /// `https://gitea.example.com/api/v1/repos/owner/name`.
    repo_api: String,
    /// `https://gitea.example.com/api/v1`.
    api: String,
    token: Option<String>,
    http: reqwest::Client,
}

#[derive(Deserialize)]
struct Label {
    #[serde(default)]
    id: i64,
    name: String,
}

#[derive(Deserialize)]
struct ForgeIssue {
    number: i64,
    title: String,
    #[serde(default)]
    body: Option<String>,
    state: IssueState,
    #[serde(default)]
    labels: Vec<Label>,
    #[serde(default)]
    html_url: Option<String>,
    /// GitHub lists pull requests among issues; they carry this key.
    #[serde(default)]
    pull_request: Option<Value>,
}

#[derive(Deserialize)]
struct User {
    login: String,
}

#[derive(Deserialize)]
struct ForgeComment {
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<User>,
    #[serde(default)]
    created_at: String,
}

#[derive(Deserialize)]
struct Branch {
    #[serde(rename = "ref")]
    name: String,
}

#[derive(Deserialize)]
struct ForgePull {
    number: i64,
    title: String,
    #[serde(default)]
    body: Option<String>,
    html_url: String,
    state: String,
    head: Branch,
    base: Branch,
}

impl From<ForgeIssue> for Issue {
    fn from(i: ForgeIssue) -> Self {
        Issue {
            number: i.number,
            title: i.title,
            body: i.body.unwrap_or_default(),
            state: i.state,
            labels: i.labels.into_iter().map(|l| l.name).collect(),
            url: i.html_url,
            comments: Vec::new(),
        }
    }
}

impl From<ForgePull> for PullRequest {
    fn from(p: ForgePull) -> Self {
        PullRequest {
            number: p.number,
            title: p.title,
            body: p.body.unwrap_or_default(),
            url: p.html_url,
            head: p.head.name,
            base: p.base.name,
            state: p.state,
            issue: None,
            run_id: None,
        }
    }
}

/// How many items a page asks for.
const PAGE: usize = 50;

/// The `rel="next"` link of a `Link` header.
fn next_link(resp: &Response) -> Option<String> {
    let link = resp.headers().get("link")?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (url, rel) = part.split_once(';')?;
        rel.contains("rel=\"next\"").then(|| {
            url.trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_owned()
        })
    })
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

impl Forge {
    pub fn new(kind: SourceKind, repo: &Repo, http: reqwest::Client) -> Forge {
        let base = repo.issues.forge_url.clone().unwrap_or_default();
        let api = match kind {
            SourceKind::Gitea => format!("{base}/api/v1"),
            _ => base,
        };
        let owner_repo = repo.issues.forge_repo.clone().unwrap_or_default();
        Forge {
            kind,
            repo_api: format!("{api}/repos/{owner_repo}"),
            api,
            token: forge_token(repo),
            http,
        }
    }

    fn req(&self, method: Method, url: &str) -> RequestBuilder {
        let rb = self
            .http
            .request(method, url)
            .header("accept", "application/json");
        let rb = match self.kind {
            SourceKind::Github => rb
                .header("accept", "application/vnd.github+json")
                .header("x-github-api-version", "2022-11-28"),
            _ => rb,
        };
        match (&self.token, self.kind) {
            (Some(t), SourceKind::Github) => rb.bearer_auth(t),
            (Some(t), _) => rb.header("authorization", format!("token {t}")),
            (None, _) => rb,
        }
    }

    /// Sends, and turns a refusal into a clear error (the forge's own
    /// message, never the token).
    async fn send(&self, rb: RequestBuilder) -> Result<Response> {
        let resp = rb.send().await.map_err(|e| {
            SourceError::Forge(format!("cannot reach the forge: {}", e.without_url()))
        })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let h = resp.headers();
        let num = |k: &str| {
            h.get(k)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
        };
        let exhausted = num("x-ratelimit-remaining") == Some(0);
        if status == StatusCode::TOO_MANY_REQUESTS || (status == StatusCode::FORBIDDEN && exhausted)
        {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let wait = num("retry-after")
                .or_else(|| num("x-ratelimit-reset").map(|at| at.saturating_sub(now)))
                .unwrap_or(60)
                .clamp(1, 3600);
            return Err(SourceError::RateLimited {
                retry_after: Duration::from_secs(wait),
            });
        }
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        let message = body["message"].as_str().unwrap_or("").to_owned();
        let what = format!(
            "the forge answered {status}{}{message}",
            if message.is_empty() { "" } else { ": " }
        );
        Err(match status {
            StatusCode::NOT_FOUND => SourceError::NotFound(what),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => SourceError::Forge(format!(
                "{what} (check the forge token lab holds for this repo)"
            )),
            s if s.is_client_error() => SourceError::Invalid(what),
            _ => SourceError::Forge(what),
        })
    }

    async fn json<T: DeserializeOwned>(&self, rb: RequestBuilder) -> Result<T> {
        self.send(rb).await?.json().await.map_err(|e| {
            SourceError::Forge(format!("the forge sent an answer lab cannot read: {e}"))
        })
    }

    /// Every page of a listing.
    async fn all<T: DeserializeOwned>(&self, first: String) -> Result<Vec<T>> {
        let mut out = Vec::new();
        let mut next = Some(first);
        let mut pages = 0;
        while let Some(url) = next.take() {
            let resp = self.send(self.req(Method::GET, &url)).await?;
            let link = next_link(&resp);
            let items: Vec<T> = resp.json().await.map_err(|e| {
                SourceError::Forge(format!("the forge sent a listing lab cannot read: {e}"))
            })?;
            let full = items.len() >= PAGE;
            out.extend(items);
            pages += 1;
            next = link.filter(|_| full || self.kind == SourceKind::Github);
            if pages >= 100 {
                break;
            }
        }
        Ok(out)
    }

    /// Label names to ids (Gitea adds and sets labels by id), making the
    /// ones the repo does not have yet.
    async fn label_ids(&self, names: &[&str]) -> Result<Vec<i64>> {
        let have: Vec<Label> = self
            .all(format!("{}/labels?limit={PAGE}", self.repo_api))
            .await?;
        let mut ids = Vec::new();
        for n in names.iter().filter(|n| !n.is_empty()) {
            match have.iter().find(|l| l.name == *n) {
                Some(l) => ids.push(l.id),
                None => {
                    let l: Label = self
                        .json(
                            self.req(Method::POST, &format!("{}/labels", self.repo_api))
                                .json(&json!({"name": n, "color": "#8c8c8c"})),
                        )
                        .await?;
                    ids.push(l.id);
                }
            }
        }
        Ok(ids)
    }
}

#[async_trait::async_trait]
impl IssueSource for Forge {
    fn kind(&self) -> SourceKind {
        self.kind
    }

    async fn list(&self, label: Option<&str>, state: Option<IssueState>) -> Result<Vec<Issue>> {
        let mut url = match self.kind {
            SourceKind::Github => format!("{}/issues?per_page={PAGE}", self.repo_api),
            _ => format!("{}/issues?type=issues&limit={PAGE}", self.repo_api),
        };
        url.push_str(&format!("&state={}", state.unwrap_or(IssueState::Open)));
        if let Some(l) = label {
            url.push_str(&format!("&labels={}", enc(l)));
        }
        let items: Vec<ForgeIssue> = self.all(url).await?;
        Ok(items
            .into_iter()
            .filter(|i| i.pull_request.is_none())
            .map(Issue::from)
            .collect())
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

    async fn create_issue(&self, title: &str, body: &str, labels: &[String]) -> Result<Issue> {
        let url = format!("{}/issues", self.repo_api);
        match self.kind {
            SourceKind::Github => {
                let i: ForgeIssue = self
                    .json(
                        self.req(Method::POST, &url)
                            .json(&json!({"title": title, "body": body, "labels": labels})),
                    )
                    .await?;
                Ok(i.into())
            }
            _ => {
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
                    self.send(
                        self.req(
                            Method::POST,
                            &format!("{}/issues/{number}/labels", self.repo_api),
                        )
                        .json(&json!({"labels": ids})),
                    )
                    .await?;
                }
                self.issue(number).await
            }
        }
    }

    async fn close_issue(&self, number: i64) -> Result<()> {
        self.send(
            self.req(Method::PATCH, &format!("{}/issues/{number}", self.repo_api))
                .json(&json!({"state": IssueState::Closed})),
        )
        .await?;
        Ok(())
    }

    async fn comment(&self, number: i64, body: &str) -> Result<()> {
        self.send(
            self.req(
                Method::POST,
                &format!("{}/issues/{number}/comments", self.repo_api),
            )
            .json(&json!({"body": body})),
        )
        .await?;
        Ok(())
    }

    async fn relabel(&self, number: i64, remove: &str, add: &str) -> Result<()> {
        match self.kind {
            SourceKind::Github => {
                if !remove.is_empty() {
                    match self
                        .send(self.req(
                            Method::DELETE,
                            &format!("{}/issues/{number}/labels/{}", self.repo_api, enc(remove)),
                        ))
                        .await
                    {
                        Ok(_) | Err(SourceError::NotFound(_)) => {}
                        Err(e) => return Err(e),
                    }
                }
                if !add.is_empty() {
                    self.send(
                        self.req(
                            Method::POST,
                            &format!("{}/issues/{number}/labels", self.repo_api),
                        )
                        .json(&json!({"labels": [add]})),
                    )
                    .await?;
                }
            }
            _ => {
                let current = self.issue(number).await?.labels;
                let mut names: Vec<&str> = current
                    .iter()
                    .map(String::as_str)
                    .filter(|l| *l != remove)
                    .collect();
                if !add.is_empty() && !names.contains(&add) {
                    names.push(add);
                }
                let ids = self.label_ids(&names).await?;
                self.send(
                    self.req(
                        Method::PUT,
                        &format!("{}/issues/{number}/labels", self.repo_api),
                    )
                    .json(&json!({"labels": ids})),
                )
                .await?;
            }
        }
        Ok(())
    }

    async fn create_pull(&self, p: &NewPull) -> Result<PullRequest> {
        let pr: ForgePull = self
            .json(
                self.req(Method::POST, &format!("{}/pulls", self.repo_api))
                    .json(
                        &json!({"title": p.title, "body": p.body, "head": p.head, "base": p.base}),
                    ),
            )
            .await?;
        let mut pr = PullRequest::from(pr);
        pr.issue = p.issue;
        pr.run_id = p.run_id;
        Ok(pr)
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

    // Gitea and GitHub both reopen with the close's PATCH, state "open".
    async fn reopen_issue(&self, number: i64) -> Result<()> {
        self.send(
            self.req(Method::PATCH, &format!("{}/issues/{number}", self.repo_api))
                .json(&json!({"state": IssueState::Open})),
        )
        .await?;
        Ok(())
    }
}

impl Forge {
    /// The API root (for tests and messages).
    pub fn api(&self) -> &str {
        &self.api
    }
}
