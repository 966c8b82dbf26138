//! The runner: lab's tmux server and workspaces for this node, and what
//! ends runs (stop, removal). The launch path is in `launch.rs`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::busy::RunSet;
use super::proctree;
use super::tmux::Tmux;
use super::workspace::Workspaces;
use crate::domain::{Run, RunState, StopCause};
use crate::provider::{self, ProviderId, SpawnSpec};
use crate::store::{Ending, Store, StoreError};

/// How this node runs agents.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    pub data_dir: PathBuf,
    /// This node's id: runs it started are the ones it reconciles.
    pub node: String,
    /// How long (ms) a node of the fleet may go without beating before this
    /// one holds it `down` (`lab serve --node-down-after`).
    pub node_down_after_ms: i64,
    /// The `lab` binary, which panes start as the exec shim.
    pub lab_exe: PathBuf,
    /// How runs reach lab (`LAB_URL` in their environment).
    pub lab_url: String,
    /// Provider binaries set explicitly (`LAB_<ID>_BIN`), by provider id.
    pub bins: HashMap<ProviderId, PathBuf>,
    pub reconcile_every: Duration,
    /// How long a stopped process tree gets between SIGTERM and SIGKILL.
    pub stop_grace: Duration,
    /// The operator's home, where their CLIs keep the config and
    /// credentials each run's own CLI folder is seeded from (ADR 24); never
    /// a run's `HOME`.
    pub agent_home: PathBuf,
    /// Names of lab's variables the operator passes to every run
    /// (`--run-env`), beside `run::env`'s own list.
    pub run_env: Vec<String>,
    /// Whether runs can be sandboxed here (probed at start-up).
    pub sandbox: super::sandbox::Availability,
    /// What every run's sandbox hides and adds.
    pub sandbox_policy: super::sandbox::Policy,
    /// How often an AFK run's pull request on a forge is read at most
    /// (`--forge-poll-ms`).
    pub forge_poll: Duration,
    /// Whether runs hand their output to the relay (ADR 22); else each
    /// shim copies its own (`--no-relay`).
    pub relay: bool,
    /// A pause in every launch once its run is recorded (tests only).
    pub launch_pause: Duration,
    /// How many milliseconds a minute of an AFK run's time limit lasts
    /// (60 000; tests shorten it).
    pub limit_minute_ms: i64,
    /// How runs are limited here (probed at start-up).
    pub cgroups: super::cgroup::Cgroups,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("run not found")]
    NotFound,
    #[error(transparent)]
    Conflict(Conflict),
    #[error(transparent)]
    Store(StoreError),
    #[error("{0}")]
    Io(String),
}

/// Why a run cannot be stopped, removed or resumed now (nothing was
/// changed); the API's 409.
#[derive(Debug, thiserror::Error)]
pub enum Conflict {
    #[error("run {id} already {state}")]
    Ended { id: i64, state: RunState },
    #[error("run {id} lives on lab node '{node}'; stop it there")]
    OtherNode { id: i64, node: String },
    #[error("run {id} is still starting; try again in a moment")]
    Starting { id: i64 },
    #[error("run {id} is already being stopped")]
    Stopping { id: i64 },
    #[error("run {id} is {state}: stop it first")]
    Live { id: i64, state: RunState },
    #[error(transparent)]
    NotResumable(#[from] super::resume::NotResumable),
    /// The store's word (a write that would break a unique key).
    #[error("{0}")]
    Store(String),
}

impl From<StoreError> for RunError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => RunError::NotFound,
            StoreError::Conflict(m) => RunError::Conflict(Conflict::Store(m)),
            other => RunError::Store(other),
        }
    }
}

impl From<super::resume::NotResumable> for RunError {
    fn from(e: super::resume::NotResumable) -> Self {
        RunError::Conflict(e.into())
    }
}

pub struct Runner {
    pub(super) store: Store,
    pub(super) tmux: Tmux,
    pub(super) workspaces: Workspaces,
    pub(super) cfg: RunnerConfig,
    /// The git identity runs commit as by default: the operator's, read
    /// once.
    pub(super) identity: tokio::sync::OnceCell<(String, String)>,
    /// Launches in flight: reconcile leaves their runs be.
    pub(super) launches: super::launches::Launches,
    /// Runs being stopped: the stop, not reconcile, records how they ended.
    pub(super) ending: RunSet,
    /// The reconcile passes' own state (`reconcile.rs`).
    pub(super) reconciler: super::reconcile::Reconciler,
    /// The screen check's own state (`attention.rs`).
    pub(super) screen_check: super::attention::ScreenCheck,
    /// The usage pass's own state (`usage.rs`).
    pub(super) usage: super::usage::UsageTracker,
    /// Runs' screens, replayed from their logs when someone looks.
    pub(super) screens: super::screen::Screens,
    /// The relay that copies the runs' output (ADR 22).
    pub(super) relay: super::relay::keeper::Keeper,
    /// What runs' workspaces take on disk, measured when asked.
    pub(super) disk: super::disk::DiskUse,
}

