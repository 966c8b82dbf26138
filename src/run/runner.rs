//! The runner: the one launch path (manual and AFK runs alike), stop, and
//! removal. It owns lab's tmux server and workspaces for this node.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::agent_config::AgentConfig;
use super::exec::{Launch, PaneLog};
use super::tmux::{SpawnArgs, Tmux};
use super::workspace::Workspaces;
use super::{Run, branch_name, proctree, session_name};
use crate::http::auth::{digest, new_token};
use crate::provider::{self, Provider, SpawnSpec};
use crate::repo::Repo;
use crate::resolve::{self, Defaults, RunKind};
use crate::store::{Ending, NewRun, RunPlaces, Store, StoreError};
use crate::validate::{self, Invalid};

/// How this node runs agents.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    pub data_dir: PathBuf,
    /// This node's id: runs it started are the ones it reconciles.
    pub node: String,
    /// The `lab` binary, which panes start as the exec shim.
    pub lab_exe: PathBuf,
    /// How runs reach lab (`LAB_URL` in their environment).
    pub lab_url: String,
    /// Provider binaries set explicitly (`LAB_<ID>_BIN`), by provider id.
    pub bins: HashMap<String, PathBuf>,
    pub reconcile_every: Duration,
    /// How long a stopped process tree gets between SIGTERM and SIGKILL.
    pub stop_grace: Duration,
    /// The agents' home folder (`HOME` in their environment), where their
    /// CLIs keep their config.
    pub agent_home: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The provider's CLI cannot be started on this node.
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("run not found")]
    NotFound,
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(StoreError),
    #[error("{0}")]
    Io(String),
}

impl From<StoreError> for RunError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => RunError::NotFound,
            StoreError::Conflict(m) => RunError::Conflict(m),
            other => RunError::Store(other),
        }
    }
}

/// Where a launch spent its time (for the `Server-Timing` header and the
/// spawn benchmark).
#[derive(Debug, Clone, Copy, Default)]
pub struct LaunchTimings {
    pub total: Duration,
    /// Creating the git worktree (and fetching a mirror).
    pub workspace: Duration,
    /// The one tmux call that starts the session.
    pub tmux: Duration,
    /// Recording the run before its start (the insert).
    pub insert: Duration,
    /// The agent's config, the run's folder and its launch file.
    pub prepare: Duration,
    /// Recording it as running.
    pub record: Duration,
}

/// A recorded run, and what starting it needs.
struct Plan<'a> {
    req: &'a LaunchRequest,
    run: &'a Run,
    provider: &'a dyn Provider,
    resolved: &'a resolve::Resolved,
    program: PathBuf,
    token: &'a str,
}

/// What to launch.
pub struct LaunchRequest {
    pub repo: Repo,
    /// The global defaults of the repo's provider.
    pub global: Defaults,
    pub kind: RunKind,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub prompt: String,
    /// Whether `{branch}` in the prompt stands for the run's branch (known
    /// only once the run is recorded): lab's AFK template names it.
    pub prompt_names_branch: bool,
    /// Extra variables for the run's environment (`LAB_ISSUE` for AFK runs).
    pub env: BTreeMap<String, String>,
}

pub struct Runner {
    pub store: Store,
    pub tmux: Tmux,
    pub workspaces: Workspaces,
    pub agent_config: AgentConfig,
    pub cfg: RunnerConfig,
    /// Runs between their insert and their session: reconcile leaves them be.
    pub(super) launching: Mutex<HashSet<i64>>,
    /// Launches that have not yet registered their run id.
    pub(super) pending: AtomicUsize,
    /// Runs being stopped: the stop, not reconcile, records how they ended.
    pub(super) ending: Mutex<HashSet<i64>>,
    /// Sessions on lab's socket that no run owns, as of the last pass.
    pub(super) strays: Mutex<Vec<String>>,
    pub(super) passes: AtomicUsize,
    /// One reconcile pass at a time.
    pub(super) pass_lock: tokio::sync::Mutex<()>,
    pub(super) last_pass: Mutex<Option<super::PassReport>>,
    /// The log size of each live run when lab last read its screen.
    pub(super) log_seen: Mutex<HashMap<i64, u64>>,
    /// Dead panes whose exit status tmux has not reported yet, since when.
    pub(super) exit_wait: Mutex<HashMap<i64, std::time::Instant>>,
    /// The client every forge call goes through.
    pub forge_http: reqwest::Client,
}

