//! A fake forge: a local HTTP server that answers like Gitea (API v1) or
//! GitHub (REST v3) for one repository, `owner/repo`, with the real
//! responses' shapes (labels as objects, pull requests listed among GitHub
//! issues, `Link` pagination, rate-limit headers).

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Flavor {
    Gitea,
    Github,
}

#[derive(Default, Debug)]
pub struct State_ {
    pub issues: Vec<Value>,
    pub labels: Vec<(i64, String)>,
    pub comments: Vec<(i64, String)>,
    pub pulls: Vec<Value>,
    /// Every request: method and path with query.
    pub log: Vec<String>,
    /// Answer the next request with a rate-limit refusal.
    pub rate_limited: bool,
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
        let repo = match flavor {
            Flavor::Gitea => "/api/v1/repos/owner/repo",
            Flavor::Github => "/repos/owner/repo",
        };
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
            .route(&format!("{repo}/pulls"), get(list_pulls).post(create_pull))
            .route("/unused", put(|| async {}))
            .layer(axum::middleware::from_fn_with_state(fake.clone(), gate))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeForge { url, fake }
    }

    /// Adds an issue (or, on GitHub, a pull request listed among issues).
    pub fn add_issue(&self, title: &str, labels: &[&str], state: &str, is_pull: bool) -> i64 {
        let mut s = self.fake.state.lock().unwrap();
        let number = s.issues.len() as i64 + 1;
        let labels: Vec<Value> = labels.iter().map(|l| label_json(&mut s, l)).collect();
        let mut i = json!({
            "id": 1000 + number, "number": number, "title": title, "body": format!("body of {title}"),
            "state": state, "labels": labels, "html_url": format!("{}/owner/repo/issues/{number}", self.fake.base),
            "user": {"login": "someone"}, "created_at": "2026-11-30T10:00:00Z",
        });
        if is_pull {
            i["pull_request"] = json!({"url": "x"});
        }
        s.issues.push(i);
        number
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
}

fn label_json(s: &mut State_, name: &str) -> Value {
    let id = match s.labels.iter().find(|(_, n)| n == name) {
        Some((id, _)) => *id,
        None => {
            let id = s.labels.len() as i64 + 1;
            s.labels.push((id, name.to_owned()));
            id
        }
    };
    json!({"id": id, "name": name, "color": "ededed"})
}

/// Auth, rate limits, and the request log.
async fn gate(State(f): State<Fake>, req: Request, next: axum::middleware::Next) -> Response {
    let line = format!("{} {}", req.method(), req.uri());
    let want = match f.flavor {
        Flavor::Gitea => format!("token {}", f.token),
        Flavor::Github => format!("Bearer {}", f.token),
    };
    let given = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    {
        let mut s = f.state.lock().unwrap();
        s.log.push(line);
        if s.rate_limited {
            s.rate_limited = false;
            let reset = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
                + 42;
            let mut h = HeaderMap::new();
            h.insert("x-ratelimit-remaining", "0".parse().unwrap());
            h.insert("x-ratelimit-reset", reset.to_string().parse().unwrap());
            return (
                StatusCode::FORBIDDEN,
                h,
                Json(json!({"message": "API rate limit exceeded"})),
            )
                .into_response();
        }
    }
    if given != want {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "Bad credentials"})),
        )
            .into_response();
    }
    next.run(req).await
}

#[derive(Deserialize)]
struct ListQ {
    state: Option<String>,
    labels: Option<String>,
    page: Option<usize>,
    per_page: Option<usize>,
    limit: Option<usize>,
}

async fn list_issues(State(f): State<Fake>, Query(q): Query<ListQ>) -> Response {
    let s = f.state.lock().unwrap();
    let per = q.per_page.or(q.limit).unwrap_or(30);
    let page = q.page.unwrap_or(1);
    let items: Vec<Value> = s
        .issues
        .iter()
        .filter(|i| {
            q.state
                .as_deref()
                .is_none_or(|st| st == "all" || i["state"] == st)
        })
        .filter(|i| {
            q.labels.as_deref().is_none_or(|l| {
                i["labels"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x["name"] == l)
            })
        })
        // Gitea's type=issues leaves pull requests out; GitHub lists them.
        .filter(|i| f.flavor == Flavor::Github || i.get("pull_request").is_none())
        .cloned()
        .collect();
    let pages = items.len().div_ceil(per).max(1);
    let chunk: Vec<Value> = items.into_iter().skip((page - 1) * per).take(per).collect();
    let mut h = HeaderMap::new();
    if page < pages {
        let path = match f.flavor {
            Flavor::Gitea => "/api/v1/repos/owner/repo/issues",
            Flavor::Github => "/repos/owner/repo/issues",
        };
        let mut next = format!(
            "{}{path}?page={}&per_page={per}&limit={per}",
            f.base,
            page + 1
        );
        if let Some(st) = &q.state {
            next.push_str(&format!("&state={st}"));
        }
        if let Some(l) = &q.labels {
            next.push_str(&format!("&labels={l}"));
        }
        h.insert(
            "link",
            format!("<{next}>; rel=\"next\", <{}>; rel=\"last\"", f.base)
                .parse()
                .unwrap(),
        );
    }
    (h, Json(Value::Array(chunk))).into_response()
}

fn find(s: &State_, n: i64) -> Option<usize> {
    s.issues.iter().position(|i| i["number"] == n)
}

