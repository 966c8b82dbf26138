//! The fake forges answer what the real ones describe: each JSON answer of
//! the routes lab calls is checked against the vendored subset of the
//! forges' published schemas (`tests/fixtures/forge-schemas/`, README
//! there), and the answers' codes and paging headers against what the real
//! forges send. No lab server is involved: this is the fakes' own test.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::forge::{FakeForge, Flavor, Limit, repo_path};

fn doc(flavor: Flavor) -> Value {
    let name = match flavor {
        Flavor::Gitea => "gitea.json",
        Flavor::Github => "github.json",
    };
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/forge-schemas/");
    serde_json::from_str(&std::fs::read_to_string(format!("{p}{name}")).unwrap()).unwrap()
}

/// A small checker of what these schemas use: `$ref` (by its last
/// segment), `type`, `nullable`, `required`, `properties`, `items`,
/// `oneOf`. Swagger 2.0 (Gitea's) cannot say what may be null, and Go sends
/// null for nil pointers and slices: with `nullable_pointers`, null passes
/// (what lab needs non-null is checked by `lab_reads`).
fn check(doc: &Value, schema: &Value, v: &Value, at: &str, errs: &mut Vec<String>) {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap();
        let target = &doc["schemas"][name];
        assert!(
            target.is_object(),
            "{at}: no schema {name} in the vendored subset"
        );
        return check(doc, target, v, at, errs);
    }
    if v.is_null() {
        if schema["nullable"] != true && doc["nullable_pointers"] != true {
            errs.push(format!("{at}: null, not nullable"));
        }
        return;
    }
    if let Some(alts) = schema["oneOf"].as_array() {
        let fits = alts
            .iter()
            .filter(|s| {
                let mut e = Vec::new();
                check(doc, s, v, at, &mut e);
                e.is_empty()
            })
            .count();
        if fits != 1 {
            errs.push(format!("{at}: fits {fits} of oneOf, not one"));
        }
        return;
    }
    let ok = match schema["type"].as_str() {
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("string") => v.is_string(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        Some("boolean") => v.is_boolean(),
        _ => true,
    };
    if !ok {
        errs.push(format!("{at}: {v} is not {}", schema["type"]));
        return;
    }
    for r in schema["required"].as_array().into_iter().flatten() {
        let k = r.as_str().unwrap();
        if v.get(k).is_none() {
            errs.push(format!("{at}: lacks required {k}"));
        }
    }
    if let Some(props) = schema["properties"].as_object() {
        for (k, s) in props {
            if let Some(x) = v.get(k) {
                check(doc, s, x, &format!("{at}.{k}"), errs);
            }
        }
    }
    if let (Some(items), Some(xs)) = (schema.get("items"), v.as_array()) {
        for (i, x) in xs.iter().enumerate() {
            check(doc, items, x, &format!("{at}[{i}]"), errs);
        }
    }
}

/// The fields lab reads of each answer (`src/issues/forge/wire.rs`): there
/// and not null.
fn lab_reads(kind: &str) -> &'static [&'static str] {
    match kind {
        "issue" => &["number", "title", "state", "labels", "html_url"],
        "label" => &["id", "name"],
        "comment" => &["body", "user", "created_at"],
        "pull" => &["number", "title", "html_url", "state", "head", "base"],
        "check-runs" => &["check_runs"],
        "status" => &["statuses"],
        "review" => &["id", "user", "state"],
        "review-comment" => &["id", "user", "body", "path"],
        "user" => &["login"],
        "repo" => &["permissions", "default_branch"],
        "workflow-runs" => &["workflow_runs"],
        _ => &["message"],
    }
}

