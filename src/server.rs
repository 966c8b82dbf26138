//! `lab serve`: opens the data dir and the database, then serves the API.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::app;
use crate::auth::{self, Auth};
use crate::provider::ProviderId;
use crate::run::{Runner, RunnerConfig};
use crate::state::AppState;
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
    /// The URL runs and links use to reach lab. Default: http:// and the
    /// address lab listens on.
    #[arg(long, env = "LAB_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// The URL other lab nodes reach this one at (issue 29; default: the
    /// public URL, else the listening address).
    #[arg(long, env = "LAB_NODE_URL")]
    pub node_url: Option<String>,
    /// Seconds a node of the fleet may go without beating before this node
    /// holds it `down`: its live runs `lost`, its AFK issues run again
    /// elsewhere (issue 29). Give every node the same bound.
    #[arg(long, env = "LAB_NODE_DOWN_AFTER", default_value_t = 30, value_parser = clap::value_parser!(u64).range(2..=3600))]
    pub node_down_after: u64,
    /// Milliseconds between reconcile passes.
    #[arg(long, env = "LAB_RECONCILE_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(50..=60_000))]
    pub reconcile_ms: u64,
    /// Milliseconds before a failed notification is tried again the first
    /// time (then twice as long each time, at most 5 minutes).
    #[arg(long, env = "LAB_NOTIFY_RETRY_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub notify_retry_ms: u64,
    /// Milliseconds between two reads of an AFK run's pull request on a
    /// forge, at least (its checks, reviews and comments: 4-5 requests).
    #[arg(long, env = "LAB_FORGE_POLL_MS", default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub forge_poll_ms: u64,
    /// Runs copy their own output, one shim each, instead of handing it to
    /// the relay (ADR 22): costs more at many busy runs; for comparison, or
    /// should the relay misbehave.
    #[arg(long, env = "LAB_NO_RELAY", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_relay: bool,
    /// The `lab` binary panes start as the exec shim (tests set it; lab
    /// serve uses itself).
    #[arg(skip)]
    pub lab_exe: Option<PathBuf>,
    /// Provider binaries by provider id; `LAB_<ID>_BIN` fills this.
    #[arg(skip)]
    pub provider_bins: HashMap<ProviderId, PathBuf>,
    /// The agents' home (default: lab's own `HOME`).
    #[arg(skip)]
    pub agent_home: Option<PathBuf>,
    /// Variables of lab's environment every run also gets, beside those
    /// every program expects and those its CLI needs (comma-separated
    /// names; `LAB_*`, `TMUX` and `TMUX_PANE` are refused).
    #[arg(long = "run-env", env = "LAB_RUN_ENV", value_delimiter = ',', value_parser = run_env_name)]
    pub run_env: Vec<String>,
    /// bubblewrap, which sandboxes every run (default: `bwrap` on `PATH`).
    #[arg(long, env = "LAB_BWRAP")]
    pub bwrap: Option<PathBuf>,
    /// Paths every run may read although they are hidden or private to lab
    /// (comma-separated; the rest of the machine is readable anyway).
    #[arg(long = "sandbox-ro", env = "LAB_SANDBOX_RO", value_delimiter = ',')]
    pub sandbox_ro: Vec<PathBuf>,
    /// Paths every run may write, beside its workspace, its private `/tmp`
    /// and its CLI's own config (comma-separated).
    #[arg(long = "sandbox-rw", env = "LAB_SANDBOX_RW", value_delimiter = ',')]
    pub sandbox_rw: Vec<PathBuf>,
    /// Milliseconds every launch waits once its run is recorded, before its
    /// workspace: for tests of what a launch survives (a client that hangs
    /// up, a crash mid-launch). 0 in use.
    #[arg(long, env = "LAB_LAUNCH_PAUSE_MS", default_value_t = 0, hide = true)]
    pub launch_pause_ms: u64,
    /// Milliseconds a minute of an AFK run's time limit lasts: for tests of
    /// what a time limit does, without waiting a minute. 60000 in use.
    #[arg(long, env = "LAB_LIMIT_MINUTE_MS", default_value_t = 60_000, hide = true,
          value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub limit_minute_ms: u64,
}

