//! `lab serve`: opens the data dir and the database, then serves the API.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::http::auth::{self, Auth};
use crate::http::{self, AppState};
use crate::store::Store;

/// Where lab keeps its state and how it is reached.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeConfig {
    /// Folder for lab's state: database, token, tmux socket, logs, workspaces.
    /// Default: a `lab` folder under the user's data directory.
    #[arg(long, env = "LAB_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, env = "LAB_LISTEN", default_value = "127.0.0.1:7878")]
    pub listen: String,
    /// Database URL: `postgres://…` to run on PostgreSQL. Default: SQLite in
    /// the data dir.
    #[arg(long, env = "LAB_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

/// The default data dir: `$XDG_DATA_HOME/lab`, or `~/.local/share/lab`.
pub fn default_data_dir() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("lab")
}

impl ServeConfig {
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir.clone().unwrap_or_else(default_data_dir)
    }
}

/// A server that is listening.
pub struct Running {
    pub addr: SocketAddr,
    pub token: String,
    pub store: Store,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Running {
    /// Stops accepting, finishes in-flight requests, and returns.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.await.context("server task panicked")??;
        self.store.close().await;
        Ok(())
    }

    /// Serves until the task ends (it never does on its own).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.task.await.context("server task panicked")?
    }
}

fn prepare_data_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the data dir {}", dir.display()))?;
    let meta = std::fs::metadata(dir)?;
    if !meta.is_dir() {
        bail!("the data dir {} is not a directory", dir.display());
    }
    // The data dir holds the token and the database: keep it private.
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot make {} private (chmod 700)", dir.display()))?;
    }
    Ok(())
}

/// Opens everything and starts listening. Returns once the socket is bound.
pub async fn start(cfg: &ServeConfig) -> anyhow::Result<Running> {
    let data_dir = cfg.data_dir();
    prepare_data_dir(&data_dir)?;

    let token_path = data_dir.join("token");
    let (token, created) = auth::load_or_create_token(&token_path).with_context(|| {
        format!(
            "cannot read or create the admin token at {}",
            token_path.display()
        )
    })?;
    if created {
        tracing::info!(path = %token_path.display(), "created the admin token (mode 0600); labctl reads it from there");
    } else {
        tracing::info!(path = %token_path.display(), "admin token");
    }

    let store = match &cfg.database_url {
        Some(url) => Store::connect(url).await,
        None => Store::open_sqlite_file(&data_dir.join("lab.db")).await,
    }
    .context("cannot open the database")?;
    store
        .migrate()
        .await
        .context("cannot apply the database migrations")?;
    tracing::info!(backend = store.backend(), "database ready");

    let listener = TcpListener::bind(&cfg.listen)
        .await
        .with_context(|| format!("cannot listen on {}", cfg.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "lab is listening");

    let state = AppState {
        store: store.clone(),
        auth: Arc::new(Auth::new(&token)),
    };
    let app = http::router(state);
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await
            .context("the HTTP server failed")
    });
    Ok(Running {
        addr,
        token,
        store,
        shutdown: Some(tx),
        task,
    })
}
