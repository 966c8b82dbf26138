//! The fake forge's routes: auth, rate limits, paging and each answer, as
//! the real forges do them (see `mod.rs`).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::gate::{ListQ, paged};
use super::{Fake, Flavor, State_, issue_json, label_json, label_value, repo_path, user};

fn names(i: &Value) -> Vec<String> {
    i["labels"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["name"].as_str().or(l.as_str()).map(str::to_owned))
        .collect()
}

pub(super) async fn list_issues(
    State(f): State<Fake>,
    uri: Uri,
    Query(q): Query<ListQ>,
) -> Response {
    let items: Vec<Value> = {
        let s = f.state.lock().unwrap();
        // Gitea keeps only the names that are the repo's labels
        // (`GetLabelIDsInRepoByNames`): an unknown one filters nothing.
        let wanted: Vec<String> = q
            .labels
            .as_deref()
            .unwrap_or("")
            .split(',')
            .filter(|l| !l.is_empty())
            .filter(|l| f.flavor == Flavor::Github || s.labels.iter().any(|(_, n)| n == l))
            .map(str::to_owned)
            .collect();
        s.issues
            .iter()
            .filter(|i| {
                q.state
                    .as_deref()
                    .is_none_or(|st| st == "all" || i["state"] == st)
            })
            .filter(|i| {
                let have = names(i);
                wanted.iter().all(|w| have.contains(w))
            })
            .filter(|i| {
                f.flavor == Flavor::Github
                    || q.kind.as_deref() != Some("issues")
                    || i["pull_request"].is_null()
            })
            .cloned()
            .collect()
    };
    paged(&f, &uri, &q, items, true)
}

fn find(s: &State_, n: i64) -> Option<usize> {
    s.issues.iter().position(|i| i["number"] == n)
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response()
}

pub(super) async fn get_issue(State(f): State<Fake>, Path(n): Path<i64>) -> Response {
    let s = f.state.lock().unwrap();
    match find(&s, n) {
        Some(i) => Json(s.issues[i].clone()).into_response(),
        None => not_found(),
    }
}

pub(super) async fn create_issue(State(f): State<Fake>, Json(b): Json<Value>) -> Response {
    let title = b["title"].as_str().unwrap_or("").to_owned();
    if title.is_empty() {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "Validation Failed", "errors": [{"resource": "Issue", "field": "title", "code": "missing_field"}]})),
        )
            .into_response();
    }
    let mut s = f.state.lock().unwrap();
    let labels: Vec<Value> = b["labels"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|l| l.as_str().map(str::to_owned))
        .map(|l| label_json(&mut s, f.flavor, &l))
        .collect();
    let number = s.issues.len() as i64 + 1;
    let i = issue_json(
        &f,
        number,
        &title,
        b["body"].as_str().unwrap_or(""),
        "open",
        labels,
        false,
    );
    s.issues.push(i.clone());
    (StatusCode::CREATED, Json(i)).into_response()
}

/// Gitea answers an edited issue with 201 (`EditIssue`), GitHub with 200.
pub(super) async fn patch_issue(
    State(f): State<Fake>,
    Path(n): Path<i64>,
    Json(b): Json<Value>,
) -> Response {
    let mut s = f.state.lock().unwrap();
    let Some(i) = find(&s, n) else {
        return not_found();
    };
    if let Some(st) = b["state"].as_str() {
        s.issues[i]["state"] = json!(st);
    }
    let code = match f.flavor {
        Flavor::Gitea => StatusCode::CREATED,
        Flavor::Github => StatusCode::OK,
    };
    (code, Json(s.issues[i].clone())).into_response()
}

fn comment_json(f: &Fake, n: i64, id: usize, body: &str) -> Value {
    comment_by(f, n, id, "lab-bot", body, None)
}

