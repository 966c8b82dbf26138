//! The fake forge's routes for following a pull request (issue 14 §1): one
//! pull request with its head as pushed, a CI that judges each head, the
//! reviews and the people's comments. GitHub reports the CI as a check run
//! (and no commit status: its combined status is then `pending` with no
//! statuses); Gitea as a commit status (its `CommitStatus` says `status`).

use std::path::PathBuf;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::gate::{ListQ, paged};
use super::{Fake, Flavor, repo_path, user};

/// How the fake's CI judges a head.
#[derive(Default, Debug, Clone)]
pub struct Ci {
    /// Every head gets this state (`pending`, `success`, `failure`).
    pub all: Option<String>,
    /// Else: `success` when the head's tree has this file, else `failure`
    /// (read in `git_dir`, the repo lab pushes to).
    pub green_file: Option<String>,
    pub git_dir: Option<PathBuf>,
}

fn git(dir: &std::path::Path, args: &[&str]) -> Option<String> {
    let o = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_owned())
}

/// The CI's state for a head, or None when it reports nothing.
fn ci_state(ci: &Ci, sha: &str) -> Option<String> {
    if let Some(s) = &ci.all {
        return Some(s.clone());
    }
    let (file, dir) = (ci.green_file.as_deref()?, ci.git_dir.as_deref()?);
    let has = git(dir, &["cat-file", "-e", &format!("{sha}:{file}")]).is_some();
    Some(if has { "success" } else { "failure" }.to_owned())
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response()
}

pub(super) async fn get_pull(State(f): State<Fake>, Path(n): Path<i64>) -> Response {
    let mut guard = f.state.lock().unwrap();
    let s = &mut *guard;
    let dir = s.ci.git_dir.clone();
    let Some(p) = s.pulls.iter_mut().find(|p| p["number"] == n) else {
        return not_found();
    };
    // The head is what was pushed last, as on a real forge, a few reads
    // late when the fake is told to be (`head_lag`).
    if let (Some(dir), Some(branch)) = (dir, p["head"]["ref"].as_str().map(str::to_owned))
        && let Some(sha) = git(&dir, &["rev-parse", &format!("refs/heads/{branch}")])
    {
        let shown = s.shown_head.entry(n).or_insert((sha.clone(), 0));
        if shown.0 != sha {
            if shown.1 < s.head_lag {
                shown.1 += 1;
            } else {
                *shown = (sha.clone(), 0);
            }
        }
        p["head"]["sha"] = json!(shown.0.clone());
    }
    let (m, state) = s.mergeable.clone().unwrap_or((json!(true), "clean"));
    p["mergeable"] = m;
    if f.flavor == Flavor::Github {
        p["mergeable_state"] = json!(state);
    }
    Json(p.clone()).into_response()
}

/// The repository: lab's one call to check an address and a token.
pub(super) async fn get_repo(State(f): State<Fake>) -> Response {
    let push = !f.state.lock().unwrap().no_push;
    let perms = json!({"admin": false, "push": push, "pull": true});
    let body = match f.flavor {
        Flavor::Github => {
            json!({"id": 1, "node_id": "R_1", "name": "repo", "full_name": "owner/repo",
            "private": true, "owner": user("owner", 1), "html_url": format!("{}/owner/repo", f.base),
            "default_branch": "main", "permissions": perms})
        }
        Flavor::Gitea => {
            json!({"id": 1, "name": "repo", "full_name": "owner/repo", "private": true,
            "owner": user("owner", 1), "html_url": format!("{}/owner/repo", f.base),
            "default_branch": "main", "permissions": perms})
        }
    };
    Json(body).into_response()
}

/// The account the token acts as.
pub(super) async fn get_user(State(f): State<Fake>) -> Response {
    let s = f.state.lock().unwrap();
    let mut u = user(&s.login, 8);
    u["type"] = json!(s.login_type);
    if f.flavor == Flavor::Github {
        // GitHub's `public-user`: the simple user's links and profile.
        let api = format!("{}/api/v3/users/{}", f.base, s.login);
        for (k, tail) in [
            ("events_url", "/events{/privacy}"),
            ("followers_url", "/followers"),
            ("following_url", "/following{/other_user}"),
            ("gists_url", "/gists{/gist_id}"),
            ("organizations_url", "/orgs"),
            ("received_events_url", "/received_events"),
            ("repos_url", "/repos"),
            ("starred_url", "/starred{/owner}{/repo}"),
            ("subscriptions_url", "/subscriptions"),
        ] {
            u[k] = json!(format!("{api}{tail}"));
        }
        for k in [
            "gravatar_id",
            "bio",
            "blog",
            "company",
            "email",
            "hireable",
            "location",
            "name",
        ] {
            u[k] = Value::Null;
        }
        for k in ["followers", "following", "public_gists", "public_repos"] {
            u[k] = json!(0);
        }
        u["created_at"] = json!(stamp());
        u["updated_at"] = json!(stamp());
    }
    match (&s.scopes, f.flavor) {
        // GitHub sends a classic token's scopes on every answer.
        (Some(scopes), Flavor::Github) => {
            ([("x-oauth-scopes", scopes.clone())], Json(u)).into_response()
        }
        _ => Json(u).into_response(),
    }
}