fn run_env_name(s: &str) -> Result<String, String> {
    crate::validate::run_env_name("--run-env", s).map_err(|e| format!("'{s}' {}", e.message))
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
    pub runner: Arc<Runner>,
    pub scheduler: Arc<crate::afk::Scheduler>,
    shutdown: Option<oneshot::Sender<()>>,
    /// This server's hold on its data dir (and SQLite database).
    _lock: crate::lock::Held,
    stop_loops: watch::Sender<bool>,
    task: JoinHandle<anyhow::Result<()>>,
    loops: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops accepting, finishes in-flight requests, and returns.
    /// Runs keep going in tmux: the next start re-adopts them.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let _ = self.stop_loops.send(true);
        for l in self.loops.drain(..) {
            let _ = l.await;
        }
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
    // The data dir holds the token, the database, logs and workspaces: what
    // lab makes from now on is its user's alone, and what an older lab left
    // readable is made private.
    set_private_umask();
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot make {} private (chmod 700)", dir.display()))?;
    }
    make_private(dir, 2);
    Ok(())
}

/// Files lab creates get mode 0600, folders 0700 (git and SQLite follow the
/// umask too).
fn set_private_umask() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// Takes group and other permissions off what is in `dir`, `depth` levels
/// down (the data dir's files, and each run's folder and files; a
/// workspace's or mirror's insides are reachable only through their private
/// folders).
fn make_private(dir: &Path, depth: usize) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(meta) = e.path().symlink_metadata() else {
            continue;
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            let _ =
                std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(mode & 0o700));
        }
        if meta.is_dir() && depth > 1 {
            make_private(&e.path(), depth - 1);
        }
    }
}

/// Opens everything and starts listening. Returns once the socket is bound.
pub async fn start(cfg: &ServeConfig) -> anyhow::Result<Running> {
    let public_origin = match cfg.public_url.as_deref() {
        Some(u) => Some(
            crate::validate::web_origin(u)
                .with_context(|| format!("--public-url {u:?} is not an http:// or https:// URL"))?,
        ),
        None => None,
    };
    let data_dir = cfg.data_dir();
    prepare_data_dir(&data_dir)?;
    let lock = crate::lock::take(&data_dir, cfg.database_url.as_deref())?;

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

    let store = open_store(cfg, &data_dir).await?;
    store
        .migrate()
        .await
        .context("cannot apply the database migrations")?;
    tracing::info!(backend = store.backend(), "database ready");

    let listener = TcpListener::bind(&cfg.listen)
        .await
        .with_context(|| format!("cannot listen on {}", cfg.listen))?;
    let addr = listener.local_addr()?;

    let runner = Arc::new(Runner::new(
        store.clone(),
        runner_config(cfg, &data_dir, addr).await?,
    )?);
    runner
        .tmux()
        .prepare()
        .await
        .context("cannot configure lab's tmux server")?;
    let node_url = cfg
        .node_url
        .clone()
        .unwrap_or_else(|| runner.cfg().lab_url.clone());
    if cfg.node_url.is_none() && addr.ip().is_unspecified() && is_loopback_url(&node_url) {
        tracing::warn!(
            url = %node_url,
            "this node tells the fleet it is at a loopback address, which other machines cannot reach; \
             give it --node-url (or --public-url) when other lab nodes share its database"
        );
    }
    // This node beats before it re-adopts anything: the fleet sees it up
    // again before its runs come back, and does not take them for lost.
    let started = crate::store::now_ms();
    if let Err(e) = crate::fleet::beat(&runner, &node_url, started).await {
        tracing::warn!(error = %e, "could not record this node's first beat");
    }
    // Re-adoption: before serving anything, match runs to what tmux has.
    let pass = runner
        .reconcile(true)
        .await
        .context("the start-up reconcile pass failed")?;
    tracing::info!(
        node = runner.node(),
        live = pass.checked - pass.lost.len() - pass.exited.len(),
        exited = pass.exited.len(),
        lost = pass.lost.len(),
        strays = pass.strays.len(),
        "runs re-adopted"
    );
    let (stop_loops, stop_rx) = watch::channel(false);
    let (scheduler, notifier) = scheduler_and_notifier(cfg, &store, &runner);
    let loops = vec![
        runner.clone().spawn_loop(stop_rx.clone()),
        notifier.clone().spawn_loop(stop_rx.clone()),
        crate::fleet::spawn_beat(
            runner.clone(),
            scheduler.clone(),
            node_url,
            started,
            stop_rx.clone(),
        ),
        scheduler.clone().spawn_loop(stop_rx),
    ];
    // What `lab doctor` would say, as warnings, without delaying start-up.
    let doctor = runner.clone();
    let sources = scheduler.sources().clone();
    tokio::spawn(async move {
        for f in crate::doctor::diagnose(&doctor, &sources).await {
            if f.level != crate::doctor::Level::Ok {
                tracing::warn!(area = %f.area, fix = f.fix.as_deref().unwrap_or("-"), "{}", f.message);
            }
        }
    });
    tracing::info!(%addr, "lab is listening");

    let fleet = Arc::new(
        crate::fleet::Fleet::new(
            store.clone(),
            runner.node(),
            runner.cfg().node_down_after_ms,
        )
        .await
        .context("cannot read the fleet's key")?,
    );
    let state = AppState {
        store: store.clone(),
        auth: Arc::new(Auth::new(&token)),
        runner: runner.clone(),
        sessions: Arc::new(crate::auth::browser::SessionCache::default()),
        scheduler: scheduler.clone(),
        notifier,
        public_origin,
        fleet,
    };
    let app = app::router(state);
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
        runner,
        scheduler,
        shutdown: Some(tx),
        _lock: lock,
        stop_loops,
        task,
        loops,
    })
}

