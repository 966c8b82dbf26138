//! Issue sources: where AFK work comes from. lab's built-in tracker, or a
//! forge (Gitea/Forgejo, GitHub) over its REST API, behind one trait.
//!
//! Invariant: forge tokens stay in this module and the store: they never
//! reach a run's environment, workspace or log.

mod builtin;
pub mod directives;
mod forge;
pub mod pull_status;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::IssueState;
use crate::repo::Repo;
use crate::repo::issue_source::SourceKind;
use crate::store::Store;
pub use builtin::Builtin;
pub use forge::Forge;
pub use forge::http_client as forge_http_client;
pub use pull_status::{CheckState, PullStatus};

/// An issue, as every source describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Issue {
    pub number: i64,
    pub title: String,
    pub body: String,
    pub state: IssueState,
    pub labels: Vec<String>,
    /// Where a person reads it (a forge's page), when there is one.
    pub url: Option<String>,
    /// Filled when one issue is asked for.
    pub comments: Vec<Comment>,
    /// Its directives (issue 27): on the built-in tracker as set
    /// (canonical); on a forge, the `key: value` lines of the ```` ```lab ````
    /// block in its body, as written (`{}` when there is none, or the block
    /// is broken).
    #[serde(default)]
    #[schema(schema_with = crate::issues::knobs_schema)]
    pub knobs: serde_json::Map<String, serde_json::Value>,
    /// Who opened it, on a forge (`null` on the built-in tracker, where the
    /// operator does).
    #[serde(default)]
    pub author: Option<String>,
    /// GitHub's word for the author's standing in the repo (`OWNER`,
    /// `MEMBER`, `COLLABORATOR`, `CONTRIBUTOR`, …); `null` elsewhere.
    #[serde(default)]
    pub author_association: Option<String>,
}