impl Runner {
    pub fn new(store: Store, cfg: RunnerConfig) -> anyhow::Result<Runner> {
        let unset: Vec<String> = provider::all()
            .iter()
            .flat_map(|p| p.command_line(&SpawnSpec::default()).env_remove)
            .collect();
        let tmux = Tmux::new(&cfg.data_dir, &unset)?;
        Ok(Runner {
            store,
            tmux,
            workspaces: Workspaces::new(&cfg.data_dir),
            agent_config: AgentConfig::new(cfg.agent_home.clone()),
            cfg,
            launching: Mutex::new(HashSet::new()),
            pending: AtomicUsize::new(0),
            ending: Mutex::new(HashSet::new()),
            strays: Mutex::new(Vec::new()),
            passes: AtomicUsize::new(0),
            pass_lock: tokio::sync::Mutex::new(()),
            last_pass: Mutex::new(None),
            exit_wait: Mutex::new(HashMap::new()),
            log_seen: Mutex::new(HashMap::new()),
            forge_http: crate::issues::forge_http_client(),
        })
    }

    pub fn node(&self) -> &str {
        &self.cfg.node
    }

    /// Where the exec shim writes how a run's agent ended.
    pub fn exit_file(&self, id: i64) -> PathBuf {
        self.run_dir(id).join("exit.json")
    }

    fn run_dir(&self, id: i64) -> PathBuf {
        self.cfg.data_dir.join("runs").join(id.to_string())
    }

    /// The binary of a provider: `LAB_<ID>_BIN` when set, else the CLI's
    /// name on `PATH`.
    pub fn binary_for(&self, p: &dyn Provider) -> Result<PathBuf, String> {
        if let Some(b) = self.cfg.bins.get(p.id()) {
            return if is_executable(b) {
                Ok(b.clone())
            } else {
                Err(format!(
                    "{} is set to {}, which is not an executable file",
                    p.binary_env_var(),
                    b.display()
                ))
            };
        }
        find_on_path(p.binary()).ok_or_else(|| {
            format!(
                "the {} CLI ('{}') is not on lab's PATH; install it or set {} to its path",
                p.name(),
                p.binary(),
                p.binary_env_var()
            )
        })
    }

    /// The one launch path. Validation failures and a missing CLI start
    /// nothing and write nothing. Once the run is recorded, any later
    /// failure ends it as `failed` with the reason, and the run is returned.
    pub async fn launch(&self, req: LaunchRequest) -> Result<Run, LaunchError> {
        self.launch_timed(req).await.map(|(run, _)| run)
    }

    /// [`Runner::launch`], and where it spent its time.
    pub async fn launch_timed(
        &self,
        req: LaunchRequest,
    ) -> Result<(Run, LaunchTimings), LaunchError> {
        let began = std::time::Instant::now();
        let mut timings = LaunchTimings::default();
        let resolved = resolve::resolve_request(
            &req.repo,
            &req.global,
            req.kind,
            req.model.as_deref(),
            req.effort.as_deref(),
        )?;
        let prompt = validate::prompt("prompt", &req.prompt).map_err(Invalid::from)?;
        let p = req.repo.provider().map_err(Invalid::from)?;
        let program = self.binary_for(p).map_err(LaunchError::Unavailable)?;
        let token = new_token();
        let token_hash = hex::encode(digest(&token));

        self.pending.fetch_add(1, Ordering::SeqCst);
        let t = std::time::Instant::now();
        let inserted = self
            .store
            .insert_run(
                &NewRun {
                    kind: req.kind,
                    repo_id: req.repo.id,
                    repo_name: &req.repo.name,
                    resolved: &resolved,
                    prompt: &prompt,
                    node: &self.cfg.node,
                    token_hash: &token_hash,
                },
                |id| RunPlaces {
                    session: session_name(&req.repo.name, id),
                    workspace: self.workspaces.path_for(id).to_string_lossy().into_owned(),
                    branch: branch_name(id),
                    log_path: self
                        .run_dir(id)
                        .join("output.log")
                        .to_string_lossy()
                        .into_owned(),
                },
            )
            .await;
        timings.insert = t.elapsed();
        if let Ok(run) = &inserted {
            self.launching.lock().expect("poisoned").insert(run.id);
        }
        self.pending.fetch_sub(1, Ordering::SeqCst);
        let mut run = inserted?;
        if req.prompt_names_branch
            && let Some(branch) = run.branch.clone()
        {
            run.prompt = run.prompt.replace("{branch}", &branch);
            self.store.set_run_prompt(run.id, &run.prompt).await?;
        }

        let plan = Plan {
            req: &req,
            run: &run,
            provider: p,
            resolved: &resolved,
            program,
            token: &token,
        };
        let started = self.start(plan, &mut timings).await;
        self.launching.lock().expect("poisoned").remove(&run.id);
        if let Ok(Some(now)) = started {
            timings.total = began.elapsed();
            return Ok((now, timings));
        }
        if let Err(reason) = started {
            tracing::warn!(run = run.id, %reason, "run failed to start");
            self.store
                .finish_run(
                    run.id,
                    &Ending {
                        state: super::RunState::Failed,
                        reason: Some(reason),
                        exit_status: None,
                        exit_signal: None,
                        from: None,
                    },
                )
                .await?;
        }
        let run = self.store.run(run.id).await?;
        timings.total = began.elapsed();
        Ok((run, timings))
    }

