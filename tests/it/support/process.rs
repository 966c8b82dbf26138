//! `lab serve` as a real process, for what an in-process server cannot show:
//! `kill -9` and re-adoption, and the environment lab itself was started with.
//! A `LabProcess` dereferences to the `Api` client of it, as a `TestServer`
//! does.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::api::Api;
use super::wait;

pub struct LabProcess {
    child: Option<Child>,
    pub api: Api,
    pub data_dir: PathBuf,
}

impl std::ops::Deref for LabProcess {
    type Target = Api;
    fn deref(&self) -> &Api {
        &self.api
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl LabProcess {
    /// Starts `lab serve` on `data_dir` with the fake agent as both CLIs.
    pub async fn start(
        data_dir: &Path,
        database_url: Option<&str>,
        agent: &Path,
        env: &[(&str, &str)],
    ) -> LabProcess {
        lab::init_tls();
        let port = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lab"));
        cmd.args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--reconcile-ms",
            "100",
        ])
        .arg("--data-dir")
        .arg(data_dir)
        .env("LAB_CLAUDE_CODE_BIN", agent)
        .env("LAB_CODEX_BIN", agent)
        .env("LAB_LOG", "info")
        .env("HOME", data_dir.with_extension("home"))
        // The fake agent and the test's repos live beside the data dir, in
        // the test's temp dir; the agent records into `records` there.
        .env("LAB_SANDBOX_RO", data_dir.parent().unwrap())
        .env("LAB_SANDBOX_RW", data_dir.parent().unwrap().join("records"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(data_dir.with_extension("log"))
                .unwrap(),
        ));
        if let Some(url) = database_url {
            cmd.arg("--database-url").arg(url);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut lab = LabProcess {
            child: Some(cmd.spawn().expect("lab serve starts")),
            api: Api::new(format!("http://127.0.0.1:{port}"), String::new()),
            data_dir: data_dir.to_path_buf(),
        };
        let up = wait::within(wait::secs(10), async || {
            let up = lab.req(reqwest::Method::GET, "/healthz").send().await;
            up.is_ok_and(|r| r.status().is_success())
        })
        .await;
        if up.is_err() {
            panic!("lab serve did not come up; log: {}", lab.log());
        }
        lab.api.token = std::fs::read_to_string(data_dir.join("token"))
            .unwrap()
            .trim()
            .to_owned();
        lab
    }

    /// `kill -9`: no shutdown of any kind.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.with_extension("log")).unwrap_or_default()
    }
}

impl Drop for LabProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// What a test of a real `lab serve` starts from: a temp dir holding the
/// fake agent (`agent`), the data dir (`data`), and a fresh database of the
/// backend (`db`, `None` for SQLite in the data dir). Its tmux server is
/// killed when it is dropped (after the `LabProcess`es made later).
pub struct LabHome {
    pub tmp: tempfile::TempDir,
    pub agent: PathBuf,
    pub data: PathBuf,
    pub db: Option<String>,
}

impl LabHome {
    pub async fn new(b: &super::Backend) -> LabHome {
        let tmp = tempfile::Builder::new()
            .prefix("lab-it-")
            .tempdir()
            .unwrap();
        let agent = super::agent::install(tmp.path());
        let data = tmp.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let db = b.fresh_url().await;
        LabHome {
            tmp,
            agent,
            data,
            db,
        }
    }

    /// Starts `lab serve` on this home, with `env` added.
    pub async fn start(&self, env: &[(&str, &str)]) -> LabProcess {
        LabProcess::start(&self.data, self.db.as_deref(), &self.agent, env).await
    }

    pub fn socket(&self) -> PathBuf {
        self.data.join("tmux.sock")
    }
}

impl Drop for LabHome {
    fn drop(&mut self) {
        super::agent::kill_tmux(&self.socket());
    }
}