/// The AFK scheduler over `runner`, and the notifier that posts to the
/// settings' endpoints.
fn scheduler_and_notifier(
    cfg: &ServeConfig,
    store: &Store,
    runner: &Arc<Runner>,
) -> (
    Arc<crate::afk::Scheduler>,
    Arc<crate::notifications::Notifier>,
) {
    let scheduler = Arc::new(crate::afk::Scheduler::new(runner.clone()));
    let notifier = Arc::new(crate::notifications::Notifier::new(
        store.clone(),
        scheduler.sources().http(),
        &runner.cfg().lab_url,
        std::time::Duration::from_millis(cfg.notify_retry_ms),
    ));
    (scheduler, notifier)
}

async fn open_store(cfg: &ServeConfig, data_dir: &Path) -> anyhow::Result<Store> {
    match &cfg.database_url {
        Some(url) => Store::connect(url).await,
        None => Store::open_sqlite_file(&data_dir.join("lab.db")).await,
    }
    .context("cannot open the database")
}

/// The application in this process, without a listener, a tmux server or
/// the loops: what a handler does with a request, for the in-process test
/// tier (`Router` + `tower::ServiceExt::oneshot`). The data dir is prepared
/// and the database migrated as `start` does; the state's token is the
/// admin token. Nothing is re-adopted and no run can start (no tmux server
/// is configured).
pub async fn in_process(cfg: &ServeConfig) -> anyhow::Result<(axum::Router, AppState)> {
    let data_dir = cfg.data_dir();
    prepare_data_dir(&data_dir)?;
    let (token, _) = auth::load_or_create_token(&data_dir.join("token"))
        .context("cannot read or create the admin token")?;
    let store = open_store(cfg, &data_dir).await?;
    store
        .migrate()
        .await
        .context("cannot apply the database migrations")?;
    let addr: SocketAddr = ([127, 0, 0, 1], 9).into();
    let runner = Arc::new(Runner::new(
        store.clone(),
        runner_config(cfg, &data_dir, addr).await?,
    )?);
    let (scheduler, notifier) = scheduler_and_notifier(cfg, &store, &runner);
    let fleet = Arc::new(
        crate::fleet::Fleet::new(
            store.clone(),
            runner.node(),
            runner.cfg().node_down_after_ms,
        )
        .await
        .context("cannot read the fleet's key")?,
    );
    let state = AppState {
        store,
        auth: Arc::new(Auth::new(&token)),
        runner,
        sessions: Arc::new(crate::auth::browser::SessionCache::default()),
        scheduler,
        notifier,
        public_origin: None,
        fleet,
    };
    Ok((app::router(state.clone()), state))
}

/// `lab doctor`: the checks, without serving (and without migrating).
pub async fn doctor(cfg: &ServeConfig) -> anyhow::Result<Vec<crate::doctor::Finding>> {
    let data_dir = cfg.data_dir();
    prepare_data_dir(&data_dir)?;
    let store = open_store(cfg, &data_dir).await?;
    let addr: SocketAddr = cfg
        .listen
        .parse()
        .unwrap_or_else(|_| ([127, 0, 0, 1], 7878).into());
    let runner = Runner::new(store.clone(), runner_config(cfg, &data_dir, addr).await?)?;
    let sources = crate::issues::Sources::new(store.clone(), runner.cfg().lab_url.clone());
    let findings = crate::doctor::diagnose(&runner, &sources).await;
    store.close().await;
    Ok(findings)
}