async fn get_issue(State(f): State<Fake>, Path(n): Path<i64>) -> Response {
    let s = f.state.lock().unwrap();
    match find(&s, n) {
        Some(i) => Json(s.issues[i].clone()).into_response(),
        None => (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response(),
    }
}

async fn create_issue(State(f): State<Fake>, Json(b): Json<Value>) -> Response {
    let title = b["title"].as_str().unwrap_or("").to_owned();
    if title.is_empty() {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "Validation Failed: title is missing"})),
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
        .map(|l| label_json(&mut s, &l))
        .collect();
    let number = s.issues.len() as i64 + 1;
    let i = json!({"id": 1000 + number, "number": number, "title": title, "body": b["body"], "state": "open",
        "labels": labels, "html_url": format!("{}/owner/repo/issues/{number}", f.base)});
    s.issues.push(i.clone());
    (StatusCode::CREATED, Json(i)).into_response()
}

async fn patch_issue(State(f): State<Fake>, Path(n): Path<i64>, Json(b): Json<Value>) -> Response {
    let mut s = f.state.lock().unwrap();
    let Some(i) = find(&s, n) else {
        return (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response();
    };
    if let Some(st) = b["state"].as_str() {
        s.issues[i]["state"] = json!(st);
    }
    Json(s.issues[i].clone()).into_response()
}

async fn list_comments(State(f): State<Fake>, Path(n): Path<i64>) -> Response {
    let s = f.state.lock().unwrap();
    let c: Vec<Value> = s
        .comments
        .iter()
        .filter(|(i, _)| *i == n)
        .map(|(_, b)| json!({"id": 1, "body": b, "user": {"login": "lab-bot"}, "created_at": "2026-11-30T11:00:00Z"}))
        .collect();
    Json(Value::Array(c)).into_response()
}

async fn add_comment(State(f): State<Fake>, Path(n): Path<i64>, Json(b): Json<Value>) -> Response {
    let mut s = f.state.lock().unwrap();
    s.comments
        .push((n, b["body"].as_str().unwrap_or("").to_owned()));
    (
        StatusCode::CREATED,
        Json(json!({"id": 1, "body": b["body"]})),
    )
        .into_response()
}

/// Labels named (GitHub) or by id (Gitea).
fn named(s: &mut State_, v: &Value) -> Vec<Value> {
    v["labels"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|l| match l {
            Value::String(n) => Some(label_json(s, n)),
            Value::Number(id) => {
                let id = id.as_i64()?;
                let name = s.labels.iter().find(|(i, _)| *i == id)?.1.clone();
                Some(json!({"id": id, "name": name, "color": "ededed"}))
            }
            _ => None,
        })
        .collect()
}

async fn add_labels(State(f): State<Fake>, Path(n): Path<i64>, Json(b): Json<Value>) -> Response {
    let mut s = f.state.lock().unwrap();
    let Some(i) = find(&s, n) else {
        return (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response();
    };
    let new = named(&mut s, &b);
    let labels = s.issues[i]["labels"].as_array_mut().unwrap();
    for l in new {
        if !labels.iter().any(|x| x["name"] == l["name"]) {
            labels.push(l);
        }
    }
    Json(s.issues[i]["labels"].clone()).into_response()
}

async fn set_labels(State(f): State<Fake>, Path(n): Path<i64>, Json(b): Json<Value>) -> Response {
    let mut s = f.state.lock().unwrap();
    let Some(i) = find(&s, n) else {
        return (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response();
    };
    let new = named(&mut s, &b);
    s.issues[i]["labels"] = Value::Array(new);
    Json(s.issues[i]["labels"].clone()).into_response()
}

async fn remove_label(State(f): State<Fake>, Path((n, name)): Path<(i64, String)>) -> Response {
    let mut s = f.state.lock().unwrap();
    let Some(i) = find(&s, n) else {
        return (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response();
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

async fn list_labels(State(f): State<Fake>) -> Response {
    let s = f.state.lock().unwrap();
    Json(Value::Array(
        s.labels
            .iter()
            .map(|(id, n)| json!({"id": id, "name": n, "color": "ededed"}))
            .collect(),
    ))
    .into_response()
}

async fn create_label(State(f): State<Fake>, Json(b): Json<Value>) -> Response {
    let mut s = f.state.lock().unwrap();
    let l = label_json(&mut s, b["name"].as_str().unwrap_or(""));
    (StatusCode::CREATED, Json(l)).into_response()
}

async fn list_pulls(State(f): State<Fake>) -> Response {
    Json(Value::Array(f.state.lock().unwrap().pulls.clone())).into_response()
}

async fn create_pull(State(f): State<Fake>, Json(b): Json<Value>) -> Response {
    let mut s = f.state.lock().unwrap();
    if s.pulls.iter().any(|p| p["head"]["ref"] == b["head"]) {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "A pull request already exists for this branch"})),
        )
            .into_response();
    }
    let number = 500 + s.pulls.len() as i64;
    let p = json!({"id": number, "number": number, "title": b["title"], "body": b["body"], "state": "open",
        "html_url": format!("{}/owner/repo/pulls/{number}", f.base),
        "head": {"ref": b["head"], "sha": "abc"}, "base": {"ref": b["base"], "sha": "def"}});
    s.pulls.push(p.clone());
    (StatusCode::CREATED, Json(p)).into_response()
}
