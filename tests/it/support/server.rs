//! A real lab server on 127.0.0.1:0. It dereferences to the `Api` client
//! of it (`s.get(..)`, `s.url`, `s.token`).

use std::path::PathBuf;

use serde_json::Value;
use tempfile::TempDir;

use super::Backend;
use super::api::Api;

pub struct TestServer {
    pub running: Option<lab::server::Running>,
    pub api: Api,
    pub dir: TempDir,
    pub database_url: Option<String>,
    /// This server's tmux socket, killed when the test ends.
    socket: PathBuf,
}

impl std::ops::Deref for TestServer {
    type Target = Api;
    fn deref(&self) -> &Api {
        &self.api
    }
}

impl Drop for TestServer {
    /// Ends this server's tmux server and every agent in it.
    fn drop(&mut self) {
        super::agent::kill_tmux(&self.socket);
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

    /// A server on a machine without a sandbox (its bubblewrap is missing):
    /// runs that ask a person still start, unsandboxed.
    pub async fn start_unsandboxed(backend: Backend) -> TestServer {
        Self::start_tweaked(backend, |c| {
            c.bwrap = Some("/nonexistent/bwrap".into());
        })
        .await
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
        let mut cfg = config(&dir, database_url.clone());
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
            socket: running.runner.tmux().socket().to_path_buf(),
            api: Api::new(format!("http://{}", running.addr), running.token.clone()),
            running: Some(running),
            dir,
            database_url,
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        match &self.running {
            Some(r) => r.runner.cfg().data_dir.clone(),
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
    pub async fn restart(self) -> TestServer {
        self.restart_with(false).await
    }

    /// Stops this server, kills its tmux server while lab is down (a machine
    /// restart, as lab sees it), and starts a new one on the same data dir
    /// and database.
    pub async fn restart_without_tmux(self) -> TestServer {
        self.restart_with(true).await
    }

    async fn restart_with(mut self, kill_tmux: bool) -> TestServer {
        if let Some(r) = self.running.take() {
            r.stop().await.unwrap();
        }
        if kill_tmux {
            super::agent::kill_tmux(&self.socket);
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

    /// Waits until the AFK scheduler finished `n` more ticks: what a check
    /// that something did *not* happen waits for, rather than a quiet
    /// window (a stalled scheduler fails it instead of passing it).
    pub async fn after_ticks(&self, n: u64) {
        let from = self.scheduler().ticks();
        super::wait::until(
            format_args!("{n} more AFK ticks (from {from})"),
            super::wait::secs(30).every_ms(50),
            async || self.scheduler().ticks() >= from + n,
        )
        .await;
    }

    /// Makes the screen check read `run`'s screen at the next pass, and
    /// waits until it has, and written what the screen said: what a check
    /// that the screen check did *not* change something waits for, rather
    /// than a quiet window (a stalled loop fails it instead of passing it).
    pub async fn after_a_look(&self, run: i64) {
        let from = self.runner().screens_read();
        self.runner().look_again(run);
        super::wait::until(
            format_args!("a look at run {run}'s screen (from {from} read)"),
            super::wait::secs(30).every_ms(20),
            async || self.runner().screens_read() > from,
        )
        .await;
    }

    /// Ends `run`'s usage rest and waits until the usage pass has read its
    /// transcript `n` more times: what a check that a read did *not* count
    /// something waits for, rather than a quiet window.
    pub async fn after_usage_reads(&self, run: i64, n: u64) {
        let from = self.runner().usage_reads_of(run);
        for i in 1..=n {
            self.runner().look_again(run);
            super::wait::until(
                format_args!("usage read {i} of {n} of run {run} (from {from})"),
                super::wait::secs(30).every_ms(20),
                async || self.runner().usage_reads_of(run) >= from + i,
            )
            .await;
        }
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

    /// A pid the fake agent of run `id` recorded, as the host sees it: the
    /// agent runs in a sandbox with a process namespace of its own, so what
    /// it records is its pid in there.
    pub async fn recorded_pid(&self, id: i64, file: &str) -> i64 {
        let text = String::from_utf8(self.record(id, file).await).unwrap();
        let inner: i64 = text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("run {id}'s {file} record is not a pid: {text:?}"));
        let shim = self.get(&format!("/api/v1/runs/{id}")).await.ok()["pid"]
            .as_i64()
            .unwrap_or_else(|| panic!("run {id} has no pid"));
        super::agent::host_pid(shim, inner)
            .unwrap_or_else(|| panic!("no process of run {id} has pid {inner} in its sandbox"))
    }

    /// What the fake agent of run `id` recorded in `file` (argv, env, cwd, pid, child).
    pub async fn record(&self, id: i64, file: &str) -> Vec<u8> {
        super::agent::record(self.dir.path(), id, file).await
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

/// A server's configuration in `dir`: the fake agent as both providers'
/// CLI, the test's temp dir readable in runs, quick loops.
pub fn config(dir: &TempDir, database_url: Option<String>) -> lab::server::ServeConfig {
    let agent = super::agent::install(dir.path());
    lab::server::ServeConfig {
        data_dir: Some(dir.path().join("data")),
        listen: "127.0.0.1:0".into(),
        database_url,
        public_url: None,
        node_url: None,
        node_down_after: 30,
        reconcile_ms: 100,
        notify_retry_ms: 50,
        forge_poll_ms: 300,
        no_relay: false,
        lab_exe: Some(env!("CARGO_BIN_EXE_lab").into()),
        provider_bins: [
            ("claude-code".parse().unwrap(), agent.clone()),
            ("codex".parse().unwrap(), agent),
        ]
        .into(),
        agent_home: Some(dir.path().join("home")),
        run_env: Vec::new(),
        bwrap: None,
        // The fake agent, its scripts and the test's repos are in the
        // test's temp dir (under the sandbox's private /tmp); it records
        // what it saw in `records`.
        sandbox_ro: vec![dir.path().to_path_buf()],
        sandbox_rw: vec![dir.path().join("records")],
        launch_pause_ms: 0,
        limit_minute_ms: 60_000,
    }
}
