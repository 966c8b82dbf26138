//! A fake forge: a local HTTP server that answers like Gitea/Forgejo (API
//! v1) or GitHub (REST v3) for one repository, `owner/repo`, as the real
//! ones do (`tests/fixtures/forge-schemas/` holds the published response
//! schemas the answers are checked against, `forge_schemas.rs`):
//! - paging: Gitea's `page`/`limit`, default 30, capped at
//!   `MAX_RESPONSE_ITEMS` (`max_items`, default 50), `X-Total-Count`, a
//!   `Link` built from its `ROOT_URL` (`link_base`) on listings but none on
//!   the label listing; GitHub's `per_page` (default 30, max 100) and `Link`;
//! - Gitea's `labels=` knows only the repo's labels and drops unknown names;
//!   org labels (`/orgs/owner/labels`) may be on issues;
//! - auth: Gitea/Forgejo take `token`/`bearer` (any case), or `Basic` with the
//!   token as password; GitHub `Bearer`/`token`;
//! - rate limits: GitHub's primary (403, `x-ratelimit-remaining: 0`) and
//!   secondary ones (403 with `retry-after`, or with only a message);
//! - codes: Gitea answers a PATCH of an issue 201 and a duplicate pull
//!   request 409; GitHub 200 and 422 with `errors[].message`.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Flavor {
    Gitea,
    Github,
}

/// A rate-limit refusal the fake answers the next request with.
#[derive(Clone, Copy, Debug)]
pub enum Limit {
    /// GitHub's primary limit: 403, `x-ratelimit-remaining: 0` and a reset
    /// 42 s ahead.
    Primary,
    /// A secondary limit with `retry-after` (403).
    RetryAfter(u64),
    /// A secondary limit with only its message (403).
    SecondaryMessage,
}

#[derive(Default, Debug)]
pub struct State_ {
    pub issues: Vec<Value>,
    /// The repo's labels.
    pub labels: Vec<(i64, String)>,
    /// The owner organisation's labels (Gitea).
    pub org_labels: Vec<(i64, String)>,
    pub comments: Vec<(i64, String)>,
    pub pulls: Vec<Value>,
    /// Every request: method and path with query.
    pub log: Vec<String>,
    /// Answer the next request with a primary rate-limit refusal.
    pub rate_limited: bool,
    /// Answer the next request with this refusal.
    pub limit: Option<Limit>,
    /// Gitea's `[api] MAX_RESPONSE_ITEMS` (0: its default, 50).
    pub max_items: usize,
    /// The origin `Link` headers name (Gitea's `ROOT_URL`, a proxy's); the
    /// fake's own when None.
    pub link_base: Option<String>,
}

#[derive(Clone)]
pub struct Fake {
    pub flavor: Flavor,
    pub token: String,
    pub state: Arc<Mutex<State_>>,
    base: String,
}

pub struct FakeForge {
    pub url: String,
    pub fake: Fake,
}

/// The repo's API path on each forge.
pub fn repo_path(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Gitea => "/api/v1/repos/owner/repo",
        Flavor::Github => "/repos/owner/repo",
    }
}

impl FakeForge {
    pub async fn start(flavor: Flavor) -> FakeForge {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let fake = Fake {
            flavor,
            token: "secret-forge-token-1234".into(),
            state: Arc::new(Mutex::new(State_::default())),
            base: url.clone(),
        };
        let repo = repo_path(flavor);
        let app = Router::new()
            .route(
                &format!("{repo}/issues"),
                get(list_issues).post(create_issue),
            )
            .route(
                &format!("{repo}/issues/{{n}}"),
                get(get_issue).patch(patch_issue),
            )
            .route(
                &format!("{repo}/issues/{{n}}/comments"),
                get(list_comments).post(add_comment),
            )
            .route(
                &format!("{repo}/issues/{{n}}/labels"),
                post(add_labels).put(set_labels),
            )
            .route(
                &format!("{repo}/issues/{{n}}/labels/{{name}}"),
                axum::routing::delete(remove_label),
            )
            .route(
                &format!("{repo}/labels"),
                get(list_labels).post(create_label),
            )
            .route("/api/v1/orgs/{org}/labels", get(list_org_labels))
            .route(&format!("{repo}/pulls"), get(list_pulls).post(create_pull))
            .layer(axum::middleware::from_fn_with_state(fake.clone(), gate))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeForge { url, fake }
    }

