//! Labels on Gitea/Forgejo, which adds and sets them by id.
//!
//! A repo's labels come in pages (`GET /repos/{o}/{r}/labels`, no `Link`,
//! `X-Total-Count`); an organisation's labels (`GET /orgs/{org}/labels`)
//! are not among them, yet an issue of the org's repos may carry them. lab
//! creates a label only when it is in neither list, so it never makes a
//! repo copy of a label the repo already sees (Gitea does not refuse a
//! duplicate name).

use reqwest::Method;
use serde_json::json;

use super::Forge;
use super::paging::PAGE;
use super::wire::Label;
use crate::issues::{Result, SourceError};

impl Forge {
    pub(super) async fn repo_labels(&self) -> Result<Vec<Label>> {
        self.all(format!("{}/labels?limit={PAGE}", self.repo_api))
            .await
    }

    /// The labels of the repo's owner when it is an organisation (a user
    /// has none: 404; a token without `read:organization` gets 403: lab
    /// goes on with the repo's own labels).
    pub(super) async fn org_labels(&self) -> Result<Vec<Label>> {
        let Some(owner) = self.owner() else {
            return Ok(Vec::new());
        };
        let url = format!(
            "{}/orgs/{}/labels?limit={PAGE}",
            self.api,
            super::enc(owner)
        );
        match self.all(url).await {
            Err(SourceError::NotFound(_)) => Ok(Vec::new()),
            Err(SourceError::Denied(e)) => {
                tracing::debug!(error = %e, "the organisation's labels are not lab's to read");
                Ok(Vec::new())
            }
            other => other,
        }
    }

    /// The id of each name: the repo's label, else the org's, else a new
    /// repo label.
    pub(super) async fn label_ids(&self, names: &[&str]) -> Result<Vec<i64>> {
        let repo = self.repo_labels().await?;
        let mut org: Option<Vec<Label>> = None;
        let mut ids = Vec::new();
        for n in names.iter().filter(|n| !n.is_empty()) {
            if let Some(l) = repo.iter().find(|l| l.name == *n) {
                ids.push(l.id);
                continue;
            }
            if org.is_none() {
                org = Some(self.org_labels().await?);
            }
            if let Some(l) = org.iter().flatten().find(|l| l.name == *n) {
                ids.push(l.id);
                continue;
            }
            let l: Label = self
                .json(
                    self.req(Method::POST, &format!("{}/labels", self.repo_api))
                        .json(&json!({"name": n, "color": "#8c8c8c"})),
                )
                .await?;
            ids.push(l.id);
        }
        Ok(ids)
    }
}