/// A comment's JSON; `at` when it was made (else an old date).
fn comment_by(f: &Fake, n: i64, id: usize, author: &str, body: &str, at: Option<&String>) -> Value {
    let html = format!("{}/owner/repo/issues/{n}#issuecomment-{id}", f.base);
    let issue = format!("{}{}/issues/{n}", f.base, repo_path(f.flavor));
    let at = at.map_or("2026-11-30T11:00:00Z", String::as_str);
    match f.flavor {
        Flavor::Gitea => {
            json!({"id": id, "html_url": html, "pull_request_url": "", "issue_url": issue,
            "user": user(author, if author == "lab-bot" { 8 } else { 12 }), "original_author": "", "original_author_id": 0, "body": body,
            "assets": [], "created_at": at, "updated_at": at})
        }
        Flavor::Github => {
            json!({"id": id, "node_id": format!("IC_{id}"), "url": format!("{issue}/comments/{id}"),
            "html_url": html, "issue_url": issue, "body": body, "user": user(author, if author == "lab-bot" { 8 } else { 12 }),
            "created_at": at, "updated_at": at,
            "author_association": "NONE"})
        }
    }
}

pub(super) async fn list_comments(
    State(f): State<Fake>,
    uri: Uri,
    Path(n): Path<i64>,
    Query(q): Query<ListQ>,
) -> Response {
    let c: Vec<Value> = {
        let s = f.state.lock().unwrap();
        let people = s
            .people_comments
            .iter()
            .enumerate()
            .filter(|(_, (i, _, _))| *i == n)
            .map(|(id, (_, a, b))| comment_by(&f, n, 5000 + id, a, b, s.people_at.get(id)));
        s.comments
            .iter()
            .enumerate()
            .filter(|(_, (i, _))| *i == n)
            .map(|(id, (_, b))| comment_json(&f, n, id + 1, b))
            .chain(people)
            .collect()
    };
    if f.flavor == Flavor::Gitea {
        // Gitea's issue comments take no page or limit: every comment at
        // once, and their count (`ListIssueComments`).
        let mut h = axum::http::HeaderMap::new();
        h.insert("x-total-count", c.len().to_string().parse().unwrap());
        return (h, Json(Value::Array(c))).into_response();
    }
    paged(&f, &uri, &q, c, true)
}

pub(super) async fn add_comment(
    State(f): State<Fake>,
    Path(n): Path<i64>,
    Json(b): Json<Value>,
) -> Response {
    let mut s = f.state.lock().unwrap();
    let body = b["body"].as_str().unwrap_or("").to_owned();
    s.comments.push((n, body.clone()));
    let id = s.comments.len();
    (StatusCode::CREATED, Json(comment_json(&f, n, id, &body))).into_response()
}

/// Labels named (GitHub) or by id (Gitea; the repo's or the org's).
fn named(s: &mut State_, flavor: Flavor, v: &Value) -> Vec<Value> {
    v["labels"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|l| match l {
            Value::String(n) => Some(label_json(s, flavor, n)),
            Value::Number(id) => {
                let id = id.as_i64()?;
                let (_, name) = s
                    .labels
                    .iter()
                    .chain(&s.org_labels)
                    .find(|(i, _)| *i == id)?;
                Some(label_value(flavor, id, &name.clone()))
            }
            _ => None,
        })
        .collect()
}

pub(super) async fn add_labels(
    State(f): State<Fake>,
    Path(n): Path<i64>,
    Json(b): Json<Value>,
) -> Response {
    let mut s = f.state.lock().unwrap();
    let Some(i) = find(&s, n) else {
        return not_found();
    };
    let new = named(&mut s, f.flavor, &b);
    let labels = s.issues[i]["labels"].as_array_mut().unwrap();
    for l in new {
        if !labels.iter().any(|x| x["id"] == l["id"]) {
            labels.push(l);
        }
    }
    Json(s.issues[i]["labels"].clone()).into_response()
}

