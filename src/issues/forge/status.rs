//! A pull request's state for following it (issue 14 §1), read from the
//! forge. GitHub (its REST description): `GET /repos/{o}/{r}/pulls/{n}`
//! (`head.sha`, `state`, `merged`, `user.login`), `GET
//! .../commits/{sha}/check-runs` (`check_runs[].name/status/conclusion/
//! output.title/summary`), `GET .../commits/{sha}/status` (combined:
//! `statuses[].context/state/description`; `pending` with no statuses means
//! none), `GET .../pulls/{n}/reviews` (`state` `CHANGES_REQUESTED`) and
//! `GET .../pulls/{n}/comments` (review comments). Gitea/Forgejo (its
//! swagger): the pull request, `GET .../commits/{sha}/status` (its
//! `CommitStatus` names the state `status`), `GET .../pulls/{n}/reviews`
//! (`REQUEST_CHANGES`) and the conversation, `GET .../issues/{n}/comments`.
//! Five requests a poll on GitHub, four on Gitea (one page each up to 100 /
//! 50 items).

use reqwest::Method;
use serde::Deserialize;

use super::Forge;
use super::paging::PAGE;
use super::wire::User;
use crate::issues::Result;
use crate::issues::pull_status::{CheckState, Failure, One, PullComment, PullStatus, Review};
use crate::repo::issue_source::SourceKind;

#[derive(Deserialize)]
struct Head {
    sha: String,
}

#[derive(Deserialize)]
struct Pull {
    state: String,
    head: Head,
    #[serde(default)]
    merged: Option<bool>,
    #[serde(default)]
    merged_at: Option<String>,
    #[serde(default)]
    user: Option<User>,
}

#[derive(Deserialize)]
struct Output {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    summary: Option<String>,
}

#[derive(Deserialize)]
struct CheckRun {
    name: String,
    status: String,
    #[serde(default)]
    conclusion: Option<String>,
    #[serde(default)]
    output: Option<Output>,
}

#[derive(Deserialize)]
struct CheckRuns {
    #[serde(default)]
    check_runs: Vec<CheckRun>,
}

#[derive(Deserialize)]
struct Status {
    #[serde(default)]
    context: String,
    /// GitHub's `state`, Gitea's `status`.
    #[serde(alias = "status")]
    state: String,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Deserialize)]
struct Combined {
    #[serde(default)]
    statuses: Option<Vec<Status>>,
}

#[derive(Deserialize)]
struct ForgeReview {
    id: i64,
    #[serde(default)]
    user: Option<User>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    state: String,
}

#[derive(Deserialize)]
struct ForgeComment {
    id: i64,
    #[serde(default)]
    user: Option<User>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    line: Option<i64>,
}

fn login(u: Option<User>) -> String {
    u.map(|u| u.login).unwrap_or_default()
}

/// A check run: GitHub's `status` is `completed` once it has a conclusion;
/// `success`, `neutral` and `skipped` pass.
fn check_run(c: CheckRun) -> One {
    if c.status != "completed" {
        return One::Pending;
    }
    let conclusion = c.conclusion.unwrap_or_default();
    if matches!(conclusion.as_str(), "success" | "neutral" | "skipped") {
        return One::Green;
    }
    let out = c.output.unwrap_or(Output {
        title: None,
        summary: None,
    });
    let said: Vec<String> = [out.title, out.summary]
        .into_iter()
        .flatten()
        .filter(|s| !s.trim().is_empty())
        .collect();
    One::Red(Failure {
        name: c.name,
        text: [vec![conclusion], said].concat().join(": "),
    })
}

/// A commit status: `pending`; `success` (Gitea also `warning`, `skipped`)
/// passes; `failure` and `error` fail.
fn status(s: Status) -> One {
    match s.state.as_str() {
        "pending" => One::Pending,
        "success" | "warning" | "skipped" => One::Green,
        _ => One::Red(Failure {
            name: s.context,
            text: [Some(s.state), s.description.filter(|d| !d.is_empty())]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(": "),
        }),
    }
}

impl Forge {
    pub(super) async fn read_pull_status(&self, number: i64) -> Result<PullStatus> {
        let api = &self.repo_api;
        let p: Pull = self
            .json(self.req(Method::GET, &format!("{api}/pulls/{number}")))
            .await?;
        let sha = super::enc(&p.head.sha);
        let mut checks: Vec<One> = Vec::new();
        if self.kind == SourceKind::Github {
            let runs: CheckRuns = self
                .json(self.req(
                    Method::GET,
                    &format!("{api}/commits/{sha}/check-runs?per_page=100"),
                ))
                .await?;
            checks.extend(runs.check_runs.into_iter().map(check_run));
        }
        let combined: Combined = self
            .json(self.req(
                Method::GET,
                &format!("{api}/commits/{sha}/status?per_page=100&limit={PAGE}"),
            ))
            .await?;
        checks.extend(
            combined
                .statuses
                .unwrap_or_default()
                .into_iter()
                .map(status),
        );
        let reviews: Vec<ForgeReview> = self
            .all(format!(
                "{api}/pulls/{number}/reviews?per_page={PAGE}&limit={PAGE}"
            ))
            .await?;
        let comments_at = match self.kind {
            SourceKind::Github => format!("{api}/pulls/{number}/comments?per_page={PAGE}"),
            _ => format!("{api}/issues/{number}/comments?limit={PAGE}"),
        };
        let comments: Vec<ForgeComment> = self.all(comments_at).await?;
        let merged = p.merged.unwrap_or(false) || p.merged_at.is_some();
        Ok(PullStatus {
            head_sha: p.head.sha,
            author: login(p.user),
            checks: CheckState::fold(checks),
            reviews: reviews
                .into_iter()
                .map(|r| Review {
                    id: r.id,
                    author: login(r.user),
                    body: r.body.unwrap_or_default(),
                    changes_requested: matches!(
                        r.state.as_str(),
                        "CHANGES_REQUESTED" | "REQUEST_CHANGES"
                    ),
                })
                .collect(),
            comments: comments
                .into_iter()
                .map(|c| PullComment {
                    id: c.id,
                    author: login(c.user),
                    body: c.body.unwrap_or_default(),
                    path: c.path,
                    line: c.line,
                })
                .collect(),
            merged,
            closed: p.state == "closed" && !merged,
        })
    }
}
