//! A pull request's state for following it (issue 14 §1, issue 24), read
//! from the forge. GitHub (its REST description): `GET
//! /repos/{o}/{r}/pulls/{n}` (`head.sha`, `state`, `merged`, `mergeable`,
//! `mergeable_state`, `user.login`), the checks from every source lab can
//! read, each one's refusal said and the others read on: `GET
//! .../commits/{sha}/check-runs` (`check_runs[].name/status/conclusion/
//! output.title/summary`; a fine-grained token without the Checks
//! permission gets 403), `GET .../commits/{sha}/status` (combined:
//! `statuses[].context/state/description`; `pending` with no statuses means
//! none) and, only when check runs cannot be read, `GET
//! .../actions/runs?head_sha=` (`workflow_runs[].name/status/conclusion`);
//! the feedback: `GET .../pulls/{n}/reviews` (`CHANGES_REQUESTED`, and a
//! `COMMENTED` review's body), `GET .../pulls/{n}/comments` (review comments
//! on a line) and `GET .../issues/{n}/comments` (the conversation).
//! Gitea/Forgejo (its swagger): the pull request (`mergeable`), `GET
//! .../commits/{sha}/status` (its `CommitStatus` names the state
//! `status`), `GET .../pulls/{n}/reviews` (`REQUEST_CHANGES`, `COMMENT`,
//! `dismissed`), each review's line comments `GET
//! .../pulls/{n}/reviews/{id}/comments`, and the conversation, `GET
//! .../issues/{n}/comments` (which takes no page or limit: all at once).

use reqwest::Method;
use serde::Deserialize;

use super::Forge;
use super::paging::PAGE;
use super::wire::User;
use crate::issues::pull_status::{
    CheckState, Failure, Mergeable, One, PullComment, PullStatus, Review,
};
use crate::issues::{Result, SourceError};
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
    /// GitHub: `null` while it computes after a push; Gitea: a bool.
    #[serde(default)]
    mergeable: Option<bool>,
    /// GitHub: `dirty` when it conflicts.
    #[serde(default)]
    mergeable_state: Option<String>,
}

#[derive(Deserialize)]
struct WorkflowRun {
    #[serde(default)]
    name: Option<String>,
    status: String,
    #[serde(default)]
    conclusion: Option<String>,
}

#[derive(Deserialize)]
struct WorkflowRuns {
    #[serde(default)]
    workflow_runs: Vec<WorkflowRun>,
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
    /// Gitea's: a dismissed review says nothing any more.
    #[serde(default)]
    dismissed: bool,
    /// Gitea's: how many line comments it carries.
    #[serde(default)]
    comments_count: i64,
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
    /// Gitea's review comments say where as a position in the diff.
    #[serde(default)]
    position: Option<i64>,
}

fn login(u: Option<User>) -> String {
    u.map(|u| u.login).unwrap_or_default()
}

/// What a check's conclusion leaves to do: `success`, `neutral` and
/// `skipped` pass; `action_required` (a workflow awaiting a maintainer's
/// approval), `stale` and `cancelled` are nothing the agent can fix;
/// anything else (`failure`, `timed_out`, `startup_failure`) fails.
fn concluded(name: String, conclusion: String, said: Vec<String>) -> One {
    if matches!(conclusion.as_str(), "success" | "neutral" | "skipped") {
        return One::Green;
    }
    let f = Failure {
        name,
        text: [vec![conclusion.clone()], said].concat().join(": "),
    };
    if matches!(
        conclusion.as_str(),
        "action_required" | "stale" | "cancelled"
    ) {
        One::Blocked(f)
    } else {
        One::Red(f)
    }
}

/// A workflow run (GitHub Actions): as a check run.
fn workflow_run(w: WorkflowRun) -> One {
    if w.status != "completed" {
        // `action_required` is also a status while it waits for approval.
        if w.status == "action_required" || w.status == "waiting" {
            return concluded(
                w.name.unwrap_or_default(),
                "action_required".into(),
                Vec::new(),
            );
        }
        return One::Pending;
    }
    concluded(
        w.name.unwrap_or_default(),
        w.conclusion.unwrap_or_default(),
        Vec::new(),
    )
}

/// A check run: GitHub's `status` is `completed` once it has a conclusion.
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
    concluded(c.name, conclusion, said)
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

/// A check source lab could not read: why, and what it needs.
fn unreadable(what: &str, e: &SourceError) -> String {
    format!("{what}: {e}")
}