pub(super) async fn set_labels(
    State(f): State<Fake>,
    Path(n): Path<i64>,
    Json(b): Json<Value>,
) -> Response {
    let mut s = f.state.lock().unwrap();
    let Some(i) = find(&s, n) else {
        return not_found();
    };
    let new = named(&mut s, f.flavor, &b);
    s.issues[i]["labels"] = Value::Array(new);
    Json(s.issues[i]["labels"].clone()).into_response()
}

pub(super) async fn remove_label(
    State(f): State<Fake>,
    Path((n, name)): Path<(i64, String)>,
) -> Response {
    let mut s = f.state.lock().unwrap();
    let Some(i) = find(&s, n) else {
        return not_found();
    };
    let labels = s.issues[i]["labels"].as_array_mut().unwrap();
    let before = labels.len();
    labels.retain(|l| l["name"] != name.as_str());
    if labels.len() == before {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"message": "Label does not exist"})),
        )
            .into_response();
    }
    Json(Value::Array(labels.clone())).into_response()
}

/// Gitea's label listing: pages, `X-Total-Count`, no `Link`.
pub(super) async fn list_labels(
    State(f): State<Fake>,
    uri: Uri,
    Query(q): Query<ListQ>,
) -> Response {
    let all: Vec<Value> = {
        let s = f.state.lock().unwrap();
        s.labels
            .iter()
            .map(|(id, n)| label_value(f.flavor, *id, n))
            .collect()
    };
    paged(&f, &uri, &q, all, f.flavor == Flavor::Github)
}

pub(super) async fn list_org_labels(
    State(f): State<Fake>,
    uri: Uri,
    Path(org): Path<String>,
    Query(q): Query<ListQ>,
) -> Response {
    if org != "owner" || f.flavor != Flavor::Gitea {
        return not_found();
    }
    if f.state.lock().unwrap().org_labels_denied {
        return (
            StatusCode::FORBIDDEN,
            Json(json!({"message": "token does not have at least one of required scope(s): [read:organization]", "url": format!("{}/api/swagger", f.base)})),
        )
            .into_response();
    }
    let all: Vec<Value> = {
        let s = f.state.lock().unwrap();
        s.org_labels
            .iter()
            .map(|(id, n)| label_value(f.flavor, *id, n))
            .collect()
    };
    paged(&f, &uri, &q, all, false)
}

/// Gitea does not refuse a second label of the same name.
pub(super) async fn create_label(State(f): State<Fake>, Json(b): Json<Value>) -> Response {
    let mut s = f.state.lock().unwrap();
    let name = b["name"].as_str().unwrap_or("").to_owned();
    let id = s.labels.iter().map(|(id, _)| *id).max().unwrap_or(0) + 1;
    s.labels.push((id, name.clone()));
    (StatusCode::CREATED, Json(label_value(f.flavor, id, &name))).into_response()
}

pub(super) async fn list_pulls(
    State(f): State<Fake>,
    uri: Uri,
    Query(q): Query<ListQ>,
) -> Response {
    let all: Vec<Value> = {
        let s = f.state.lock().unwrap();
        s.pulls
            .iter()
            .filter(|p| {
                q.state
                    .as_deref()
                    .is_none_or(|st| st == "all" || p["state"] == st)
            })
            .cloned()
            .collect()
    };
    paged(&f, &uri, &q, all, true)
}

fn branch_json(f: &Fake, owner: &str, branch: &str, sha: &str) -> Value {
    let repo = json!({"id": 1, "name": "repo", "full_name": format!("{owner}/repo"), "owner": user(owner, 9)});
    let mut b =
        json!({"label": format!("{owner}:{branch}"), "ref": branch, "sha": sha, "repo": repo});
    match f.flavor {
        Flavor::Gitea => b["repo_id"] = json!(1),
        Flavor::Github => b["user"] = user(owner, 9),
    }
    b
}