/// The schema of an issue's `knobs`: values by key.
pub fn knobs_schema() -> utoipa::openapi::schema::ObjectBuilder {
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(true)))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Comment {
    pub author: String,
    pub body: String,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PullRequest {
    pub number: i64,
    pub title: String,
    pub body: String,
    /// Where a person reads it: the forge's page, or lab's own page for the
    /// built-in tracker (`/repos/{name}/pulls/{n}`).
    pub url: String,
    /// lab's JSON API for it (built-in tracker); `null` on a forge.
    pub api_url: Option<String>,
    pub head: String,
    pub base: String,
    pub state: String,
    /// The issue it resolves, when lab knows it.
    pub issue: Option<i64>,
    /// The run it came from, when lab knows it.
    pub run_id: Option<i64>,
}

/// A pull request to open.
#[derive(Debug, Clone)]
pub struct NewPull {
    pub title: String,
    pub body: String,
    pub head: String,
    pub base: String,
    pub issue: Option<i64>,
    pub run_id: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    /// The forge asks lab to wait.
    #[error("the forge's rate limit is reached; lab waits {} s", .retry_after.as_secs())]
    RateLimited { retry_after: Duration },
    #[error("{0}")]
    Forge(String),
    /// The forge refused lab's token (401, 403 but a rate limit).
    #[error("{0}")]
    Denied(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

pub type Result<T> = std::result::Result<T, SourceError>;

/// The forge account lab's token acts as (`GET /user`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ForgeIdentity {
    pub login: String,
    /// Whether it looks like the operator's own account rather than one
    /// for lab: a person's account (not a bot) that owns the repo. Then
    /// its comments on lab's pull requests are a person's words, and it
    /// cannot request changes on them (neither forge lets an author).
    pub is_operator: bool,
}

/// One permission lab's forge token needs, by the forge's own name for it,
/// and whether the token has it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct TokenNeed {
    /// As the forge names it: `repo` (a classic GitHub scope), `Checks:
    /// read` (a fine-grained GitHub permission), `write:issue` (Gitea).
    pub permission: String,
    /// What lab does with it.
    pub used_for: String,
    /// `true` or `false` when the forge says; `null` when it cannot say
    /// without lab writing something (a write permission of a
    /// fine-grained or Gitea token).
    pub granted: Option<bool>,
    /// lab works without it, on a lesser path `used_for` names.
    pub optional: bool,
}

impl TokenNeed {
    pub(crate) fn new(permission: &str, used_for: &str, granted: Option<bool>) -> TokenNeed {
        TokenNeed {
            permission: permission.to_owned(),
            used_for: used_for.to_owned(),
            granted,
            optional: false,
        }
    }

    pub(crate) fn optional(self) -> TokenNeed {
        TokenNeed {
            optional: true,
            ..self
        }
    }

    /// Needed and known to be missing.
    pub fn missing(&self) -> bool {
        self.granted == Some(false)
    }
}

/// One place issues live.
#[async_trait::async_trait]
pub trait IssueSource: Send + Sync {
    /// The forge account lab acts as; `None` for the built-in tracker.
    async fn identity(&self) -> Result<Option<ForgeIdentity>> {
        Ok(None)
    }
    /// The permissions lab needs of its token here, each with whether the
    /// token has it (read calls only: lab writes nothing to find out). The
    /// built-in tracker needs none.
    async fn access(&self) -> Result<Vec<TokenNeed>> {
        Ok(Vec::new())
    }
    /// Whether the repo can be reached with lab's token (one call); what
    /// failed otherwise. The built-in tracker always can.
    async fn reachable(&self) -> Result<()> {
        Ok(())
    }
    fn kind(&self) -> SourceKind;
    /// Issues, optionally only open/closed ones with a label. A forge is
    /// asked once, and again only while there are more pages.
    /// Issues with `label` (any, when none) in `state` (every issue, when
    /// none).
    async fn list(&self, label: Option<&str>, state: Option<IssueState>) -> Result<Vec<Issue>>;
    /// One issue with its comments.
    async fn issue(&self, number: i64) -> Result<Issue>;
    /// A new issue. `knobs` are its directives, checked and canonical,
    /// written with it (a built-in issue's, so that no claim can come
    /// between the issue and its knobs); a forge takes none (its issues'
    /// directives are a block in their body), and is never given any.
    async fn create_issue(
        &self,
        title: &str,
        body: &str,
        labels: &[String],
        knobs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Issue>;
    async fn close_issue(&self, number: i64) -> Result<()>;
    async fn comment(&self, number: i64, body: &str) -> Result<()>;
    /// Takes `remove` off an issue and puts `add` on it.
    async fn relabel(&self, number: i64, remove: &str, add: &str) -> Result<()>;
    /// Opens a pull request of a branch that is already where the source can
    /// see it (the repo for the built-in tracker, pushed for a forge).
    async fn create_pull(&self, p: &NewPull) -> Result<PullRequest>;
    async fn pulls(&self) -> Result<Vec<PullRequest>>;
    /// One pull request.
    async fn pull(&self, number: i64) -> Result<PullRequest>;
    /// Opens a closed issue again.
    async fn reopen_issue(&self, number: i64) -> Result<()>;
    /// A pull request as lab follows it: head, checks, reviews, comments
    /// (`afk/forge_follow.rs`). The built-in tracker reports no checks and
    /// no reviews: its check is the repo's `check_command`.
    async fn pull_status(&self, number: i64) -> Result<PullStatus> {
        let p = self.pull(number).await?;
        Ok(PullStatus {
            head_sha: String::new(),
            author: String::new(),
            checks: CheckState::None,
            unreadable: Vec::new(),
            mergeable: pull_status::Mergeable::Unknown,
            reviews: Vec::new(),
            comments: Vec::new(),
            merged: p.state == "merged",
            closed: p.state == "closed",
        })
    }
    /// Replaces a pull request's description (lab's receipt in it, issue 28
    /// §5). The built-in tracker shows the receipt on its page instead, and
    /// keeps the description as it was opened.
    async fn set_pull_body(&self, _number: i64, _body: &str) -> Result<()> {
        Ok(())
    }
    /// Replaces an issue's directives (issue 27), already checked against
    /// its repo. Only the built-in tracker keeps them; on a forge they are
    /// the ```` ```lab ```` block of the issue's body.
    async fn set_knobs(
        &self,
        _number: i64,
        _knobs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        Err(SourceError::Invalid(
            "on a forge an issue's knobs are the ```lab block of its body (one `key: value` line \
             each): edit the issue on the forge"
                .to_owned(),
        ))
    }
    /// Whether the issue's author may direct its AFK run (issue 27): write
    /// access to the repo. Everyone may on the built-in tracker, where only
    /// the operator opens issues.
    async fn may_direct(&self, _issue: &Issue) -> Result<bool> {
        Ok(true)
    }
    /// Posts lab's words on pull request `number` as a review comment (a
    /// review that neither approves nor asks for changes); a tracker with
    /// no reviews takes it as a comment.
    async fn review_comment(&self, number: i64, body: &str) -> Result<()> {
        self.comment(number, body).await
    }
    /// Whether forge account `login` may write to the repo (a `/lab
    /// approve` comment's author). No one on the built-in tracker, whose
    /// decisions are made on lab's own pages.
    async fn may_write(&self, _login: &str) -> Result<bool> {
        Ok(false)
    }
    /// Puts `add` on an issue and takes `remove` off it, a label at a time
    /// (taking off a label the issue does not have is no error).
    async fn edit_labels(&self, number: i64, add: &[String], remove: &[String]) -> Result<()> {
        for r in remove {
            self.relabel(number, r, "").await?;
        }
        for a in add {
            self.relabel(number, "", a).await?;
        }
        Ok(())
    }
}

/// What a repo's issue source is made from: lab's store (the built-in
/// tracker), the URL runs and links reach lab at, and the one HTTP client
/// every forge call goes through.
#[derive(Clone)]
pub struct Sources {
    store: Store,
    lab_url: String,
    http: reqwest::Client,
    /// Each forge account lab's tokens act as, read once per forge, repo
    /// and token.
    identities: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, ForgeIdentity>>>,
}

impl Sources {
    pub fn new(store: Store, lab_url: String) -> Sources {
        Sources {
            store,
            lab_url,
            http: forge_http_client(),
            identities: Default::default(),
        }
    }

    /// What identifies a repo's forge account: its forge, its repo on it,
    /// and (a digest of) the token.
    fn identity_key(repo: &Repo) -> Option<String> {
        if repo.issues.source == SourceKind::Builtin {
            return None;
        }
        let token = forge_token(repo).unwrap_or_default();
        Some(format!(
            "{}|{}|{}",
            repo.issues.forge_url.as_deref().unwrap_or(""),
            repo.issues.forge_repo.as_deref().unwrap_or(""),
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(token.as_bytes()))
        ))
    }

    /// The forge account lab acts as for `repo`, if it was read.
    pub fn known_identity(&self, repo: &Repo) -> Option<ForgeIdentity> {
        let key = Self::identity_key(repo)?;
        self.identities.lock().expect("poisoned").get(&key).cloned()
    }

    /// The forge account lab acts as for `repo`: read once (`GET /user`),
    /// then kept.
    pub async fn identity(&self, repo: &Repo) -> Result<Option<ForgeIdentity>> {
        let Some(key) = Self::identity_key(repo) else {
            return Ok(None);
        };
        if let Some(i) = self.identities.lock().expect("poisoned").get(&key) {
            return Ok(Some(i.clone()));
        }
        let read = self.of(repo).identity().await?;
        if let Some(i) = &read {
            self.identities
                .lock()
                .expect("poisoned")
                .insert(key, i.clone());
        }
        Ok(read)
    }

    /// The one HTTP client lab's outside calls go through (notifications
    /// use it too).
    pub fn http(&self) -> reqwest::Client {
        self.http.clone()
    }

    /// The issue source of a repo.
    pub fn of(&self, repo: &Repo) -> Box<dyn IssueSource> {
        match repo.issues.source {
            SourceKind::Builtin => Box::new(Builtin::new(self.store.clone(), repo, &self.lab_url)),
            kind => Box::new(Forge::new(kind, repo, self.http.clone())),
        }
    }
}

/// The forge token lab uses for a repo: its own, or lab's environment's.
pub fn forge_token(repo: &Repo) -> Option<String> {
    repo.issues.forge_token.clone().or_else(|| {
        let var = match repo.issues.source {
            SourceKind::Gitea => "LAB_GITEA_TOKEN",
            SourceKind::Github => "LAB_GITHUB_TOKEN",
            SourceKind::Builtin => return None,
        };
        std::env::var(var).ok().filter(|t| !t.is_empty())
    })
}
