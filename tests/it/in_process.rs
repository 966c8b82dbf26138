//! The in-process tier: the whole application as a `Router`, each request
//! through `tower::ServiceExt::oneshot`. No listener, no tmux server, no
//! loops: for what a handler does with a request, on a real database of
//! each backend, in milliseconds.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use serde_json::{Value, json};
use tempfile::TempDir;
use tower::ServiceExt;

use crate::on_both;
use crate::support::Backend;
use crate::support::git::init_repo;

/// The application of one test, and how to call it.
pub(crate) struct App {
    router: axum::Router,
    pub(crate) state: lab::state::AppState,
    token: String,
    dir: TempDir,
    database_url: Option<String>,
}

/// A request's answer: status and body (JSON when it is JSON, else the
/// text as a string).
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) body: Value,
}

impl Answer {
    pub(crate) fn text(&self) -> &str {
        self.body.as_str().unwrap_or("")
    }
}

impl App {
    pub(crate) async fn new(b: &Backend) -> App {
        let dir = tempfile::Builder::new()
            .prefix("lab-inproc-")
            .tempdir()
            .unwrap();
        let database_url = b.fresh_url().await;
        Self::open(dir, database_url).await
    }

    /// The application over `dir`'s data and `database_url` (what a lab
    /// started again finds).
    pub(crate) async fn open(dir: TempDir, database_url: Option<String>) -> App {
        let cfg = crate::support::server::config(&dir, database_url.clone());
        let (router, state) = lab::server::in_process(&cfg).await.expect("the app builds");
        let token = std::fs::read_to_string(dir.path().join("data/token"))
            .unwrap()
            .trim()
            .to_owned();
        App {
            router,
            state,
            token,
            dir,
            database_url,
        }
    }

    pub(crate) async fn send(&self, req: Request<Body>) -> Answer {
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 22)
            .await
            .unwrap();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Answer { status, body }
    }

    /// An API call with the admin token.
    pub(crate) async fn api(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("/api/v1{path}"))
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token));
        let body = match body {
            Some(v) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Body::from(v.to_string())
            }
            None => Body::empty(),
        };
        self.send(req.body(body).unwrap()).await
    }

    /// A page, as a person logged in sees it.
    pub(crate) async fn page(&self, path: &str) -> Answer {
        let set = lab::auth::browser::start(&self.state.store, false)
            .await
            .unwrap();
        let cookie = set.to_str().unwrap().split(';').next().unwrap().to_owned();
        let req = Request::builder()
            .uri(path)
            .header(header::COOKIE, cookie)
            .body(Body::empty())
            .unwrap();
        self.send(req).await
    }

    /// Registers the repo `name` (a new git repository in the test's dir).
    pub(crate) async fn repo(&self, name: &str) {
        let path = init_repo(self.dir.path(), name);
        let a = self
            .api(
                Method::POST,
                "/repos",
                Some(json!({"name": name, "path": path})),
            )
            .await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    }

    /// Runs `sql` on the database, as a person editing it by hand would.
    pub(crate) async fn edit_by_hand(&self, sql: &'static str) {
        use sqlx::Connection;
        match &self.database_url {
            Some(url) => {
                let mut c = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query(sql).execute(&mut c).await.unwrap();
            }
            None => {
                let db = self.dir.path().join("data/lab.db");
                let mut c = sqlx::SqliteConnection::connect(&format!("sqlite://{}", db.display()))
                    .await
                    .unwrap();
                sqlx::query(sql).execute(&mut c).await.unwrap();
            }
        }
    }
}

on_both!(
    the_api_and_the_afk_page_show_one_status,
    a_repo_naming_a_provider_lab_does_not_know_says_so,
    a_refused_settings_change_writes_nothing,
    a_provider_lab_does_not_know_is_refused_by_name_and_a_stored_one_is_left_alone,
);