    /// Adds an issue (or, on GitHub, a pull request listed among issues).
    pub fn add_issue(&self, title: &str, labels: &[&str], state: &str, is_pull: bool) -> i64 {
        let mut s = self.fake.state.lock().unwrap();
        let labels: Vec<Value> = labels
            .iter()
            .map(|l| label_json(&mut s, self.fake.flavor, l))
            .collect();
        let number = s.issues.len() as i64 + 1;
        let i = issue_json(
            &self.fake,
            number,
            title,
            &format!("body of {title}"),
            state,
            labels,
            is_pull,
        );
        s.issues.push(i);
        number
    }

    /// Adds an organisation label (Gitea), not among the repo's.
    pub fn add_org_label(&self, name: &str) -> i64 {
        let mut s = self.fake.state.lock().unwrap();
        let id = 9000 + s.org_labels.len() as i64;
        s.org_labels.push((id, name.to_owned()));
        id
    }

    pub fn log(&self) -> Vec<String> {
        self.fake.state.lock().unwrap().log.clone()
    }

    pub fn labels_of(&self, number: i64) -> Vec<String> {
        let s = self.fake.state.lock().unwrap();
        s.issues[(number - 1) as usize]["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The repo's labels named `name` (Gitea allows several).
    pub fn repo_labels_named(&self, name: &str) -> usize {
        let s = self.fake.state.lock().unwrap();
        s.labels.iter().filter(|(_, n)| n == name).count()
    }
}

fn user(login: &str, id: i64) -> Value {
    json!({"id": id, "login": login, "node_id": format!("U_{id}"), "avatar_url": "https://example.com/a.png",
        "html_url": format!("https://example.com/{login}"), "url": format!("https://example.com/api/users/{login}"),
        "type": "User", "site_admin": false, "full_name": "", "email": ""})
}

fn label_value(flavor: Flavor, id: i64, name: &str) -> Value {
    match flavor {
        Flavor::Gitea => json!({"id": id, "name": name, "color": "ededed", "description": "",
            "exclusive": false, "is_archived": false, "url": format!("https://example.com/labels/{id}")}),
        Flavor::Github => {
            json!({"id": id, "node_id": format!("LA_{id}"), "name": name, "color": "ededed",
            "description": null, "default": false, "url": format!("https://example.com/labels/{name}")})
        }
    }
}

/// A label by name: the repo's, else the org's (Gitea), else a new repo
/// label.
fn label_json(s: &mut State_, flavor: Flavor, name: &str) -> Value {
    let found = s
        .labels
        .iter()
        .chain(&s.org_labels)
        .find(|(_, n)| n == name);
    let id = match found {
        Some((id, _)) => *id,
        None => {
            let id = s.labels.len() as i64 + 1;
            s.labels.push((id, name.to_owned()));
            id
        }
    };
    label_value(flavor, id, name)
}

fn issue_json(
    f: &Fake,
    number: i64,
    title: &str,
    body: &str,
    state: &str,
    labels: Vec<Value>,
    is_pull: bool,
) -> Value {
    let html = format!("{}/owner/repo/issues/{number}", f.base);
    let api = format!("{}{}/issues/{number}", f.base, repo_path(f.flavor));
    let closed_at = if state == "closed" {
        json!("2026-11-30T12:00:00Z")
    } else {
        Value::Null
    };
    match f.flavor {
        Flavor::Gitea => json!({
            "id": 1000 + number, "url": api, "html_url": html, "number": number,
            "user": user("someone", 7), "original_author": "", "original_author_id": 0,
            "title": title, "body": body, "ref": "", "labels": labels, "milestone": null,
            "assignee": null, "assignees": null, "state": state, "is_locked": false, "comments": 0,
            "created_at": "2026-11-30T10:00:00Z", "updated_at": "2026-11-30T10:00:00Z",
            "closed_at": closed_at, "due_date": null,
            "pull_request": if is_pull { json!({"merged": false, "merged_at": null, "draft": false, "html_url": html}) } else { Value::Null },
            "repository": {"id": 1, "name": "repo", "owner": "owner", "full_name": "owner/repo"},
            "pin_order": 0,
        }),
        Flavor::Github => {
            let mut i = json!({
                "id": 1000 + number, "node_id": format!("I_{number}"), "url": api,
                "repository_url": format!("{}/repos/owner/repo", f.base),
                "labels_url": format!("{api}/labels{{/name}}"), "comments_url": format!("{api}/comments"),
                "events_url": format!("{api}/events"), "html_url": html, "number": number,
                "state": state, "title": title, "body": body, "user": user("someone", 7),
                "labels": labels, "assignee": null, "assignees": [], "milestone": null, "locked": false,
                "active_lock_reason": null, "comments": 0, "closed_at": closed_at,
                "created_at": "2026-11-30T10:00:00Z", "updated_at": "2026-11-30T10:00:00Z",
                "author_association": "CONTRIBUTOR",
            });
            if is_pull {
                i["pull_request"] = json!({"url": format!("{}/repos/owner/repo/pulls/{number}", f.base),
                    "html_url": format!("{}/owner/repo/pull/{number}", f.base),
                    "diff_url": format!("{}/owner/repo/pull/{number}.diff", f.base),
                    "patch_url": format!("{}/owner/repo/pull/{number}.patch", f.base), "merged_at": null});
            }
            i
        }
    }
}

/// Whether an `Authorization` header carries the token the way the forge
/// takes it.
fn authorized(f: &Fake, given: &str) -> bool {
    let Some((scheme, value)) = given.split_once(' ') else {
        return false;
    };
    let scheme = scheme.to_ascii_lowercase();
    let value = value.trim();
    match (f.flavor, scheme.as_str()) {
        (_, "token") | (_, "bearer") => value == f.token,
        (Flavor::Gitea, "basic") => {
            let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(value) else {
                return false;
            };
            let raw = String::from_utf8_lossy(&raw).into_owned();
            let (u, p) = raw.split_once(':').unwrap_or((&raw, ""));
            p == f.token || (u == f.token && (p.is_empty() || p == "x-oauth-basic"))
        }
        _ => false,
    }
}

fn limit_response(limit: Limit) -> Response {
    let mut h = HeaderMap::new();
    let msg = match limit {
        Limit::Primary => {
            let reset = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
                + 42;
            h.insert("x-ratelimit-remaining", "0".parse().unwrap());
            h.insert("x-ratelimit-reset", reset.to_string().parse().unwrap());
            "API rate limit exceeded for user ID 7."
        }
        Limit::RetryAfter(s) => {
            h.insert("x-ratelimit-remaining", "4000".parse().unwrap());
            h.insert("retry-after", s.to_string().parse().unwrap());
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
        }
        Limit::SecondaryMessage => {
            h.insert("x-ratelimit-remaining", "4000".parse().unwrap());
            "You have exceeded a secondary rate limit and have been temporarily blocked from content creation."
        }
    };
    let body = json!({"message": msg, "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"});
    (StatusCode::FORBIDDEN, h, Json(body)).into_response()
}

/// Auth, rate limits, and the request log.
async fn gate(State(f): State<Fake>, req: Request, next: axum::middleware::Next) -> Response {
    let line = format!("{} {}", req.method(), req.uri());
    let given = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    {
        let mut s = f.state.lock().unwrap();
        s.log.push(line);
        let limit = if std::mem::take(&mut s.rate_limited) {
            Some(Limit::Primary)
        } else {
            s.limit.take()
        };
        if let Some(l) = limit {
            return limit_response(l);
        }
    }
    if !authorized(&f, &given) {
        let msg = match f.flavor {
            Flavor::Gitea => {
                json!({"message": "user does not exist [uid: 0, name: ]", "url": format!("{}/api/swagger", f.base)})
            }
            Flavor::Github => {
                json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"})
            }
        };
        return (StatusCode::UNAUTHORIZED, Json(msg)).into_response();
    }
    next.run(req).await
}

#[derive(Deserialize)]
struct ListQ {
    state: Option<String>,
    labels: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    page: Option<usize>,
    per_page: Option<usize>,
    limit: Option<usize>,
}

/// One page of `items` as the forge pages it: Gitea with `X-Total-Count`
/// and (when `link`) a `Link` from its ROOT_URL; GitHub with a `Link`.
fn paged(f: &Fake, uri: &Uri, q: &ListQ, items: Vec<Value>, link: bool) -> Response {
    let max = f.state.lock().unwrap().max_items;
    let (per, base) = {
        let s = f.state.lock().unwrap();
        let base = s.link_base.clone().unwrap_or_else(|| f.base.clone());
        match f.flavor {
            Flavor::Gitea => {
                let max = if max == 0 { 50 } else { max };
                (q.limit.unwrap_or(30).clamp(1, max), base)
            }
            Flavor::Github => (q.per_page.unwrap_or(30).clamp(1, 100), base),
        }
    };
    let page = q.page.unwrap_or(1).max(1);
    let total = items.len();
    let pages = total.div_ceil(per).max(1);
    let chunk: Vec<Value> = items.into_iter().skip((page - 1) * per).take(per).collect();
    let mut h = HeaderMap::new();
    if f.flavor == Flavor::Gitea {
        h.insert("x-total-count", total.to_string().parse().unwrap());
    }
    if link && page < pages {
        let query: Vec<String> = uri
            .query()
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty() && !p.starts_with("page="))
            .map(str::to_owned)
            .collect();
        let at = |n: usize| format!("<{base}{}?{}&page={n}>", uri.path(), query.join("&"));
        h.insert(
            "link",
            format!(
                "{}; rel=\"next\", {}; rel=\"last\"",
                at(page + 1),
                at(pages)
            )
            .parse()
            .unwrap(),
        );
    }
    (h, Json(Value::Array(chunk))).into_response()
}

fn names(i: &Value) -> Vec<String> {
    i["labels"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["name"].as_str().or(l.as_str()).map(str::to_owned))
        .collect()
}

async fn list_issues(State(f): State<Fake>, uri: Uri, Query(q): Query<ListQ>) -> Response {
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

async fn get_issue(State(f): State<Fake>, Path(n): Path<i64>) -> Response {
    let s = f.state.lock().unwrap();
    match find(&s, n) {
        Some(i) => Json(s.issues[i].clone()).into_response(),
        None => not_found(),
    }
}

async fn create_issue(State(f): State<Fake>, Json(b): Json<Value>) -> Response {
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
async fn patch_issue(State(f): State<Fake>, Path(n): Path<i64>, Json(b): Json<Value>) -> Response {
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
    let html = format!("{}/owner/repo/issues/{n}#issuecomment-{id}", f.base);
    let issue = format!("{}{}/issues/{n}", f.base, repo_path(f.flavor));
    match f.flavor {
        Flavor::Gitea => {
            json!({"id": id, "html_url": html, "pull_request_url": "", "issue_url": issue,
            "user": user("lab-bot", 8), "original_author": "", "original_author_id": 0, "body": body,
            "assets": [], "created_at": "2026-11-30T11:00:00Z", "updated_at": "2026-11-30T11:00:00Z"})
        }
        Flavor::Github => {
            json!({"id": id, "node_id": format!("IC_{id}"), "url": format!("{issue}/comments/{id}"),
            "html_url": html, "issue_url": issue, "body": body, "user": user("lab-bot", 8),
            "created_at": "2026-11-30T11:00:00Z", "updated_at": "2026-11-30T11:00:00Z",
            "author_association": "NONE"})
        }
    }
}

async fn list_comments(
    State(f): State<Fake>,
    uri: Uri,
    Path(n): Path<i64>,
    Query(q): Query<ListQ>,
) -> Response {
    let c: Vec<Value> = {
        let s = f.state.lock().unwrap();
        s.comments
            .iter()
            .enumerate()
            .filter(|(_, (i, _))| *i == n)
            .map(|(id, (_, b))| comment_json(&f, n, id + 1, b))
            .collect()
    };
    paged(&f, &uri, &q, c, true)
}

async fn add_comment(State(f): State<Fake>, Path(n): Path<i64>, Json(b): Json<Value>) -> Response {
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

async fn add_labels(State(f): State<Fake>, Path(n): Path<i64>, Json(b): Json<Value>) -> Response {
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

async fn set_labels(State(f): State<Fake>, Path(n): Path<i64>, Json(b): Json<Value>) -> Response {
    let mut s = f.state.lock().unwrap();
    let Some(i) = find(&s, n) else {
        return not_found();
    };
    let new = named(&mut s, f.flavor, &b);
    s.issues[i]["labels"] = Value::Array(new);
    Json(s.issues[i]["labels"].clone()).into_response()
}

async fn remove_label(State(f): State<Fake>, Path((n, name)): Path<(i64, String)>) -> Response {
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
async fn list_labels(State(f): State<Fake>, uri: Uri, Query(q): Query<ListQ>) -> Response {
    let all: Vec<Value> = {
        let s = f.state.lock().unwrap();
        s.labels
            .iter()
            .map(|(id, n)| label_value(f.flavor, *id, n))
            .collect()
    };
    paged(&f, &uri, &q, all, f.flavor == Flavor::Github)
}

async fn list_org_labels(
    State(f): State<Fake>,
    uri: Uri,
    Path(org): Path<String>,
    Query(q): Query<ListQ>,
) -> Response {
    if org != "owner" || f.flavor != Flavor::Gitea {
        return not_found();
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
async fn create_label(State(f): State<Fake>, Json(b): Json<Value>) -> Response {
    let mut s = f.state.lock().unwrap();
    let name = b["name"].as_str().unwrap_or("").to_owned();
    let id = s.labels.iter().map(|(id, _)| *id).max().unwrap_or(0) + 1;
    s.labels.push((id, name.clone()));
    (StatusCode::CREATED, Json(label_value(f.flavor, id, &name))).into_response()
}

async fn list_pulls(State(f): State<Fake>, uri: Uri, Query(q): Query<ListQ>) -> Response {
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

/// A new pull request; `head` may be `owner:branch` (a fork's branch).
/// One open pull request per head: Gitea refuses another with 409, GitHub
/// with 422 and the reason in `errors[].message`.
async fn create_pull(State(f): State<Fake>, Json(b): Json<Value>) -> Response {
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

/// A server on another origin that answers every request with an empty
/// list and records the `Authorization` header each brought (a stand-in for
/// the host a forge's `Link` may name).
pub struct Recorder {
    pub url: String,
    pub seen: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    pub async fn start() -> Recorder {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://localhost:{}", listener.local_addr().unwrap().port());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let app = Router::new().fallback(move |h: HeaderMap| {
            let s = s.clone();
            async move {
                let auth = h
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                s.lock().unwrap().push(auth.to_owned());
                Json(json!([]))
            }
        });
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Recorder { url, seen }
    }
}
