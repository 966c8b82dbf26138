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
    /// This server's tmux socket, killed when the test ends.
    socket: PathBuf,
    http: reqwest::Client,
}

impl Drop for TestServer {
    /// Ends this server's tmux server and every agent in it.
    fn drop(&mut self) {
        super::agent::kill_tmux(&self.socket);
    }
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
        Self::start_tweaked(backend, |_| {}).await
    }

    /// Starts a server on `backend` after `tweak` changed its configuration.
    pub async fn start_tweaked(
        backend: Backend,
        tweak: impl FnOnce(&mut lab::server::ServeConfig),
    ) -> TestServer {
        let dir = tempfile::Builder::new()
            .prefix("lab-it-")
            .tempdir()
            .unwrap();
        let database_url = backend.fresh_url().await;
        Self::start_with(dir, database_url, tweak).await
    }

    pub async fn start_in(dir: TempDir, database_url: Option<String>) -> TestServer {
        Self::start_with(dir, database_url, |_| {}).await
    }

    /// Starts a server after `tweak` changed its configuration.
    pub async fn start_with(
        dir: TempDir,
        database_url: Option<String>,
        tweak: impl FnOnce(&mut lab::server::ServeConfig),
    ) -> TestServer {
        let agent = super::agent::install(dir.path());
        let mut cfg = lab::server::ServeConfig {
            data_dir: Some(dir.path().join("data")),
            listen: "127.0.0.1:0".into(),
            database_url: database_url.clone(),
            public_url: None,
            reconcile_ms: 100,
            lab_exe: Some(env!("CARGO_BIN_EXE_lab").into()),
            provider_bins: [
                ("claude-code".to_owned(), agent.clone()),
                ("codex".to_owned(), agent),
            ]
            .into(),
            agent_home: Some(dir.path().join("home")),
        };
        tweak(&mut cfg);
        let running = lab::server::start(&cfg).await.expect("server starts");
        lab::init_tls();
        // Logs go to the test's output: shown when a test fails.
        let filter = std::env::var("LAB_LOG").unwrap_or_else(|_| "warn,lab::run=debug".to_owned());
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
        TestServer {
            socket: running.runner.tmux.socket().to_path_buf(),
            url: format!("http://{}", running.addr),
            token: running.token.clone(),
            running: Some(running),
            dir,
            database_url,
            http: reqwest::Client::new(),
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        match &self.running {
            Some(r) => r.runner.cfg.data_dir.clone(),
            None => self.dir.path().join("data"),
        }
    }

    pub fn tmp(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.stop().await.unwrap();
        }
    }

    /// Stops this server and starts a new one on the same data dir and
    /// database. Runs keep going in tmux meanwhile.
    pub async fn restart(mut self) -> TestServer {
        if let Some(r) = self.running.take() {
            r.stop().await.unwrap();
        }
        let placeholder = tempfile::tempdir().unwrap();
        // Keep the tmux server (and its runs) alive across the restart.
        self.socket = placeholder.path().join("none.sock");
        let dir = std::mem::replace(&mut self.dir, placeholder);
        let url = self.database_url.clone();
        drop(self);
        TestServer::start_in(dir, url).await
    }

    pub fn scheduler(&self) -> &lab::afk::Scheduler {
        &self.running.as_ref().expect("server running").scheduler
    }

    pub fn runner(&self) -> &lab::run::Runner {
        &self.running.as_ref().expect("server running").runner
    }

    /// Starts a manual run of `repo` and returns it.
    pub async fn start_run(&self, repo: &str, prompt: &str) -> Value {
        self.post(
            "/api/v1/runs",
            serde_json::json!({"repo": repo, "prompt": prompt}),
        )
        .await
        .expect(201)
    }

    /// Starts a manual run of `repo` whose agent stays, and waits until the
    /// agent is up (it has started its child).
    pub async fn working_run(&self, repo: &str) -> Value {
        let run = self.start_run(repo, "stay").await;
        self.record(super::id(&run), "child").await;
        run
    }

    /// The run's own token (`LAB_TOKEN` in its agent's environment).
    pub async fn run_token(&self, id: i64) -> String {
        super::agent::env(&self.record(id, "env").await)
            .into_iter()
            .find(|(k, _)| k == "LAB_TOKEN")
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("run {id}'s agent has no LAB_TOKEN"))
    }

    /// A pid the fake agent of run `id` recorded (`pid` or `child`).
    pub async fn recorded_pid(&self, id: i64, file: &str) -> i64 {
        let text = String::from_utf8(self.record(id, file).await).unwrap();
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("run {id}'s {file} record is not a pid: {text:?}"))
    }

    /// Polls a run until `pred` holds (at most `secs` seconds).
    pub async fn wait_run(&self, id: i64, secs: u64, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let r = self.get(&format!("/api/v1/runs/{id}")).await.ok();
            if pred(&r) {
                return r;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "run {id} never got there: {r}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Waits for a run's state.
    pub async fn wait_state(&self, id: i64, state: &str) -> Value {
        self.wait_run(id, 20, |r| r["state"] == state).await
    }

    /// What the fake agent of run `id` recorded in `file` (argv, env, cwd, pid, child).
    pub async fn record(&self, id: i64, file: &str) -> Vec<u8> {
        super::agent::record(self.dir.path(), id, file).await
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

    /// Sends `head` (a request line and headers, no body) on a socket of its
    /// own and returns the first bytes of the answer, which must come within
    /// 5 s. (An HTTP client still writing a body the server refused sees a
    /// broken pipe instead of the answer.)
    pub async fn raw_head(&self, head: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = self.url.trim_start_matches("http://");
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        sock.write_all(head.as_bytes()).await.unwrap();
        let mut buf = vec![0u8; 16 * 1024];
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), sock.read(&mut buf))
            .await
            .expect("lab answers before the body arrives")
            .unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
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