/// GitHub Actions' runs of a head: the CI as a workflow run.
pub(super) async fn workflow_runs(State(f): State<Fake>, Query(q): Query<HeadQ>) -> Response {
    let state = ci_state(&f.state.lock().unwrap().ci, &q.head_sha.unwrap_or_default());
    let runs: Vec<Value> = state
        .into_iter()
        .map(|st| {
            let (status, conclusion) = match st.as_str() {
                "pending" => ("in_progress", Value::Null),
                "action_required" => ("action_required", json!("action_required")),
                other => ("completed", json!(other)),
            };
            let run = format!("{}/api/v3/repos/owner/repo/actions/runs/3", f.base);
            let repo = json!({"id": 1, "node_id": "R_1", "name": "repo", "full_name": "owner/repo"});
            json!({"id": 3, "name": "ci", "node_id": "WFR_3", "head_branch": "x", "head_sha": "abc",
                "display_title": "ci", "path": ".github/workflows/ci.yml", "run_number": 1,
                "event": "pull_request", "status": status, "conclusion": conclusion, "workflow_id": 1,
                "url": run, "html_url": format!("{}/owner/repo/actions/runs/3", f.base),
                "created_at": stamp(), "updated_at": stamp(), "head_commit": null,
                "repository": repo, "head_repository": repo, "pull_requests": [],
                "jobs_url": format!("{run}/jobs"), "logs_url": format!("{run}/logs"),
                "check_suite_url": format!("{}/api/v3/repos/owner/repo/check-suites/3", f.base),
                "cancel_url": format!("{run}/cancel"), "rerun_url": format!("{run}/rerun"),
                "artifacts_url": format!("{run}/artifacts"),
                "workflow_url": format!("{}/api/v3/repos/owner/repo/actions/workflows/1", f.base)})
        })
        .collect();
    Json(json!({"total_count": runs.len(), "workflow_runs": runs})).into_response()
}

#[derive(serde::Deserialize)]
pub(super) struct HeadQ {
    head_sha: Option<String>,
}

/// Gitea: the line comments of one review.
pub(super) async fn review_line_comments(
    State(f): State<Fake>,
    Path((n, id)): Path<(i64, i64)>,
) -> Response {
    let s = f.state.lock().unwrap();
    let c: Vec<Value> = s
        .review_line_comments
        .iter()
        .enumerate()
        .filter(|(_, (r, _, _, _))| *r == id)
        .map(|(i, (r, a, b, path))| {
            json!({"id": 7000 + i as i64, "body": b, "user": user(a, 12), "resolver": null,
                "pull_request_review_id": r, "created_at": stamp(), "updated_at": stamp(),
                "path": path, "commit_id": "abc", "original_commit_id": "abc", "diff_hunk": "@@ -1 +1 @@",
                "position": 3, "original_position": 3,
                "html_url": format!("{}/owner/repo/pulls/{n}/files#issuecomment-{}", f.base, 7000 + i),
                "pull_request_url": format!("{}/owner/repo/pulls/{n}", f.base)})
        })
        .collect();
    Json(Value::Array(c)).into_response()
}

fn stamp() -> &'static str {
    "2026-12-01T12:00:00Z"
}