impl Runner {
    /// The database.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// lab's tmux server.
    pub fn tmux(&self) -> &Tmux {
        &self.tmux
    }

    /// Where runs' workspaces live, and what is done with them.
    pub fn workspaces(&self) -> &Workspaces {
        &self.workspaces
    }

    /// How this node runs agents (set at start).
    pub fn cfg(&self) -> &RunnerConfig {
        &self.cfg
    }

    /// Runs' screens, replayed from their logs when someone looks.
    pub fn screens(&self) -> &super::screen::Screens {
        &self.screens
    }

    /// The relay that copies the runs' output (ADR 22).
    pub fn relay(&self) -> &super::relay::keeper::Keeper {
        &self.relay
    }

    /// What runs' workspaces take on disk.
    pub fn disk(&self) -> &super::disk::DiskUse {
        &self.disk
    }

    /// Makes the next reconcile pass read this run's screen even if its log
    /// did not grow: a hook changed its state, and a screen no hook reports
    /// (a login screen drawn before the hook came) must be seen again; and
    /// the next usage pass read its transcript.
    pub fn look_again(&self, run: i64) {
        self.usage.read_soon(run);
        self.screen_check.look_again(run);
    }

    /// How many times the usage pass looked at `run`'s transcript (tests
    /// wait on it).
    pub fn usage_reads_of(&self, run: i64) -> u64 {
        self.usage.reads_of(run)
    }

    /// How many screens the screen check has read (tests wait on it).
    pub fn screens_read(&self) -> usize {
        self.screen_check.screens_read()
    }

    pub fn new(store: Store, cfg: RunnerConfig) -> anyhow::Result<Runner> {
        let unset: Vec<String> = provider::all()
            .iter()
            .flat_map(|p| p.command_line(&SpawnSpec::default()).env_remove)
            .collect();
        let tmux = Tmux::new(&cfg.data_dir, &unset)?;
        let mut cfg = cfg;
        // A socket too long for the data dir lives elsewhere: hide it too.
        if let Some(dir) = tmux.socket().parent()
            && !dir.starts_with(&cfg.data_dir)
        {
            cfg.sandbox_policy.hidden.push(dir.to_path_buf());
        }
        let relay = super::relay::keeper::Keeper::new(tmux.socket(), &cfg.lab_exe, cfg.relay);
        let usage = super::usage::UsageTracker::new(store.subscribe(crate::store::Written::Runs));
        Ok(Runner {
            store,
            relay,
            tmux,
            workspaces: Workspaces::new(&cfg.data_dir),
            cfg,
            identity: tokio::sync::OnceCell::new(),
            launches: Default::default(),
            ending: RunSet::default(),
            reconciler: Default::default(),
            screen_check: Default::default(),
            usage,
            screens: super::screen::Screens::new(super::tmux::PANE_ROWS, super::tmux::PANE_COLS),
            disk: Default::default(),
        })
    }

    pub fn node(&self) -> &str {
        &self.cfg.node
    }