/// Both front ends read the scheduler through `service::afk::status`:
/// what the API says after a pause and a limit change, the page says too.
async fn the_api_and_the_afk_page_show_one_status(b: Backend) {
    let app = App::new(&b).await;
    let a = app.api(Method::GET, "/afk/status", None).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body["paused"], false, "{}", a.body);
    let page = app.page("/afk").await;
    assert!(
        page.text().contains("<strong>running</strong>"),
        "{}",
        page.text()
    );

    let a = app
        .api(
            Method::PATCH,
            "/settings",
            Some(json!({"afk": {"max_concurrent": 7}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let a = app.api(Method::POST, "/afk/pause", None).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["paused"], true, "{}", a.body);
    assert_eq!(a.body["max_concurrent"], 7, "{}", a.body);
    assert_eq!(a.body["live"], 0, "{}", a.body);

    let page = app.page("/afk").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.text().contains("<strong>paused</strong>"),
        "{}",
        page.text()
    );
    assert!(
        page.text().contains("0 of at most 7 AFK runs live"),
        "{}",
        page.text()
    );
}

/// A repo row naming a provider this lab does not know (edited by hand, or
/// written by a newer lab) is never shown or saved as another provider's:
/// its page names the id, the providers lab knows and the fix.
async fn a_repo_naming_a_provider_lab_does_not_know_says_so(b: Backend) {
    let app = App::new(&b).await;
    app.repo("r").await;
    let page = app.page("/repos/r").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text());
    // Lab stops; the row is edited; lab starts again (the cache is new).
    let App {
        dir, database_url, ..
    } = app;
    let edit = App::open(dir, database_url).await;
    edit.edit_by_hand("UPDATE repos SET provider = 'gone' WHERE name = 'r'")
        .await;
    let App {
        dir, database_url, ..
    } = edit;
    let app = App::open(dir, database_url).await;
    let page = app.page("/repos/r").await;
    assert_eq!(page.status, StatusCode::CONFLICT, "{}", page.text());
    let text = page.text();
    assert!(text.contains("unknown provider"), "{text}");
    assert!(text.contains("gone"), "{text}");
    assert!(
        text.contains("claude-code") && text.contains("codex"),
        "{text}"
    );
    assert!(text.contains("labctl repo set r --provider"), "{text}");
}

/// A settings change with one bad field answers 400 naming the field and
/// what is allowed, and changes nothing, not even its valid fields.
async fn a_refused_settings_change_writes_nothing(b: Backend) {
    let app = App::new(&b).await;
    let before = app.api(Method::GET, "/settings", None).await.body;
    let a = app
        .api(
            Method::PATCH,
            "/settings",
            Some(json!({"afk": {"max_concurrent": 5, "tick_seconds": -1}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
    assert_eq!(a.body["error"]["field"], "afk.tick_seconds", "{}", a.body);
    let after = app.api(Method::GET, "/settings", None).await.body;
    assert_eq!(before, after);
}

/// An id that names no provider of lab's is refused where a request names
/// it (the CLI check: 404; a settings change: the field's 400, with the ids
/// lab knows); a settings row of a provider that left the catalog (edited
/// by hand, or written by a newer lab) is left alone: the settings still
/// load, show only the providers lab knows, and take changes.
async fn a_provider_lab_does_not_know_is_refused_by_name_and_a_stored_one_is_left_alone(
    b: Backend,
) {
    let app = App::new(&b).await;
    let a = app
        .api(Method::POST, "/afk/providers/gemini/check", None)
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.body);
    let said = a.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("provider 'gemini' (lab knows: claude-code, codex)"),
        "{}",
        a.body
    );
    let a = app
        .api(
            Method::PATCH,
            "/settings",
            Some(json!({"providers": {"gemini": {"model_default": "x"}}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
    assert_eq!(a.body["error"]["field"], "providers.gemini", "{}", a.body);
    assert_eq!(
        a.body["error"]["message"],
        "providers.gemini: unknown provider 'gemini'; allowed: claude-code, codex",
        "{}",
        a.body
    );

    // Lab stops; a row of another provider is written; lab starts again.
    let App {
        dir, database_url, ..
    } = app;
    let edit = App::open(dir, database_url).await;
    edit.edit_by_hand(
        "INSERT INTO provider_settings (provider, model_default, updated_at) \
         VALUES ('gone', 'x', 0)",
    )
    .await;
    let App {
        dir, database_url, ..
    } = edit;
    let app = App::open(dir, database_url).await;
    let a = app.api(Method::GET, "/settings", None).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let ids: Vec<&String> = a.body["providers"].as_object().unwrap().keys().collect();
    assert_eq!(ids, ["claude-code", "codex"], "{}", a.body);
    let a = app
        .api(
            Method::PATCH,
            "/settings",
            Some(json!({"providers": {"codex": {"model_default": "gpt-6.2-sol"}}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(
        a.body["providers"]["codex"]["model_default"], "gpt-6.2-sol",
        "{}",
        a.body
    );
}