pub(super) async fn check_runs(State(f): State<Fake>, Path(sha): Path<String>) -> Response {
    if f.state.lock().unwrap().check_runs_denied {
        return (
            StatusCode::FORBIDDEN,
            Json(json!({"message": "Resource not accessible by personal access token",
                "documentation_url": "https://docs.github.com/rest/checks/runs#list-check-runs-for-a-git-reference",
                "status": "403"})),
        )
            .into_response();
    }
    let state = ci_state(&f.state.lock().unwrap().ci, &sha);
    let runs: Vec<Value> = state
        .into_iter()
        .map(|st| {
            let (status, conclusion) = match st.as_str() {
                "pending" => ("in_progress", Value::Null),
                other => ("completed", json!(other)),
            };
            json!({"id": 1, "node_id": "CR_1", "head_sha": sha, "name": "ci/test",
                "external_id": "", "url": format!("{}/repos/owner/repo/check-runs/1", f.base),
                "html_url": format!("{}/owner/repo/runs/1", f.base), "details_url": null,
                "status": status, "conclusion": conclusion, "started_at": stamp(),
                "completed_at": if status == "completed" { json!(stamp()) } else { Value::Null },
                "output": {"title": format!("ci/test: {st}"), "summary": "2 tests, 1 failed: test_x",
                    "text": null, "annotations_count": 0, "annotations_url": format!("{}/a", f.base)},
                "check_suite": {"id": 5}, "app": null, "pull_requests": []})
        })
        .collect();
    Json(json!({"total_count": runs.len(), "check_runs": runs})).into_response()
}

pub(super) async fn combined_status(State(f): State<Fake>, Path(sha): Path<String>) -> Response {
    let state = ci_state(&f.state.lock().unwrap().ci, &sha);
    let repo_url = format!("{}{}", f.base, repo_path(f.flavor));
    let statuses: Vec<Value> = match f.flavor {
        // The CI is a check run there.
        Flavor::Github => Vec::new(),
        Flavor::Gitea => state
            .iter()
            .map(|st| {
                json!({"id": 1, "status": st, "target_url": format!("{}/ci/1", f.base),
                "description": format!("tests: {st}"), "url": format!("{repo_url}/statuses/{sha}"),
                "context": "ci/test", "creator": user("ci-bot", 11),
                "created_at": stamp(), "updated_at": stamp()})
            })
            .collect(),
    };
    let combined = statuses
        .first()
        .map(|s| s["status"].clone())
        .unwrap_or(json!("pending"));
    let body = match f.flavor {
        Flavor::Github => json!({"state": "pending", "statuses": [], "sha": sha, "total_count": 0,
            "repository": {"id": 1, "node_id": "R_1", "name": "repo", "full_name": "owner/repo"},
            "commit_url": format!("{repo_url}/commits/{sha}"), "url": format!("{repo_url}/commits/{sha}/status")}),
        Flavor::Gitea => json!({"state": combined, "sha": sha, "total_count": statuses.len(),
            "statuses": statuses, "repository": {"id": 1, "name": "repo", "full_name": "owner/repo"},
            "commit_url": format!("{repo_url}/commits/{sha}"), "url": format!("{repo_url}/commits/{sha}/status")}),
    };
    Json(body).into_response()
}

/// The items of pull request `n` in one of the fake's lists, paged.
fn of_pull(
    f: &Fake,
    uri: &Uri,
    q: &ListQ,
    n: i64,
    list: fn(&super::State_) -> &Vec<(i64, Value)>,
) -> Response {
    let items: Vec<Value> = {
        let s = f.state.lock().unwrap();
        list(&s)
            .iter()
            .filter(|(p, _)| *p == n)
            .map(|(_, v)| v.clone())
            .collect()
    };
    paged(f, uri, q, items, true)
}

pub(super) async fn reviews(
    State(f): State<Fake>,
    uri: Uri,
    Path(n): Path<i64>,
    Query(q): Query<ListQ>,
) -> Response {
    of_pull(&f, &uri, &q, n, |s| &s.reviews)
}

/// GitHub's review comments (on a line).
pub(super) async fn review_comments(
    State(f): State<Fake>,
    uri: Uri,
    Path(n): Path<i64>,
    Query(q): Query<ListQ>,
) -> Response {
    of_pull(&f, &uri, &q, n, |s| &s.pr_comments)
}

/// `POST …/pulls/{n}/reviews` (both forges): lab's review comment, as
/// its token's account.
pub(super) async fn create_review(
    State(f): State<Fake>,
    Path(n): Path<i64>,
    Json(b): Json<Value>,
) -> Response {
    if b["event"] != "COMMENT" || !b["body"].is_string() {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "bad review"})),
        )
            .into_response();
    }
    let login = f.state.lock().unwrap().login.clone();
    let state = match f.flavor {
        Flavor::Github => "COMMENTED",
        Flavor::Gitea => "COMMENT",
    };
    let forge = super::FakeForge {
        url: String::new(),
        fake: f.clone(),
    };
    let id = forge.add_review(n, &login, state, b["body"].as_str().unwrap_or_default());
    let r = f
        .state
        .lock()
        .unwrap()
        .reviews
        .iter()
        .find(|(_, r)| r["id"] == id)
        .map(|(_, r)| r.clone());
    (StatusCode::OK, Json(r.unwrap_or_default())).into_response()
}