    /// The git identity runs commit as by default: the operator's
    /// `user.name` and `user.email` (their `~/.gitconfig`), else lab's.
    pub(super) async fn git_identity(&self) -> (String, String) {
        self.identity
            .get_or_init(|| async {
                let file = self.cfg.agent_home.join(".gitconfig");
                let file = file.to_string_lossy();
                let get = |key: &'static str| {
                    let file = file.clone();
                    async move {
                        super::git::Git::host(&self.cfg.data_dir)
                            .out(&["config", "--file", &file, "--get", key])
                            .await
                            .ok()
                            .filter(|v| !v.is_empty())
                    }
                };
                (
                    get("user.name").await.unwrap_or_else(|| "lab agent".into()),
                    get("user.email")
                        .await
                        .unwrap_or_else(|| "lab-agent@localhost".into()),
                )
            })
            .await
            .clone()
    }

    /// The keys of the operator's CLI config that runs get
    /// (`runs.carry_cli_keys`).
    pub(super) async fn carry_keys(&self) -> Vec<String> {
        match self.store.settings().await {
            Ok(s) => s.runs.carry_cli_keys.clone(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the settings: no CLI keys carried");
                Vec::new()
            }
        }
    }

    /// Where the exec shim writes how a run's agent ended.
    pub fn exit_file(&self, id: i64) -> PathBuf {
        self.run_dir(id).join("exit.json")
    }

    pub(super) fn run_dir(&self, id: i64) -> PathBuf {
        self.cfg.data_dir.join("runs").join(id.to_string())
    }

    /// Stops a live run: its whole process tree, then its session. The stop
    /// runs as a task of its own, so a caller that goes away (a client that
    /// hung up) cannot cut it short: it finishes and records the run.
    pub async fn stop(
        self: &Arc<Self>,
        id: i64,
        cause: StopCause,
        why: &str,
    ) -> Result<Run, RunError> {
        let me = self.clone();
        let why = why.to_owned();
        crate::to_the_end(async move { me.stop_here(id, cause, &why).await }).await
    }

    async fn stop_here(&self, id: i64, cause: StopCause, why: &str) -> Result<Run, RunError> {
        let run = self.store.run(id).await?;
        if !run.state.is_active() {
            return Err(RunError::Conflict(Conflict::Ended {
                id,
                state: run.state,
            }));
        }
        if run.node != self.cfg.node {
            return Err(RunError::Conflict(Conflict::OtherNode {
                id,
                node: run.node.clone(),
            }));
        }
        if self.launches.contains(id) {
            return Err(RunError::Conflict(Conflict::Starting { id }));
        }
        let Some(_ending) = self.ending.enter(id) else {
            return Err(RunError::Conflict(Conflict::Stopping { id }));
        };
        self.end_tree(&run, cause, why).await?;
        Ok(self.store.run(id).await?)
    }

    async fn end_tree(&self, run: &Run, cause: StopCause, why: &str) -> Result<(), RunError> {
        let killed = proctree::kill_run(&proctree::RunMark::of(run), self.cfg.stop_grace).await;
        self.cfg.cgroups.release(run.id);
        self.tmux
            .kill_sessions(std::slice::from_ref(&run.session))
            .await
            .map_err(|e| RunError::Io(e.to_string()))?;
        self.store
            .finish_run(
                run.id,
                &Ending {
                    state: crate::domain::RunState::Stopped,
                    reason: Some(why.to_owned()),
                    stop_cause: Some(cause),
                    exit_status: None,
                    exit_signal: None,
                    from: None,
                },
            )
            .await?;
        tracing::info!(run = run.id, processes = killed, "run stopped");
        Ok(())
    }

    /// Removes an ended run: its workspace, its log, its row. Like a stop, it
    /// runs as a task of its own and is not cut short by a caller that goes.
    pub async fn remove(self: &Arc<Self>, id: i64) -> Result<(), RunError> {
        let me = self.clone();
        crate::to_the_end(async move { me.remove_here(id).await }).await
    }

    async fn remove_here(&self, id: i64) -> Result<(), RunError> {
        let run = self.store.run(id).await?;
        if run.state.is_active() {
            return Err(RunError::Conflict(Conflict::Live {
                id,
                state: run.state,
            }));
        }
        self.remove_workspace(&run).await?;
        self.cfg.cgroups.release(id);
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
        let jail = self.jail(run, repo.as_ref());
        self.workspaces
            .remove(
                repo.as_ref(),
                Path::new(path),
                run.branch.as_deref(),
                jail.as_ref(),
            )
            .await
            .map_err(|e| RunError::Io(super::withheld(run.id, "removing its workspace", &e.0)))?;
        self.store.mark_workspace_removed(run.id).await?;
        Ok(())
    }

    /// Sessions on lab's socket that no run owns, as of the last pass.
    pub fn strays(&self) -> Vec<String> {
        self.reconciler.strays()
    }

    pub fn passes(&self) -> usize {
        self.reconciler.passes()
    }

    /// Whether a reconcile pass is under way right now (it is counted in
    /// [`passes`](Self::passes) only once done): what a test that waits for
    /// a quiet loop checks, so a pass begun before its window is not taken
    /// for one within it.
    pub fn pass_in_flight(&self) -> bool {
        self.reconciler.in_flight()
    }

    /// What the last reconcile pass saw and cost.
    pub fn last_pass(&self) -> Option<super::PassReport> {
        self.reconciler.last()
    }
}
