//! What the benchmarks share: a git repository, an executable script, the
//! release `lab serve` on a fresh data dir, and its API.
//! Included by each `examples/bench_*.rs` with `mod common;`.

#![allow(dead_code)] // each benchmark uses its own part of it

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The `p` quantile (0.0..=1.0) of `v`, nearest rank.
pub fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

pub fn median(v: &mut [f64]) -> f64 {
    pct(v, 0.5)
}

/// Writes an executable script.
pub fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A git repository with one empty commit on `main`.
pub fn git_repo(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["commit", "-q", "--allow-empty", "-m", "x"],
    ] {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "b")
            .env("GIT_AUTHOR_EMAIL", "b@x")
            .env("GIT_COMMITTER_NAME", "b")
            .env("GIT_COMMITTER_EMAIL", "b@x")
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

/// The release binary; the benchmarks measure it, not a debug build.
pub fn lab_bin() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/lab");
    assert!(bin.exists(), "build first: cargo build --release");
    bin
}

/// lab's API at `url`, with the admin token. Redirects are not followed
/// (the pages benchmark reads its login cookie from one).
pub struct Api {
    pub url: String,
    pub token: String,
    pub http: reqwest::Client,
}

impl Api {
    pub fn new(url: String, token: String) -> Api {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Api { url, token, http }
    }

    /// A successful call's JSON answer (null when it has none) and headers.
    pub async fn call(
        &self,
        m: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (Value, reqwest::header::HeaderMap) {
        let mut rb = self
            .http
            .request(m, format!("{}{path}", self.url))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let r = rb.send().await.unwrap();
        let (status, headers) = (r.status(), r.headers().clone());
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{path}: {status} {v}");
        (v, headers)
    }

    pub async fn send(&self, m: reqwest::Method, path: &str, body: Value) -> Value {
        self.call(m, path, Some(body)).await.0
    }
}

/// `lab serve` (release) on `<t>/data`, with `agent` as the Claude Code CLI,
/// answering `/healthz`. Kill the child when done.
pub async fn serve(t: &Path, agent: &Path) -> (Child, Api) {
    serve_env(t, agent, &[]).await
}

/// [`serve`], with more variables in lab's environment.
pub async fn serve_env(t: &Path, agent: &Path, env: &[(&str, &str)]) -> (Child, Api) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let data = t.join("data");
    let child = Command::new(lab_bin())
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--data-dir")
        .arg(&data)
        .env("LAB_CLAUDE_CODE_BIN", agent)
        .env("LAB_LOG", "warn")
        .env("HOME", t.join("home"))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    for _ in 0..100 {
        if http.get(format!("{url}/healthz")).send().await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let token = std::fs::read_to_string(data.join("token"))
        .unwrap()
        .trim()
        .to_owned();
    (child, Api::new(url, token))
}

/// A fresh PostgreSQL database on the server `admin` names (dropped first if
/// an earlier run of this process id left it); its URL.
pub async fn fresh_pg(admin: &str) -> String {
    use sqlx::Connection;
    let name = format!("lab_bench_{}", std::process::id());
    let mut c = sqlx::PgConnection::connect(admin)
        .await
        .expect("PostgreSQL");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name}"
    )))
    .execute(&mut c)
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut c)
        .await
        .unwrap();
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(admin);
    format!("{base}/{name}")
}
