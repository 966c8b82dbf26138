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

mod follow;
mod gate;
mod routes;

use std::sync::{Arc, Mutex};

pub use follow::Ci;
use gate::gate;
use routes::*;

use axum::Json;
use axum::Router;
use axum::http::HeaderMap;
use axum::routing::{get, post};
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
    /// How many times lab edited a pull request (its receipt).
    pub pull_edits: usize,
    /// The description each pull request was opened with.
    pub created_bodies: Vec<String>,
    /// Every request: method and path with query.
    pub log: Vec<String>,
    /// When each request of `log` came.
    pub log_at: Vec<std::time::Instant>,
    /// The last `limit` refusal: the index in `log` of the request it
    /// answered, and when.
    pub limited: Option<(usize, std::time::Instant)>,
    /// Answer the next request with a primary rate-limit refusal.
    pub rate_limited: bool,
    /// Answer the next request with this refusal.
    pub limit: Option<Limit>,
    /// Gitea's `[api] MAX_RESPONSE_ITEMS` (0: its default, 50).
    pub max_items: usize,
    /// The origin `Link` headers name (Gitea's `ROOT_URL`, a proxy's); the
    /// fake's own when None.
    pub link_base: Option<String>,
    /// How the CI judges each pull request head (`follow.rs`).
    pub ci: Ci,
    /// Reviews, by pull request number.
    pub reviews: Vec<(i64, Value)>,
    /// GitHub's review comments, by pull request number.
    pub pr_comments: Vec<(i64, Value)>,
    /// Conversation comments by people: number, author, body.
    pub people_comments: Vec<(i64, String, String)>,
    /// When each of `people_comments` was made (RFC 3339).
    pub people_at: Vec<String>,
    /// Gitea's review comments (on a line): review id, author, body, path.
    pub review_line_comments: Vec<(i64, String, String, String)>,
    /// The token was revoked on the forge: every request gets 401.
    pub revoked: bool,
    /// The account lab's token acts as (`GET /user`), and its type.
    pub login: String,
    pub login_type: String,
    /// A classic GitHub token's scopes, sent as `X-OAuth-Scopes` on every
    /// answer; `None`: a fine-grained token (no such header), or Gitea.
    pub scopes: Option<String>,
    /// The token's account may not push to the repo (`permissions.push`).
    pub no_push: bool,
    /// Answer check runs with 403, as GitHub does to a fine-grained token
    /// without the Checks permission.
    pub check_runs_denied: bool,
    /// Answer the organisation's labels with 403 (a Gitea token without
    /// `read:organization`).
    pub org_labels_denied: bool,
    /// The pull request's `mergeable` (and GitHub's `mergeable_state`), in
    /// place of `true`: `false` with `dirty`, or `null` while it computes.
    pub mergeable: Option<(Value, &'static str)>,
    /// After a push, this many reads of the pull request still show the
    /// head before it (GitHub updates a pull request a little after).
    pub head_lag: usize,
    /// The head each pull request showed last, and the reads it still
    /// shows it for.
    pub shown_head: std::collections::HashMap<i64, (String, usize)>,
    /// Gitea: the logins whose collaborator permission is `write` (the
    /// others': `read`).
    pub writers: Vec<String>,
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

/// The repo's API path on each forge (GitHub's as on an Enterprise
/// Server, under `/api/v3`: lab refuses a GitHub address that names no API).
pub fn repo_path(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Gitea => "/api/v1/repos/owner/repo",
        Flavor::Github => "/api/v3/repos/owner/repo",
    }
}

/// The forge's API root.
pub fn api_root(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Gitea => "/api/v1",
        Flavor::Github => "/api/v3",
    }
}

impl FakeForge {
    pub async fn start(flavor: Flavor) -> FakeForge {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let fake = Fake {
            flavor,
            token: "secret-forge-token-1234".into(),
            state: Arc::new(Mutex::new(State_ {
                login: "lab-bot".into(),
                login_type: "User".into(),
                ..State_::default()
            })),
            base: url.clone(),
        };
        let root = api_root(flavor);
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
            .route(repo, get(follow::get_repo))
            .route(&format!("{root}/user"), get(follow::get_user))
            .route(
                &format!("{repo}/collaborators/{{user}}/permission"),
                get(collaborator_permission),
            )
            .route(&format!("{repo}/actions/runs"), get(follow::workflow_runs))
            .route(
                &format!("{repo}/pulls/{{n}}/reviews/{{id}}/comments"),
                get(follow::review_line_comments),
            )
            .route(&format!("{repo}/pulls"), get(list_pulls).post(create_pull))
            .route(
                &format!("{repo}/pulls/{{n}}"),
                get(follow::get_pull).patch(edit_pull),
            )
            .route(
                &format!("{repo}/pulls/{{n}}/reviews"),
                get(follow::reviews).post(follow::create_review),
            )
            .route(
                &format!("{repo}/pulls/{{n}}/comments"),
                get(follow::review_comments),
            )
            .route(
                &format!("{repo}/commits/{{sha}}/status"),
                get(follow::combined_status),
            )
            .route(
                &format!("{repo}/commits/{{sha}}/check-runs"),
                get(follow::check_runs),
            )
            .layer(axum::middleware::from_fn_with_state(fake.clone(), gate))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let url = match flavor {
            Flavor::Github => format!("{url}{root}"),
            Flavor::Gitea => url,
        };
        FakeForge { url, fake }
    }

    /// The server's origin (GitHub's API is under `/api/v3` there).
    pub fn origin(&self) -> String {
        self.url
            .trim_end_matches(api_root(self.fake.flavor))
            .to_owned()
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

    /// Sets an issue's body and author: Gitea's `user`, and GitHub's
    /// `author_association` too.
    pub fn set_issue(&self, number: i64, body: &str, author: &str, association: &str) {
        let mut s = self.fake.state.lock().unwrap();
        let i = &mut s.issues[(number - 1) as usize];
        i["body"] = json!(body);
        i["user"] = user(author, 20 + number);
        if self.fake.flavor == Flavor::Github {
            i["author_association"] = json!(association);
        }
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

pub(super) fn user(login: &str, id: i64) -> Value {
    json!({"id": id, "login": login, "node_id": format!("U_{id}"), "avatar_url": "https://example.com/a.png",
        "html_url": format!("https://example.com/{login}"), "url": format!("https://example.com/api/users/{login}"),
        "type": "User", "site_admin": false, "full_name": "", "email": ""})
}

pub(super) fn label_value(flavor: Flavor, id: i64, name: &str) -> Value {
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
pub(super) fn label_json(s: &mut State_, flavor: Flavor, name: &str) -> Value {
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

pub(super) fn issue_json(
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