impl Forge {
    pub(super) async fn read_pull_status(&self, number: i64) -> Result<PullStatus> {
        let api = &self.repo_api;
        let p: Pull = self
            .json(self.req(Method::GET, &format!("{api}/pulls/{number}")))
            .await?;
        let sha = super::enc(&p.head.sha);
        let mut checks: Vec<One> = Vec::new();
        let mut refused: Vec<String> = Vec::new();
        // Each source on its own: one refused (a token without that
        // permission) leaves the others read. A rate limit stops the poll.
        let tolerate = |r: Result<()>, what: &str, refused: &mut Vec<String>| match r {
            Err(e @ SourceError::RateLimited { .. }) => Err(e),
            Err(e) => {
                refused.push(unreadable(what, &e));
                Ok(())
            }
            Ok(()) => Ok(()),
        };
        if self.kind == SourceKind::Github {
            let runs: Result<CheckRuns> = self
                .json(self.req(
                    Method::GET,
                    &format!("{api}/commits/{sha}/check-runs?per_page=100"),
                ))
                .await;
            let runs_ok = runs.is_ok();
            tolerate(
                runs.map(|r| checks.extend(r.check_runs.into_iter().map(check_run))),
                "check runs",
                &mut refused,
            )?;
            if !runs_ok {
                // The Actions runs of the head stand in for its check runs.
                let wf: Result<WorkflowRuns> = self
                    .json(self.req(
                        Method::GET,
                        &format!("{api}/actions/runs?head_sha={sha}&per_page=100"),
                    ))
                    .await;
                tolerate(
                    wf.map(|w| checks.extend(w.workflow_runs.into_iter().map(workflow_run))),
                    "Actions runs",
                    &mut refused,
                )?;
            }
        }
        let combined: Result<Combined> = self
            .json(self.req(
                Method::GET,
                &format!("{api}/commits/{sha}/status?per_page=100&limit={PAGE}"),
            ))
            .await;
        tolerate(
            combined.map(|c| checks.extend(c.statuses.unwrap_or_default().into_iter().map(status))),
            "commit statuses",
            &mut refused,
        )?;
        let reviews: Vec<ForgeReview> = self
            .all(format!(
                "{api}/pulls/{number}/reviews?per_page={PAGE}&limit={PAGE}"
            ))
            .await?;
        let mut comments: Vec<ForgeComment> = Vec::new();
        match self.kind {
            SourceKind::Github => {
                comments.extend(
                    self.all::<ForgeComment>(format!(
                        "{api}/pulls/{number}/comments?per_page={PAGE}"
                    ))
                    .await?,
                );
                comments.extend(
                    self.all::<ForgeComment>(format!(
                        "{api}/issues/{number}/comments?per_page={PAGE}"
                    ))
                    .await?,
                );
            }
            _ => {
                for r in reviews
                    .iter()
                    .filter(|r| r.comments_count > 0 && !r.dismissed)
                {
                    comments.extend(
                        self.all::<ForgeComment>(format!(
                            "{api}/pulls/{number}/reviews/{}/comments",
                            r.id
                        ))
                        .await?,
                    );
                }
                // Gitea's conversation takes no page or limit: all at once.
                comments.extend(
                    self.all::<ForgeComment>(format!("{api}/issues/{number}/comments"))
                        .await?,
                );
            }
        }
        let mut seen = std::collections::HashSet::new();
        comments.retain(|c| seen.insert(c.id));
        let merged = p.merged.unwrap_or(false) || p.merged_at.is_some();
        let mergeable = match (p.mergeable, p.mergeable_state.as_deref()) {
            (_, Some("dirty")) | (Some(false), _) => Mergeable::Conflict,
            (Some(true), _) => Mergeable::Yes,
            (None, _) => Mergeable::Unknown,
        };
        Ok(PullStatus {
            head_sha: p.head.sha,
            author: login(p.user),
            checks: CheckState::fold(checks),
            unreadable: refused,
            mergeable,
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
                    commented: matches!(r.state.as_str(), "COMMENTED" | "COMMENT"),
                    dismissed: r.dismissed || r.state == "DISMISSED",
                })
                .collect(),
            comments: comments
                .into_iter()
                .map(|c| PullComment {
                    id: c.id,
                    author: login(c.user),
                    body: c.body.unwrap_or_default(),
                    path: c.path,
                    line: c.line.or(c.position),
                })
                .collect(),
            merged,
            closed: p.state == "closed" && !merged,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(status: &str, conclusion: Option<&str>) -> CheckRun {
        CheckRun {
            name: "ci".into(),
            status: status.into(),
            conclusion: conclusion.map(str::to_owned),
            output: None,
        }
    }

    /// Every conclusion GitHub's REST description gives a check run, and
    /// what lab makes of it.
    #[test]
    fn every_conclusion_has_its_meaning() {
        let kind = |o: One| match o {
            One::Pending => "pending",
            One::Green => "green",
            One::Red(_) => "red",
            One::Blocked(_) => "blocked",
        };
        for (c, want) in [
            ("success", "green"),
            ("neutral", "green"),
            ("skipped", "green"),
            ("failure", "red"),
            ("timed_out", "red"),
            ("startup_failure", "red"),
            ("action_required", "blocked"),
            ("stale", "blocked"),
            ("cancelled", "blocked"),
        ] {
            assert_eq!(kind(check_run(run("completed", Some(c)))), want, "{c}");
        }
        for s in ["queued", "in_progress", "waiting", "requested", "pending"] {
            assert_eq!(kind(check_run(run(s, None))), "pending", "{s}");
        }
        let wf = |status: &str, c: Option<&str>| WorkflowRun {
            name: Some("ci".into()),
            status: status.into(),
            conclusion: c.map(str::to_owned),
        };
        assert_eq!(kind(workflow_run(wf("action_required", None))), "blocked");
        assert_eq!(kind(workflow_run(wf("in_progress", None))), "pending");
        assert_eq!(kind(workflow_run(wf("completed", Some("failure")))), "red");
        assert_eq!(
            kind(status(Status {
                context: "ci".into(),
                state: "error".into(),
                description: None,
            })),
            "red"
        );
    }
}