async fn runner_config(
    cfg: &ServeConfig,
    data_dir: &Path,
    addr: SocketAddr,
) -> anyhow::Result<RunnerConfig> {
    let lab_exe = match &cfg.lab_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe().context("cannot find lab's own binary")?,
    };
    let mut bins = HashMap::new();
    for id in ProviderId::all() {
        let var = id.provider().binary_env_var();
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            bins.insert(id, PathBuf::from(v));
        }
    }
    bins.extend(cfg.provider_bins.clone());
    let lab_url = cfg.public_url.clone().unwrap_or_else(|| {
        let host = if addr.ip().is_unspecified() {
            "127.0.0.1".to_owned()
        } else {
            addr.ip().to_string()
        };
        let host = if addr.is_ipv6() && !addr.ip().is_unspecified() {
            format!("[{host}]")
        } else {
            host
        };
        format!("http://{host}:{}", addr.port())
    });
    let (sandbox, userns) = crate::run::sandbox::probe(cfg.bwrap.as_deref()).await;
    let agent_home = match &cfg.agent_home {
        Some(h) => h.clone(),
        None => dirs::home_dir().context("cannot tell lab's home folder (set HOME)")?,
    };
    let mut sandbox_policy = sandbox_policy(cfg, data_dir)?;
    sandbox_policy.userns = userns;
    sandbox_policy.homes = std::iter::once(agent_home.clone())
        .chain(dirs::home_dir())
        .collect();
    let node = node_id(data_dir)?;
    let cgroups = crate::run::cgroup::Cgroups::probe(&node);
    Ok(RunnerConfig {
        node_down_after_ms: (cfg.node_down_after * 1000) as i64,
        data_dir: data_dir.to_path_buf(),
        node,
        cgroups,
        lab_exe,
        lab_url,
        bins,
        reconcile_every: std::time::Duration::from_millis(cfg.reconcile_ms),
        stop_grace: std::time::Duration::from_secs(3),
        agent_home,
        run_env: cfg.run_env.clone(),
        sandbox,
        sandbox_policy,
        forge_poll: std::time::Duration::from_millis(cfg.forge_poll_ms),
        relay: !cfg.no_relay,
        launch_pause: std::time::Duration::from_millis(cfg.launch_pause_ms),
        limit_minute_ms: cfg.limit_minute_ms as i64,
    })
}

/// What every run's sandbox sees of the system, what it hides (lab's data
/// dir, a database outside it, PostgreSQL's local sockets) and what the
/// operator adds.
fn sandbox_policy(
    cfg: &ServeConfig,
    data_dir: &Path,
) -> anyhow::Result<crate::run::sandbox::Policy> {
    use crate::run::sandbox;
    let mut hidden = vec![data_dir.to_path_buf()];
    for dir in ["/run/postgresql", "/var/run/postgresql"] {
        hidden.push(PathBuf::from(dir));
    }
    if let Some(url) = &cfg.database_url {
        if let Some(file) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            let file = file.split('?').next().unwrap_or_default();
            if let Some(parent) = Path::new(file).parent().filter(|p| p.is_absolute()) {
                hidden.push(parent.to_path_buf());
            }
        }
        // A PostgreSQL URL may name a socket folder (`host=/path`).
        if let Some((_, rest)) = url.split_once("host=/") {
            let dir = rest.split('&').next().unwrap_or_default();
            hidden.push(PathBuf::from(format!("/{dir}")));
        }
    }
    let files = sandbox::SandboxFiles::write(&data_dir.join("sandbox"))
        .context("cannot write the sandbox's account files")?;
    Ok(sandbox::Policy {
        hidden,
        read_only: cfg.sandbox_ro.clone(),
        writable: cfg.sandbox_rw.clone(),
        system: sandbox::System::probe(),
        files: Some(files),
        userns: false,
        tmp_bytes: Some(sandbox::TMP_BYTES),
        homes: Vec::new(),
    })
}

/// This node's id, made once and kept in `<data-dir>/node-id`.
fn node_id(data_dir: &Path) -> anyhow::Result<String> {
    let path = data_dir.join("node-id");
    if let Ok(id) = std::fs::read_to_string(&path)
        && !id.trim().is_empty()
    {
        return Ok(id.trim().to_owned());
    }
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| {
            h.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect::<String>()
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".to_owned());
    let id = format!("{host}-{}", &auth::new_token()[..8]);
    std::fs::write(&path, format!("{id}\n"))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(id)
}

/// Whether `url`'s host is a loopback address (`localhost`, 127.0.0.0/8,
/// `::1`): one other machines cannot reach this node at.
fn is_loopback_url(url: &str) -> bool {
    let Ok(u) = reqwest::Url::parse(url) else {
        return false;
    };
    let host = u.host_str().unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