    /// The run's folder and empty log, and the agent's config edits for an
    /// unattended start. Returns the folder and the log's path.
    async fn prepare_files(
        &self,
        run_id: i64,
        p: &dyn Provider,
        spec: &SpawnSpec,
    ) -> Result<(PathBuf, PathBuf), String> {
        let dir = self.run_dir(run_id);
        create_private_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let log = dir.join("output.log");
        std::fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        self.agent_config
            .apply(&p.prepare(spec))
            .await
            .map_err(|e| {
                format!(
                    "could not prepare {}'s config for an unattended start: {e}",
                    p.name()
                )
            })?;
        Ok((dir, log))
    }

    /// Workspace, launch file, session. Errors are the reason the run failed.
    async fn start(
        &self,
        plan: Plan<'_>,
        timings: &mut LaunchTimings,
    ) -> Result<Option<Run>, String> {
        let Plan {
            req,
            run,
            provider: p,
            resolved,
            program,
            token,
        } = plan;
        let branch = run.branch.clone().unwrap_or_else(|| branch_name(run.id));
        // The worktree (git) and the agent's config, run folder and log file
        // (lab's own files) do not depend on each other: made side by side.
        let spec = SpawnSpec {
            session_name: run.session.clone(),
            model: resolved.model.value.clone(),
            effort: resolved.effort.value.clone(),
            options: resolved.option_values(),
            initial_prompt: run.prompt.clone(),
            working_dir: self.workspaces.path_for(run.id),
            runs_as_root: rustix::process::geteuid().is_root(),
        };
        let workspace = async {
            let t = std::time::Instant::now();
            let ws = self.workspaces.create(&req.repo, run.id, &branch).await;
            (ws, t.elapsed())
        };
        let prepare = async {
            let t = std::time::Instant::now();
            let out = self.prepare_files(run.id, p, &spec).await;
            (out, t.elapsed())
        };
        let ((ws, ws_took), (prepared, prepare_took)) = tokio::join!(workspace, prepare);
        timings.workspace = ws_took;
        let ws = ws.map_err(|e| format!("could not create the workspace: {e}"))?;
        let (dir, log) = prepared?;
        let t = std::time::Instant::now();
        let cl = p.command_line(&spec);
        let mut env: BTreeMap<String, String> = cl.env.into_iter().collect();
        env.extend(req.env.clone());
        env.insert(
            "HOME".into(),
            self.cfg.agent_home.to_string_lossy().into_owned(),
        );
        env.insert("LAB_URL".into(), self.cfg.lab_url.clone());
        env.insert("LAB_RUN_ID".into(), run.id.to_string());
        env.insert("LAB_TOKEN".into(), token.to_owned());
        // LAB_RUN_ID and LAB_NODE mark the run's processes (see proctree).
        env.insert("LAB_NODE".into(), self.cfg.node.clone());
        let env_remove = cl.env_remove;
        let launch = Launch {
            program,
            args: cl.args,
            cwd: ws.path.clone(),
            env,
            env_remove,
            path_prepend: self
                .cfg
                .lab_exe
                .parent()
                .map(Path::to_path_buf)
                .into_iter()
                .collect(),
            exit_file: self.exit_file(run.id),
            log: Some(PaneLog {
                socket: self.tmux.socket().to_path_buf(),
                file: log.clone(),
            }),
        };
        let launch_file = dir.join("launch.json");
        launch
            .write(&launch_file)
            .map_err(|e| format!("cannot write {}: {e}", launch_file.display()))?;
        timings.prepare = prepare_took + t.elapsed();
        let argv = vec![
            self.cfg.lab_exe.to_string_lossy().into_owned(),
            "__exec".to_owned(),
            launch_file.to_string_lossy().into_owned(),
        ];
        let t = std::time::Instant::now();
        let pid = match self
            .tmux
            .spawn(SpawnArgs {
                session: &run.session,
                cwd: &ws.path,
                argv: &argv,
            })
            .await
        {
            Ok(pid) => pid,
            Err(e) => {
                let _ = std::fs::remove_file(&launch_file);
                return Err(format!("could not start the tmux session: {e}"));
            }
        };
        timings.tmux = t.elapsed();
        let t = std::time::Instant::now();
        let now = self
            .store
            .mark_running(run.id, pid, proctree::start_time(pid))
            .await
            .map_err(|e| format!("could not record the run as running: {e}"))?;
        timings.record = t.elapsed();
        tracing::info!(run = run.id, session = %run.session, pid, "run started");
        Ok(now)
    }

