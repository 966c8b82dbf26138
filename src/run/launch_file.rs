//! What starts an agent in a run's tmux session, for a launch and a resume
//! alike (ADR 18): the run's folder and the agent's config, the agent's
//! environment and sandbox, the launch file, and the one tmux call.

use crate::domain::RunKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::agent_config::{ConfigError, Seed, Seeded};
use super::exec::{Launch, PaneLog};
use super::launch::create_private_dir;
use super::runner::Runner;
use super::sandbox;
use super::tmux::SpawnArgs;
use crate::domain::Run;
use crate::provider::{CommandLine, Provider, SpawnSpec};
use crate::repo::Repo;

/// Why a run's own files or its agent's config could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("cannot create {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not make the run's control group: {source}")]
    Groups { source: std::io::Error },
    #[error("could not prepare {agent}'s config for an unattended start: {source}")]
    Config {
        agent: &'static str,
        source: ConfigError,
    },
}

/// Why a run's launch file could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LaunchFileError {
    /// The sandbox cannot show the CLI: its binary's real path is not
    /// there, or its install is a place no run may see whole
    /// (`sandbox::install_of` says why).
    #[error("{why}")]
    NoCli { why: String },
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Why a start (a launch or a resume) failed; its text is the failed run's
/// reason.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("could not create the workspace: {0}")]
    Workspace(String),
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    /// The launch file could not be written, or the sandbox refused what
    /// it would hold.
    #[error(transparent)]
    LaunchFile(LaunchFileError),
    #[error("could not start the tmux session: {0}")]
    Session(super::tmux::TmuxError),
    #[error("could not record the run as running: {0}")]
    Record(crate::store::StoreError),
}

/// A run's own files, made for a start.
pub(super) struct Prepared {
    pub dir: PathBuf,
    pub log: PathBuf,
    pub seeded: Seeded,
    pub groups: super::cgroup::RunGroups,
}

/// One start of an agent in a run's session.
pub(super) struct Start<'a> {
    pub run: &'a Run,
    pub provider: &'a dyn Provider,
    pub repo: &'a Repo,
    /// The CLI's binary.
    pub program: PathBuf,
    pub cl: CommandLine,
    /// Variables of the run's own (`LAB_ISSUE`).
    pub env: &'a BTreeMap<String, String>,
    pub token: &'a str,
    pub workspace: &'a Path,
    /// The run's folder and its log.
    pub dir: &'a Path,
    pub log: &'a Path,
    /// The run's home and CLI folder.
    pub seeded: &'a Seeded,
    /// The run's control groups.
    pub groups: &'a super::cgroup::RunGroups,
    /// The relay's socket, when one listens (ADR 22).
    pub relay: Option<PathBuf>,
    /// A launch (else a resume).
    pub fresh: bool,
}

impl Runner {
    /// The run's folder and log file, and its own home and CLI config
    /// (`agent_config.rs`). A first start empties the log; a resume appends
    /// to it and finds the run's home as it left it.
    pub(super) async fn prepare_files(
        &self,
        run: &Run,
        p: &dyn Provider,
        spec: &SpawnSpec,
        fresh_log: bool,
    ) -> Result<Prepared, PrepareError> {
        let run_id = run.id;
        // Its control groups (a few writes to the cgroup filesystem), made
        // beside its workspace like the rest of its files.
        let groups = match &self.cfg.cgroups {
            super::cgroup::Cgroups::None { .. } => super::cgroup::RunGroups::default(),
            c => c
                .create(run_id, run.limits)
                .map_err(|source| PrepareError::Groups { source })?,
        };
        let dir = self.run_dir(run_id);
        let cannot = |path: &Path, source| PrepareError::Create {
            path: path.to_owned(),
            source,
        };
        create_private_dir(&dir).map_err(|e| cannot(&dir, e))?;
        let log = dir.join("output.log");
        if fresh_log {
            std::fs::File::create(&log).map_err(|e| cannot(&log, e))?;
        }
        let carry = self.carry_keys().await;
        let identity = self.git_identity().await;
        let mut edits = p.prepare(spec);
        // What the operator gave lab for the CLI is approved in the run's
        // own config, so the CLI does not stop to ask about it.
        if let Some(a) = p.approvals(&self.passed_env(p)) {
            edits.extend(a.edits);
        }
        let seeded = match p.cli_home() {
            Some(cli) => super::agent_config::seed(
                &dir,
                &Seed {
                    cli,
                    operator_home: &self.cfg.agent_home,
                    carry: &carry,
                    edits: &edits,
                    sandboxed: spec.sandboxed && self.cfg.sandbox.bwrap().is_some(),
                    identity: (&identity.0, &identity.1),
                },
            )
            .map_err(|source| PrepareError::Config {
                agent: p.name(),
                source,
            })?,
            None => {
                let home = dir.join("home");
                create_private_dir(&home).map_err(|e| cannot(&home, e))?;
                Seeded {
                    cli_dir: home.clone(),
                    home,
                    credentials: Vec::new(),
                }
            }
        };
        Ok(Prepared {
            dir,
            log,
            seeded,
            groups,
        })
    }

    /// The variables of lab's own environment a run of `p` is given
    /// (`env.rs`'s allow-list).
    pub(crate) fn passed_env(&self, p: &dyn Provider) -> BTreeMap<String, String> {
        super::env::inherited(std::env::vars(), p.env_passthrough(), &self.cfg.run_env)
    }

