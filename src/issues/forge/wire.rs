//! What the forges send, as lab reads it: only the fields lab uses, each
//! tolerant of what the published descriptions allow (GitHub's issue
//! `labels` items are strings or objects; bodies may be null).

use serde::Deserialize;
use serde_json::Value;

use super::super::{Issue, PullRequest};
use crate::domain::IssueState;

#[derive(Deserialize)]
pub struct Label {
    #[serde(default)]
    pub id: i64,
    pub name: String,
}

/// An issue's label: GitHub's description (`issue.labels.items`) is
/// `oneOf: [string, object]`, so one string label must not fail a listing.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum IssueLabel {
    Name(String),
    Object(Label),
}

impl IssueLabel {
    fn name(self) -> String {
        match self {
            IssueLabel::Name(n) => n,
            IssueLabel::Object(l) => l.name,
        }
    }
}

#[derive(Deserialize)]
pub struct ForgeIssue {
    pub number: i64,
    title: String,
    #[serde(default)]
    body: Option<String>,
    state: IssueState,
    #[serde(default)]
    pub labels: Vec<IssueLabel>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    user: Option<User>,
    /// GitHub's: the author's standing in the repo.
    #[serde(default)]
    author_association: Option<String>,
    /// GitHub lists pull requests among issues; they carry this key (an
    /// object, or null on Gitea's issues).
    #[serde(default)]
    pub pull_request: Option<Value>,
}

impl ForgeIssue {
    /// A pull request listed among the issues (GitHub; Gitea without
    /// `type=issues`): `pull_request` is there and not null.
    pub fn is_pull(&self) -> bool {
        self.pull_request.as_ref().is_some_and(|p| !p.is_null())
    }
}

#[derive(Deserialize)]
pub struct User {
    pub login: String,
    /// GitHub's `User`, `Bot` or `Organization`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
}

#[derive(Deserialize)]
pub struct ForgeComment {
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub user: Option<User>,
    #[serde(default)]
    pub created_at: String,
}

#[derive(Deserialize)]
struct Branch {
    #[serde(rename = "ref")]
    name: String,
}

#[derive(Deserialize)]
pub struct ForgePull {
    number: i64,
    title: String,
    #[serde(default)]
    body: Option<String>,
    html_url: String,
    state: String,
    head: Branch,
    base: Branch,
}

impl ForgePull {
    pub fn head(&self) -> &str {
        &self.head.name
    }
}

impl From<ForgeIssue> for Issue {
    fn from(i: ForgeIssue) -> Self {
        let body = i.body.unwrap_or_default();
        let knobs = crate::issues::directives::fenced(&body)
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        Issue {
            number: i.number,
            title: i.title,
            body,
            state: i.state,
            labels: i.labels.into_iter().map(IssueLabel::name).collect(),
            url: i.html_url,
            comments: Vec::new(),
            knobs,
            author: i.user.map(|u| u.login),
            author_association: i.author_association,
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
            api_url: None,
            head: p.head.name,
            base: p.base.name,
            state: p.state,
            issue: None,
            run_id: None,
        }
    }
}

impl ForgeIssue {
    /// Whether the issue carries a label, named in any case (GitHub's label
    /// names and its `labels=` filter ignore case).
    pub fn has_label(&self, name: &str) -> bool {
        self.labels.iter().any(|l| match l {
            IssueLabel::Name(n) => n.eq_ignore_ascii_case(name),
            IssueLabel::Object(o) => o.name.eq_ignore_ascii_case(name),
        })
    }
}

/// A repository as lab reads it to check a token: who may push, and what
/// the forge would show lab.
#[derive(Deserialize)]
pub struct RepoInfo {
    #[serde(default)]
    pub private: bool,
    #[serde(default)]
    pub default_branch: Option<String>,
    /// The token's account's rights on the repo (GitHub and Gitea both
    /// send it to an authenticated caller).
    #[serde(default)]
    pub permissions: Option<RepoPermissions>,
}

#[derive(Deserialize)]
pub struct RepoPermissions {
    #[serde(default)]
    pub push: bool,
}