fn schema_name(flavor: Flavor, kind: &str) -> &'static str {
    match (flavor, kind) {
        (Flavor::Gitea, "issue") => "Issue",
        (Flavor::Gitea, "label") => "Label",
        (Flavor::Gitea, "comment") => "Comment",
        (Flavor::Gitea, "pull") => "PullRequest",
        (Flavor::Gitea, "status") => "CombinedStatus",
        (Flavor::Gitea, "review") => "PullReview",
        (Flavor::Gitea, "review-comment") => "PullReviewComment",
        (Flavor::Gitea, "user") => "User",
        (Flavor::Gitea, "repo") => "Repository",
        (Flavor::Gitea, _) => "APIError",
        (Flavor::Github, "issue") => "issue",
        (Flavor::Github, "label") => "label",
        (Flavor::Github, "comment") => "issue-comment",
        (Flavor::Github, "pull") => "pull-request",
        (Flavor::Github, "check-runs") => "check-run-list",
        (Flavor::Github, "status") => "combined-commit-status",
        (Flavor::Github, "review") => "pull-request-review",
        (Flavor::Github, "review-comment") => "pull-request-review-comment",
        (Flavor::Github, "validation") => "validation-error",
        (Flavor::Github, "user") => "public-user",
        (Flavor::Github, "repo") => "full-repository",
        (Flavor::Github, "workflow-runs") => "workflow-run-list",
        (Flavor::Github, _) => "basic-error",
    }
}

fn conforms(flavor: Flavor, kind: &str, v: &Value, what: &str) {
    let d = doc(flavor);
    let schema = json!({"$ref": format!("#/x/{}", schema_name(flavor, kind))});
    let items: Vec<&Value> = match v.as_array() {
        Some(xs) => xs.iter().collect(),
        None => vec![v],
    };
    assert!(!items.is_empty(), "{what}: nothing to check");
    let mut errs = Vec::new();
    for (i, x) in items.iter().enumerate() {
        check(&d, &schema, x, &format!("{what}[{i}]"), &mut errs);
        for k in lab_reads(kind) {
            if x.get(*k).is_none_or(Value::is_null) {
                errs.push(format!("{what}[{i}]: lab reads {k}, missing"));
            }
        }
    }
    assert!(errs.is_empty(), "{errs:#?}");
}

struct Client {
    http: reqwest::Client,
    base: String,
    auth: String,
}

impl Client {
    async fn call(
        &self,
        m: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, reqwest::header::HeaderMap, Value) {
        let mut rb = self
            .http
            .request(m, format!("{}{path}", self.base))
            .header("authorization", &self.auth);
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let r = rb.send().await.unwrap();
        let (s, h) = (r.status(), r.headers().clone());
        (s, h, r.json().await.unwrap_or(Value::Null))
    }
}