    /// What lab approved for a run of `p` in its own CLI config
    /// ([`Provider::approvals`]), as the run's page says it.
    pub fn approved_for(&self, p: &dyn Provider) -> Option<&'static str> {
        p.approvals(&self.passed_env(p)).map(|a| a.what)
    }

    /// The agent's environment and sandbox, written to the run's launch
    /// file. Returns the file's path; errors are the reason the start failed.
    fn write_launch(&self, s: Start<'_>) -> Result<PathBuf, LaunchFileError> {
        let Start {
            run,
            provider: p,
            repo,
            program,
            cl,
            env: extra,
            token,
            workspace,
            dir,
            log,
            seeded,
            groups,
            relay,
            fresh: _,
        } = s;
        let mut env = self.passed_env(p);
        env.extend(cl.env);
        env.extend(extra.clone());
        env.insert("HOME".into(), seeded.home.to_string_lossy().into_owned());
        if let Some(cli) = p.cli_home() {
            env.insert(
                cli.env.into(),
                seeded.cli_dir.to_string_lossy().into_owned(),
            );
        }
        env.insert("LAB_URL".into(), self.cfg.lab_url.clone());
        env.insert("LAB_RUN_ID".into(), run.id.to_string());
        // What the run is for (issue 28): `manual` or `afk`; the plan and
        // review kinds come with their phases.
        env.insert("LAB_RUN_KIND".into(), run.kind.as_str().into());
        env.insert("LAB_TOKEN".into(), token.to_owned());
        // LAB_RUN_ID and LAB_NODE mark the run's processes (see proctree).
        env.insert("LAB_NODE".into(), self.cfg.node.clone());
        for name in &cl.env_remove {
            env.remove(name);
        }
        let (program, args) = match self.cfg.sandbox.bwrap().filter(|_| run.sandboxed) {
            Some(bwrap) => {
                let (mut args, program) = self.sandbox_args(
                    repo,
                    // A plan or review run reads the workspace, never writes it.
                    (
                        workspace,
                        !matches!(run.kind, RunKind::Plan | RunKind::Review),
                    ),
                    &program,
                    seeded,
                )?;
                env.extend(sandbox::ENV.iter().map(|(k, v)| ((*k).into(), (*v).into())));
                args.push(program.to_string_lossy().into_owned());
                args.extend(cl.args);
                (bwrap.to_path_buf(), args)
            }
            None => (program, cl.args),
        };
        let launch = Launch {
            program,
            args,
            cwd: workspace.to_path_buf(),
            env,
            path_prepend: self
                .cfg
                .lab_exe
                .parent()
                .map(Path::to_path_buf)
                .into_iter()
                .collect(),
            exit_file: self.exit_file(run.id),
            log: PaneLog {
                socket: self.tmux.socket().to_path_buf(),
                file: log.to_path_buf(),
            },
            relay,
            cgroups: groups.join.clone(),
            oom_watch: groups.oom_watch.clone(),
        };
        let launch_file = dir.join("launch.json");
        launch
            .write(&launch_file)
            .map_err(|source| LaunchFileError::Write {
                path: launch_file.clone(),
                source,
            })?;
        Ok(launch_file)
    }

    /// The start sequence a launch and a resume share, once the run's files
    /// are made: the launch file, the one tmux call, the run recorded
    /// running. `timings` gains the launch file's time (`prepare`), the
    /// tmux call's and the record's. `None`: the run was stopped meanwhile.
    pub(super) async fn start_session(
        &self,
        s: Start<'_>,
        timings: &mut super::launch::LaunchTimings,
    ) -> Result<Option<Run>, StartError> {
        let (run, workspace, fresh) = (s.run, s.workspace, s.fresh);
        let t = std::time::Instant::now();
        let launch_file = self.write_launch(s).map_err(StartError::LaunchFile)?;
        timings.prepare += t.elapsed();
        let t = std::time::Instant::now();
        let pid = self.spawn_pane(run, workspace, &launch_file).await?;
        timings.tmux = t.elapsed();
        let t = std::time::Instant::now();
        let now = self
            .store
            .mark_running(run.id, pid, super::proctree::start_time(pid))
            .await
            .map_err(StartError::Record)?;
        timings.record = t.elapsed();
        let what = if fresh { "run started" } else { "run resumed" };
        tracing::info!(run = run.id, session = %run.session, pid, "{what}");
        Ok(now)
    }

    /// The one tmux call: the run's session, its pane running the exec shim
    /// on `launch_file`. Returns the pane's pid.
    async fn spawn_pane(
        &self,
        run: &Run,
        workspace: &Path,
        launch_file: &Path,
    ) -> Result<i64, StartError> {
        let argv = vec![
            self.cfg.lab_exe.to_string_lossy().into_owned(),
            "__exec".to_owned(),
            launch_file.to_string_lossy().into_owned(),
        ];
        self.tmux
            .spawn(SpawnArgs {
                session: &run.session,
                cwd: workspace,
                argv: &argv,
            })
            .await
            .map_err(|e| {
                let _ = std::fs::remove_file(launch_file);
                StartError::Session(e)
            })
    }
}