/// An edit of a pull request (`PATCH …/pulls/{n}`): its description, as
/// GitHub and Gitea both take it; the pull request as it is now.
pub(super) async fn edit_pull(
    State(f): State<Fake>,
    Path(n): Path<i64>,
    Json(b): Json<Value>,
) -> Response {
    let mut s = f.state.lock().unwrap();
    let Some(p) = s.pulls.iter_mut().find(|p| p["number"] == n) else {
        return (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response();
    };
    if let Some(body) = b.get("body") {
        p["body"] = body.clone();
    }
    let p = p.clone();
    s.pull_edits += 1;
    (StatusCode::OK, Json(p)).into_response()
}

/// A new pull request; `head` may be `owner:branch` (a fork's branch).
/// One open pull request per head: Gitea refuses another with 409, GitHub
/// with 422 and the reason in `errors[].message`.
pub(super) async fn create_pull(State(f): State<Fake>, Json(b): Json<Value>) -> Response {
    let mut s = f.state.lock().unwrap();
    let head = b["head"].as_str().unwrap_or("").to_owned();
    let (owner, branch) = head.split_once(':').unwrap_or(("owner", &head));
    let exists = s
        .pulls
        .iter()
        .any(|p| p["head"]["label"] == format!("{owner}:{branch}") && p["state"] == "open");
    if exists {
        return match f.flavor {
            Flavor::Gitea => (
                StatusCode::CONFLICT,
                Json(json!({"message": format!("pull request already exists for these targets [head_branch: {branch}, base_branch: main]"), "url": format!("{}/api/swagger", f.base)})),
            ),
            Flavor::Github => (
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "code": "custom",
                    "message": format!("A pull request already exists for {owner}:{branch}.")}],
                    "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request", "status": "422"})),
            ),
        }
        .into_response();
    }
    let number = 500 + s.pulls.len() as i64;
    let opened_with = b["body"].as_str().unwrap_or_default().to_owned();
    s.created_bodies.push(opened_with);
    let html = format!("{}/owner/repo/pulls/{number}", f.base);
    let mut p = json!({"id": number, "number": number, "title": b["title"], "body": b["body"], "state": "open",
        "html_url": html, "url": format!("{}{}/pulls/{number}", f.base, repo_path(f.flavor)),
        "diff_url": format!("{html}.diff"), "patch_url": format!("{html}.patch"),
        "user": user("lab-bot", 8), "labels": [], "milestone": null, "assignee": null, "assignees": [],
        "head": branch_json(&f, owner, branch, "abc"), "base": branch_json(&f, "owner", b["base"].as_str().unwrap_or(""), "def"),
        "merged": false, "merged_at": null, "merge_commit_sha": null, "merged_by": null, "mergeable": true,
        "draft": false, "created_at": "2026-11-30T12:00:00Z", "updated_at": "2026-11-30T12:00:00Z", "closed_at": null,
        "comments": 0});
    if f.flavor == Flavor::Github {
        for (k, v) in [
            ("node_id", json!(format!("PR_{number}"))),
            ("locked", json!(false)),
            (
                "issue_url",
                json!(format!("{}/repos/owner/repo/issues/{number}", f.base)),
            ),
            ("author_association", json!("NONE")),
            ("auto_merge", Value::Null),
            ("active_lock_reason", Value::Null),
        ] {
            p[k] = v;
        }
    } else {
        p["is_locked"] = json!(false);
    }
    s.pulls.push(p.clone());
    (StatusCode::CREATED, Json(p)).into_response()
}

/// `GET /repos/{owner}/{repo}/collaborators/{user}/permission` (Gitea's and
/// GitHub's: the same shape).
pub async fn collaborator_permission(State(f): State<Fake>, Path(login): Path<String>) -> Response {
    let s = f.state.lock().unwrap();
    let permission = if s.writers.contains(&login) {
        "write"
    } else {
        "read"
    };
    Json(json!({"permission": permission, "role_name": permission, "user": user(&login, 30)}))
        .into_response()
}