/// What lab reads to follow a pull request (`src/issues/forge/status.rs`).
async fn follow_routes(f: &FakeForge, c: &Client, flavor: Flavor, n: i64) {
    let repo = repo_path(flavor);
    f.fake.state.lock().unwrap().ci.all = Some("failure".into());
    f.add_review(n, "ana", "CHANGES_REQUESTED", "Rename it.");
    f.add_pull_comment(n, "ana", "Off by one.");
    let (s, _, v) = c
        .call(Method::GET, &format!("{repo}/pulls/{n}"), None)
        .await;
    assert_eq!(s, 200);
    conforms(flavor, "pull", &v, "one pull");
    let sha = v["head"]["sha"].as_str().unwrap().to_owned();
    assert!(v["user"]["login"].is_string(), "{v}");
    let (_, _, st) = c
        .call(Method::GET, &format!("{repo}/commits/{sha}/status"), None)
        .await;
    conforms(flavor, "status", &st, "combined status");
    let (_, _, v) = c
        .call(Method::GET, &format!("{repo}/pulls/{n}/reviews"), None)
        .await;
    conforms(flavor, "review", &v, "reviews");
    // The account lab acts as, and the repo as lab checks a token on it.
    let (s, _, v) = c
        .call(
            Method::GET,
            &format!("{}/user", crate::support::forge::api_root(flavor)),
            None,
        )
        .await;
    assert_eq!(s, 200);
    conforms(flavor, "user", &v, "the token's account");
    let (s, _, v) = c.call(Method::GET, repo, None).await;
    assert_eq!(s, 200);
    conforms(flavor, "repo", &v, "the repository");
    // Conversation comments by people, on both forges.
    f.add_conversation_comment(n, "ben", "Looks odd.");
    let (_, _, v) = c
        .call(Method::GET, &format!("{repo}/issues/{n}/comments"), None)
        .await;
    conforms(flavor, "comment", &v, "the conversation");
    if flavor == Flavor::Github {
        let (_, _, v) = c
            .call(Method::GET, &format!("{repo}/pulls/{n}/reviews"), None)
            .await;
        assert_eq!(v[0]["state"], "CHANGES_REQUESTED");
        let (_, _, v) = c
            .call(
                Method::GET,
                &format!("{repo}/actions/runs?head_sha={sha}"),
                None,
            )
            .await;
        conforms(flavor, "workflow-runs", &v, "Actions runs");
        let (_, _, v) = c
            .call(
                Method::GET,
                &format!("{repo}/commits/{sha}/check-runs"),
                None,
            )
            .await;
        conforms(flavor, "check-runs", &v, "check runs");
        let (_, _, v) = c
            .call(Method::GET, &format!("{repo}/pulls/{n}/comments"), None)
            .await;
        conforms(flavor, "review-comment", &v, "review comments");
    } else {
        let review = f.add_line_review(n, "ana", "Off by one.", "src/lib.rs");
        let (_, _, v) = c
            .call(
                Method::GET,
                &format!("{repo}/pulls/{n}/reviews/{review}/comments"),
                None,
            )
            .await;
        conforms(flavor, "review-comment", &v, "a review's line comments");
        assert_eq!(st["statuses"][0]["status"], "failure", "{st}");
        let (_, _, v) = c
            .call(Method::GET, &format!("{repo}/issues/{n}/comments"), None)
            .await;
        conforms(flavor, "comment", &v, "the conversation");
        assert_eq!(v[0]["user"]["login"], "ana", "{v}");
    }
}

