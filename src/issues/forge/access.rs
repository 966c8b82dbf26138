//! What lab's token may do on the forge, as `lab doctor` lists it: read
//! calls only (lab writes nothing to find out), each permission by the
//! forge's own name. The "Forge tokens" table of docs/afk.md says the same.
//!
//! - GitHub, a classic token: `GET /user` answers `X-OAuth-Scopes`, the
//!   token's scopes ("Scopes for OAuth apps" in GitHub's docs). A
//!   fine-grained token or an app's gets no such header; then each read
//!   permission is tried with one small read, and a write permission is
//!   said unknown unless the repo's `permissions.push` already says no.
//! - Gitea/Forgejo: a token's scopes are not shown to it; each read scope
//!   is tried the same way (a token without it gets 403, "token does not
//!   have at least one of required scope(s)").

use reqwest::{Method, StatusCode};

use super::Forge;
use super::http::refusal;
use super::wire::{RepoInfo, User};
use crate::issues::{Result, TokenNeed};
use crate::repo::issue_source::SourceKind;

/// What one read said of a permission.
enum Read {
    Allowed,
    Denied,
    /// Neither (a 404 of something that is not there, say).
    Unsaid,
}

impl Read {
    fn granted(&self) -> Option<bool> {
        match self {
            Read::Allowed => Some(true),
            Read::Denied => Some(false),
            Read::Unsaid => None,
        }
    }

    /// For a read-and-write permission: a refused read says it is
    /// missing; an allowed one says nothing of the write.
    fn write(&self) -> Option<bool> {
        match self {
            Read::Denied => Some(false),
            _ => None,
        }
    }
}

impl Forge {
    /// Tries one read; a rate limit or an unreachable forge is an error.
    async fn try_read(&self, url: &str) -> Result<Read> {
        let resp = self.send_any(self.req(Method::GET, url)).await?;
        let status = resp.status();
        if status.is_success() {
            return Ok(Read::Allowed);
        }
        match refusal(resp).await {
            e @ crate::issues::SourceError::RateLimited { .. } => Err(e),
            _ if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN => {
                Ok(Read::Denied)
            }
            _ => Ok(Read::Unsaid),
        }
    }

    pub(super) async fn token_access(&self) -> Result<Vec<TokenNeed>> {
        let repo: RepoInfo = self.json(self.req(Method::GET, &self.repo_api)).await?;
        let push = repo.permissions.as_ref().map(|p| p.push);
        let branch = repo.default_branch.clone().unwrap_or_else(|| "main".into());
        match self.kind {
            SourceKind::Github => self.github_access(&repo, push, &branch).await,
            _ => self.gitea_access(push).await,
        }
    }

    async fn github_access(
        &self,
        repo: &RepoInfo,
        push: Option<bool>,
        branch: &str,
    ) -> Result<Vec<TokenNeed>> {
        let resp = self
            .send(self.req(Method::GET, &format!("{}/user", self.api)))
            .await?;
        let scopes = resp
            .headers()
            .get("x-oauth-scopes")
            .and_then(|v| v.to_str().ok())
            .map(|s| {
                s.split(',')
                    .map(|x| x.trim().to_owned())
                    .filter(|x| !x.is_empty())
                    .collect::<Vec<_>>()
            });
        let _: User = super::http::read(resp).await?;
        let push_need =
            TokenNeed::new("push access to the repo", "pushing each run's branch", push);
        if let Some(scopes) = scopes {
            let has = |s: &str| scopes.iter().any(|x| x == s);
            let (repo_scope, granted) = if repo.private {
                ("repo", has("repo"))
            } else {
                ("public_repo", has("repo") || has("public_repo"))
            };
            return Ok(vec![
                TokenNeed::new(
                    repo_scope,
                    "issues, pull requests, checks and pushes",
                    Some(granted),
                ),
                push_need,
                TokenNeed::new(
                    "workflow",
                    "pushing a branch that changes .github/workflows (others push without it)",
                    Some(has("workflow")),
                )
                .optional(),
            ]);
        }
        let r = &self.repo_api;
        let issues = self.try_read(&format!("{r}/issues?per_page=1")).await?;
        let pulls = self.try_read(&format!("{r}/pulls?per_page=1")).await?;
        let checks = self
            .try_read(&format!("{r}/commits/{branch}/check-runs?per_page=1"))
            .await?;
        let statuses = self
            .try_read(&format!("{r}/commits/{branch}/status"))
            .await?;
        let actions = self
            .try_read(&format!("{r}/actions/runs?per_page=1"))
            .await?;
        Ok(vec![
            TokenNeed::new("Metadata: read", "reading the repo", Some(true)),
            TokenNeed::new(
                "Contents: read and write",
                "pushing each run's branch",
                push.filter(|p| !p),
            ),
            TokenNeed::new(
                "Issues: read and write",
                "reading, labelling and commenting issues",
                issues.write(),
            ),
            TokenNeed::new(
                "Pull requests: read and write",
                "opening and following pull requests",
                pulls.write(),
            ),
            TokenNeed::new(
                "Checks: read",
                "reading check runs (without it lab reads Actions runs and statuses)",
                checks.granted(),
            )
            .optional(),
            TokenNeed::new(
                "Commit statuses: read",
                "reading commit statuses",
                statuses.granted(),
            )
            .optional(),
            TokenNeed::new(
                "Actions: read",
                "reading workflow runs when check runs are refused",
                actions.granted(),
            )
            .optional(),
            TokenNeed::new(
                "Workflows: read and write",
                "pushing a branch that changes .github/workflows (others push without it)",
                None,
            )
            .optional(),
        ])
    }

    async fn gitea_access(&self, push: Option<bool>) -> Result<Vec<TokenNeed>> {
        let user = self.try_read(&format!("{}/user", self.api)).await?;
        let issues = self
            .try_read(&format!("{}/issues?type=issues&limit=1", self.repo_api))
            .await?;
        let mut needs = vec![
            TokenNeed::new(
                "read:user",
                "knowing which account lab acts as",
                user.granted(),
            ),
            TokenNeed::new(
                "write:repository",
                "pushing each run's branch and opening pull requests",
                push.filter(|p| !p),
            ),
            TokenNeed::new(
                "write:issue",
                "reading, labelling and commenting issues",
                issues.write(),
            ),
        ];
        // An organisation's labels: a user's repo has none (404).
        if let Some(owner) = self.owner() {
            let org = self
                .try_read(&format!("{}/orgs/{owner}/labels?limit=1", self.api))
                .await?;
            if !matches!(org, Read::Unsaid) {
                needs.push(
                    TokenNeed::new(
                        "read:organization",
                        "the organisation's labels (without it only the repo's labels are used)",
                        org.granted(),
                    )
                    .optional(),
                );
            }
        }
        Ok(needs)
    }
}