impl super::FakeForge {
    /// A review of pull request `n`: `state` as the forge spells it
    /// (GitHub `CHANGES_REQUESTED`, Gitea `REQUEST_CHANGES`, ...).
    pub fn add_review(&self, n: i64, author: &str, state: &str, body: &str) -> i64 {
        let f = &self.fake;
        let mut s = f.state.lock().unwrap();
        let id = 700 + s.reviews.len() as i64;
        let html = format!("{}/owner/repo/pulls/{n}#pullrequestreview-{id}", f.base);
        let r = match f.flavor {
            Flavor::Github => {
                json!({"id": id, "node_id": format!("PRR_{id}"), "user": user(author, 12), "body": body,
                "state": state, "html_url": html, "pull_request_url": format!("{}/repos/owner/repo/pulls/{n}", f.base),
                "_links": {"html": {"href": html}, "pull_request": {"href": html}},
                "submitted_at": stamp(), "commit_id": "abc", "author_association": "MEMBER"})
            }
            Flavor::Gitea => {
                json!({"id": id, "user": user(author, 12), "team": null, "state": state, "body": body,
                "commit_id": "abc", "stale": false, "official": true, "dismissed": false,
                "comments_count": 0, "submitted_at": stamp(), "updated_at": stamp(),
                "html_url": html, "pull_request_url": format!("{}/owner/repo/pulls/{n}", f.base)})
            }
        };
        s.reviews.push((n, r));
        id
    }

    /// A review of pull request `n` a maintainer dismissed.
    pub fn dismiss_review(&self, id: i64) {
        let mut s = self.fake.state.lock().unwrap();
        let flavor = self.fake.flavor;
        for (_, r) in s.reviews.iter_mut().filter(|(_, r)| r["id"] == id) {
            match flavor {
                Flavor::Github => r["state"] = json!("DISMISSED"),
                Flavor::Gitea => r["dismissed"] = json!(true),
            }
        }
    }

    /// A person's comment in pull request `n`'s conversation (both forges:
    /// `GET /issues/{n}/comments`).
    pub fn add_conversation_comment(&self, n: i64, author: &str, body: &str) {
        let mut s = self.fake.state.lock().unwrap();
        s.people_comments
            .push((n, author.to_owned(), body.to_owned()));
        // When it was made, to the millisecond (a `/lab approve` counts
        // only after the plan it decides).
        let at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        s.people_at.push(at);
    }

    /// Gitea: a review of pull request `n` by `author` with one comment on
    /// a line of `path`; returns the review's id.
    pub fn add_line_review(&self, n: i64, author: &str, body: &str, path: &str) -> i64 {
        let id = self.add_review(n, author, "COMMENT", "");
        let mut s = self.fake.state.lock().unwrap();
        for (_, r) in s.reviews.iter_mut().filter(|(_, r)| r["id"] == id) {
            r["comments_count"] = json!(1);
        }
        s.review_line_comments
            .push((id, author.to_owned(), body.to_owned(), path.to_owned()));
        id
    }

    /// A person's comment on pull request `n`: on GitHub a review comment
    /// on a line, on Gitea a conversation comment.
    pub fn add_pull_comment(&self, n: i64, author: &str, body: &str) {
        let f = &self.fake;
        let mut s = f.state.lock().unwrap();
        let id = 9000 + s.pr_comments.len() as i64 + s.comments.len() as i64;
        match f.flavor {
            Flavor::Github => {
                let url = format!("{}/repos/owner/repo/pulls/comments/{id}", f.base);
                let html = format!("{}/owner/repo/pull/{n}#discussion_r{id}", f.base);
                let c = json!({"id": id, "node_id": format!("PRRC_{id}"), "url": url,
                    "pull_request_review_id": null, "diff_hunk": "@@ -1 +1 @@", "path": "src/lib.rs",
                    "line": 3, "commit_id": "abc", "original_commit_id": "abc", "user": user(author, 12),
                    "body": body, "created_at": stamp(), "updated_at": stamp(), "html_url": html,
                    "pull_request_url": format!("{}/repos/owner/repo/pulls/{n}", f.base),
                    "author_association": "MEMBER",
                    "_links": {"self": {"href": url}, "html": {"href": html}, "pull_request": {"href": html}}});
                s.pr_comments.push((n, c));
            }
            Flavor::Gitea => s
                .people_comments
                .push((n, author.to_owned(), body.to_owned())),
        }
    }
}