async fn fakes_answer_as_described(flavor: Flavor) {
    let f = FakeForge::start(flavor).await;
    let auth = match flavor {
        Flavor::Gitea => format!("token {}", f.fake.token),
        Flavor::Github => format!("Bearer {}", f.fake.token),
    };
    let c = Client {
        http: lab::issues::forge_http_client(),
        base: f.origin(),
        auth,
    };
    let repo = repo_path(flavor);
    for i in 0..35 {
        f.add_issue(
            &format!("issue {i}"),
            &["ready-for-agent", "bug"],
            "open",
            i % 10 == 3,
        );
    }
    f.fake
        .state
        .lock()
        .unwrap()
        .comments
        .push((1, "first".into()));
    use Method as M;

    let (s, h, v) = c
        .call(
            M::GET,
            &format!("{repo}/issues?state=open&limit=20&per_page=20"),
            None,
        )
        .await;
    assert_eq!(s, 200);
    conforms(flavor, "issue", &v, "issue list");
    assert!(
        h.get("link").is_some(),
        "a listing with more pages names the next"
    );
    if flavor == Flavor::Gitea {
        assert_eq!(h["x-total-count"], "35");
    }
    let (_, _, v) = c.call(M::GET, &format!("{repo}/issues/4"), None).await;
    conforms(flavor, "issue", &v, "one issue");
    let (s, _, v) = c
        .call(
            M::POST,
            &format!("{repo}/issues"),
            Some(json!({"title": "new", "body": "b"})),
        )
        .await;
    assert_eq!(s, 201);
    conforms(flavor, "issue", &v, "created issue");
    let (s, _, v) = c
        .call(
            M::PATCH,
            &format!("{repo}/issues/1"),
            Some(json!({"state": "closed"})),
        )
        .await;
    let edited = if flavor == Flavor::Gitea { 201 } else { 200 };
    assert_eq!(s, edited, "an edited issue's code");
    conforms(flavor, "issue", &v, "edited issue");
    let (_, _, v) = c
        .call(M::GET, &format!("{repo}/issues/1/comments"), None)
        .await;
    conforms(flavor, "comment", &v, "comments");
    let (s, _, v) = c
        .call(
            M::POST,
            &format!("{repo}/issues/1/comments"),
            Some(json!({"body": "hi"})),
        )
        .await;
    assert_eq!(s, 201);
    conforms(flavor, "comment", &v, "new comment");
    let (_, h, v) = c
        .call(M::GET, &format!("{repo}/labels?limit=50&per_page=50"), None)
        .await;
    conforms(flavor, "label", &v, "labels");
    if flavor == Flavor::Gitea {
        assert!(
            h.get("link").is_none(),
            "Gitea's label listing sends no Link"
        );
        assert_eq!(h["x-total-count"], "2");
        f.add_org_label("org-wide");
        let (_, _, v) = c.call(M::GET, "/api/v1/orgs/owner/labels", None).await;
        conforms(flavor, "label", &v, "org labels");
    }
    let (s, _, v) = c
        .call(
            M::POST,
            &format!("{repo}/labels"),
            Some(json!({"name": "x", "color": "#aabbcc"})),
        )
        .await;
    assert_eq!(s, 201);
    conforms(flavor, "label", &v, "new label");
    let pull = json!({"title": "t", "body": "b", "head": "lab/run-1", "base": "main"});
    let (s, _, v) = c
        .call(M::POST, &format!("{repo}/pulls"), Some(pull.clone()))
        .await;
    assert_eq!(s, 201);
    conforms(flavor, "pull", &v, "new pull");
    let (_, _, v) = c
        .call(M::GET, &format!("{repo}/pulls?state=all"), None)
        .await;
    conforms(flavor, "pull", &v, "pulls");
    follow_routes(&f, &c, flavor, v[0]["number"].as_i64().unwrap()).await;
    let (s, _, v) = c.call(M::POST, &format!("{repo}/pulls"), Some(pull)).await;
    match flavor {
        Flavor::Gitea => {
            assert_eq!(s, 409, "Gitea refuses a second pull request with 409");
            conforms(flavor, "error", &v, "duplicate pull");
        }
        Flavor::Github => {
            assert_eq!(s, 422);
            conforms(flavor, "validation", &v, "duplicate pull");
        }
    }
    let (s, _, v) = c.call(M::GET, &format!("{repo}/issues/9999"), None).await;
    assert_eq!(s, 404);
    conforms(flavor, "error", &v, "not found");
    f.fake.state.lock().unwrap().limit = Some(Limit::RetryAfter(3));
    let (s, h, v) = c.call(M::GET, &format!("{repo}/issues"), None).await;
    assert_eq!(s, 403);
    assert_eq!(h["retry-after"], "3");
    conforms(flavor, "error", &v, "rate limited");
    let bad = Client {
        auth: "Basic bm9ib2R5Og==".into(),
        ..c
    };
    let (s, _, v) = bad.call(M::GET, &format!("{repo}/issues"), None).await;
    assert_eq!(s, 401);
    conforms(flavor, "error", &v, "bad credentials");
}

#[tokio::test]
async fn gitea_fake_answers_as_described() {
    fakes_answer_as_described(Flavor::Gitea).await;
}

#[tokio::test]
async fn github_fake_answers_as_described() {
    fakes_answer_as_described(Flavor::Github).await;
}

/// The schema check can fail: an answer without a required field, or with a
/// string label where Gitea describes objects, does not pass.
#[test]
fn the_check_refuses_what_the_schemas_do_not_allow() {
    let d = doc(Flavor::Github);
    let mut errs = Vec::new();
    check(
        &d,
        &json!({"$ref": "#/x/issue"}),
        &json!({"number": "1"}),
        "issue",
        &mut errs,
    );
    assert!(
        errs.iter().any(|e| e.contains("lacks required node_id")),
        "{errs:?}"
    );
    assert!(errs.iter().any(|e| e.contains("issue.number")), "{errs:?}");
    let d = doc(Flavor::Gitea);
    let mut errs = Vec::new();
    check(
        &d,
        &json!({"$ref": "#/x/Issue"}),
        &json!({"labels": ["bug"]}),
        "issue",
        &mut errs,
    );
    assert!(
        errs.iter().any(|e| e.contains("issue.labels[0]")),
        "{errs:?}"
    );
}
