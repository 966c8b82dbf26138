//! A real lab server on 127.0.0.1:0, with a client that speaks its API.

use std::path::PathBuf;

use reqwest::StatusCode;
use serde_json::Value;
use tempfile::TempDir;

use super::Backend;

pub struct TestServer {
    pub running: Option<lab::server::Running>,
    pub url: String,
    pub token: String,
    pub dir: TempDir,
    pub database_url: Option<String>,
    http: reqwest::Client,
}

/// A response: status and JSON body (Null when the body is not JSON).
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub body: Value,
}

impl Resp {
    #[track_caller]
    pub fn ok(self) -> Value {
        assert!(
            self.status.is_success(),
            "expected success, got {}: {}",
            self.status,
            self.body
        );
        self.body
    }

    #[track_caller]
    pub fn expect(self, status: u16) -> Value {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.body);
        self.body
    }
}

impl TestServer {
    pub async fn start(backend: Backend) -> TestServer {
        let dir = tempfile::Builder::new()
            .prefix("lab-it-")
            .tempdir()
            .unwrap();
        let database_url = backend.fresh_url().await;
        Self::start_in(dir, database_url).await
    }

    pub async fn start_in(dir: TempDir, database_url: Option<String>) -> TestServer {
        let cfg = lab::server::ServeConfig {
            data_dir: Some(dir.path().join("data")),
            listen: "127.0.0.1:0".into(),
            database_url: database_url.clone(),
        };
        let running = lab::server::start(&cfg).await.expect("server starts");
        let _ = rustls::crypto::ring::default_provider().install_default();
        TestServer {
            url: format!("http://{}", running.addr),
            token: running.token.clone(),
            running: Some(running),
            dir,
            database_url,
            http: reqwest::Client::new(),
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn tmp(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.stop().await.unwrap();
        }
    }

    pub async fn send(&self, rb: reqwest::RequestBuilder) -> Resp {
        let resp = rb.send().await.expect("request sent");
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Resp { status, body }
    }

    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token)
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(self.req(reqwest::Method::GET, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.send(self.req(reqwest::Method::POST, path).json(&body))
            .await
    }

    pub async fn patch(&self, path: &str, body: Value) -> Resp {
        self.send(self.req(reqwest::Method::PATCH, path).json(&body))
            .await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.send(self.req(reqwest::Method::DELETE, path)).await
    }

    /// Registers a real git repository named `name`.
    pub async fn add_repo(&self, name: &str) -> Value {
        let path = super::git::init_repo(&self.tmp(), name);
        self.post(
            "/api/v1/repos",
            serde_json::json!({"name": name, "path": path}),
        )
        .await
        .expect(201)
    }
}