    /// Stops a live run: its whole process tree, then its session.
    pub async fn stop(&self, id: i64, why: &str) -> Result<Run, RunError> {
        let run = self.store.run(id).await?;
        if !run.state.is_active() {
            return Err(RunError::Conflict(format!(
                "run {id} already {}",
                run.state
            )));
        }
        if run.node != self.cfg.node {
            return Err(RunError::Conflict(format!(
                "run {id} lives on lab node '{}'; stop it there",
                run.node
            )));
        }
        if self.launching.lock().expect("poisoned").contains(&id) {
            return Err(RunError::Conflict(format!(
                "run {id} is still starting; try again in a moment"
            )));
        }
        if !self.ending.lock().expect("poisoned").insert(id) {
            return Err(RunError::Conflict(format!(
                "run {id} is already being stopped"
            )));
        }
        let result = self.end_tree(&run, why).await;
        self.ending.lock().expect("poisoned").remove(&id);
        result?;
        Ok(self.store.run(id).await?)
    }

    async fn end_tree(&self, run: &Run, why: &str) -> Result<(), RunError> {
        let killed = proctree::kill_run(&run.mark(), self.cfg.stop_grace).await;
        self.tmux
            .kill_sessions(std::slice::from_ref(&run.session))
            .await
            .map_err(|e| RunError::Io(e.to_string()))?;
        self.store
            .finish_run(
                run.id,
                &Ending {
                    state: super::RunState::Stopped,
                    reason: Some(why.to_owned()),
                    exit_status: None,
                    exit_signal: None,
                    from: None,
                },
            )
            .await?;
        tracing::info!(run = run.id, processes = killed, "run stopped");
        Ok(())
    }

    /// Removes an ended run: its workspace, its log, its row.
    pub async fn remove(&self, id: i64) -> Result<(), RunError> {
        let run = self.store.run(id).await?;
        if run.state.is_active() {
            return Err(RunError::Conflict(format!(
                "run {id} is {}: stop it first",
                run.state
            )));
        }
        self.remove_workspace(&run).await?;
        let dir = self.run_dir(id);
        if let Err(e) = std::fs::remove_dir_all(&dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(RunError::Io(format!(
                "cannot remove {}: {e}",
                dir.display()
            )));
        }
        self.store.delete_run(id).await?;
        Ok(())
    }

    /// Removes an ended run's workspace, if it still has one.
    pub(super) async fn remove_workspace(&self, run: &Run) -> Result<(), RunError> {
        let Some(path) = run
            .workspace
            .as_deref()
            .filter(|_| run.workspace_removed_at.is_none())
        else {
            return Ok(());
        };
        let repo = match run.repo_id {
            Some(id) => self.store.repo(&crate::store::RepoKey::Id(id)).await.ok(),
            None => None,
        };
        self.workspaces
            .remove(repo.as_ref(), Path::new(path))
            .await
            .map_err(|e| RunError::Io(e.to_string()))?;
        if let Some(p) = provider::get(&run.provider) {
            self.agent_config
                .forget(&p.workspace_entries(Path::new(path)))
                .await;
        }
        self.store.mark_workspace_removed(run.id).await?;
        Ok(())
    }

    /// Sessions on lab's socket that no run owns, as of the last pass.
    pub fn strays(&self) -> Vec<String> {
        self.strays.lock().expect("poisoned").clone()
    }

    pub fn passes(&self) -> usize {
        self.passes.load(Ordering::Relaxed)
    }

    /// What the last reconcile pass saw and cost.
    pub fn last_pass(&self) -> Option<super::PassReport> {
        self.last_pass.lock().expect("poisoned").clone()
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}
