//! The one launch path, for manual and AFK runs alike: resolve, record the
//! run with every place it will use, make the workspace while lab's own files
//! are written, write the launch file, one tmux call, record `running`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::launch_file::{Start, StartError};
use super::launches::InFlight;
use super::runner::Runner;
use super::{branch_name, session_name};
use crate::auth::{digest, new_token};
use crate::domain::{Defaults, RunKind};
use crate::domain::{Run, RunIssue};
use crate::provider::{Provider, ProviderId, SpawnSpec};
use crate::repo::Repo;
use crate::resolve;
use crate::store::{Ending, NewRun, RunPlaces, StoreError};
use crate::validate::{self, Invalid};

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The provider's CLI cannot be started on this node.
    #[error(transparent)]
    Unavailable(#[from] BinaryError),
    /// The run would act unattended and cannot be sandboxed here.
    #[error(transparent)]
    Unsandboxed(super::confine::Unsandboxed),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a provider's CLI cannot be started on this node.
#[derive(Debug, thiserror::Error)]
pub enum BinaryError {
    #[error("{var} is set to {}, which is not an executable file", path.display())]
    NotExecutable { var: String, path: PathBuf },
    #[error(
        "the {name} CLI ('{binary}') is not on lab's PATH; install it or set {var} to its path"
    )]
    NotOnPath {
        name: &'static str,
        binary: &'static str,
        var: String,
    },
}

/// Where a launch spent its time (for the `Server-Timing` header and the
/// spawn benchmark).
#[derive(Debug, Clone, Copy, Default)]
pub struct LaunchTimings {
    pub total: Duration,
    /// Making the workspace (and fetching a mirror).
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
    /// A manual run's provider when the person chose one other than the
    /// repo's (`None`: the repo's).
    pub provider: Option<crate::provider::ProviderId>,
    pub model: Option<String>,
    pub effort: Option<String>,
    /// A manual run's spawn options as asked (checked when resolved).
    pub options: BTreeMap<String, String>,
    pub prompt: String,
    /// Whether `{branch}` in the prompt stands for the run's branch (known
    /// only once the run is recorded): lab's AFK template names it.
    pub prompt_names_branch: bool,
    /// Extra variables for the run's environment (`LAB_ISSUE` for AFK runs).
    pub env: BTreeMap<String, String>,
    /// The AFK claim this run works for. It is tied to the run as soon as
    /// the run is recorded, before anything starts: a crash at any later
    /// point cannot leave a started run that its claim does not name (and
    /// whose issue would be given to a second run).
    pub afk_claim: Option<i64>,
    /// The issue the run works on, when it has one.
    pub issue: Option<RunIssue>,
    /// An AFK run's issue's directives (issue 27), checked against the repo
    /// when the issue was claimed: its model, effort and options sit above
    /// the repo's AFK layering.
    pub issue_layer: Option<crate::resolve::IssueLayer>,
    /// The knobs an AFK run works with, with their sources.
    pub knobs: Vec<crate::knob::Resolved>,
    /// A commit of the repo the workspace's branch starts at instead of
    /// the default branch's head: a review run reads the pull request's
    /// head (checked out in the run's jail).
    pub start_at: Option<String>,
}

impl LaunchRequest {
    fn asked(&self) -> resolve::Asked<'_> {
        resolve::Asked {
            model: self.model.as_deref(),
            effort: self.effort.as_deref(),
            options: Some(&self.options),
        }
    }
}

impl Runner {
    /// The binary of a provider: `LAB_<ID>_BIN` when set, else the CLI's
    /// name on `PATH`.
    pub fn binary_for(&self, id: ProviderId) -> Result<PathBuf, BinaryError> {
        let p = id.provider();
        if let Some(b) = self.cfg.bins.get(&id) {
            return if super::on_path::is_executable(b) {
                Ok(b.clone())
            } else {
                Err(BinaryError::NotExecutable {
                    var: p.binary_env_var(),
                    path: b.clone(),
                })
            };
        }
        super::on_path::find(p.binary()).ok_or_else(|| BinaryError::NotOnPath {
            name: p.name(),
            binary: p.binary(),
            var: p.binary_env_var(),
        })
    }

    /// What the CLI's hooks run to report its agent's state (ADR 13):
    /// `labctl hook <provider>`, the labctl beside lab's own executable (the
    /// sandbox binds that folder in). `None` when there is no such labctl:
    /// the screen check is then all lab has.
    pub fn hook_command(&self, p: &dyn Provider) -> Option<Vec<String>> {
        let labctl = self.cfg.lab_exe.parent()?.join("labctl");
        super::on_path::is_executable(&labctl).then(|| {
            vec![
                labctl.to_string_lossy().into_owned(),
                "hook".to_owned(),
                p.id().to_owned(),
            ]
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
        let resolved = match req.kind {
            RunKind::Afk => resolve::resolve_afk(&req.repo, &req.global, req.issue_layer.as_ref())?,
            RunKind::Manual => match req.provider {
                Some(id) if req.repo.provider().ok() != Some(id) => {
                    let settings = self.store.settings().await?;
                    resolve::resolve_on(&req.repo, &settings, req.kind, id, req.asked(), None)?
                }
                _ => resolve::resolve_request(&req.repo, &req.global, req.kind, req.asked())?,
            },
            // Their provider may be another than the repo's: resolved
            // against that one's global defaults.
            RunKind::Plan | RunKind::Review => {
                let settings = self.store.settings().await?;
                resolve::resolve_kind(&req.repo, &settings, req.kind, None)?
            }
        };
        let prompt = validate::prompt("prompt", &req.prompt).map_err(Invalid::from)?;
        let p = resolved.provider.provider();
        let program = self.binary_for(resolved.provider)?;
        let sandboxed = self.may_run(p, &resolved, &req).await?;
        let limits = self.limits_for(&req.repo).await?;
        let token = new_token();
        let token_hash = hex::encode(digest(&token));
        let cli_session = p.takes_session_id().then(super::new_session_id);

        let mut in_flight = InFlight::new(&self.launches);
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
                    sandboxed,
                    limits,
                    cli_session_id: cli_session.as_deref(),
                    issue: req.issue.as_ref(),
                    knobs: &req.knobs,
                    issue_budget: req.issue_layer.as_ref().map(|l| &l.budget),
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
        in_flight.recorded(inserted.as_ref().ok().map(|r| r.id));
        let mut run = inserted?;
        if let Some(claim) = req.afk_claim {
            if req.kind == RunKind::Review {
                // A review run judges the claim's work run's pull request:
                // the claim keeps naming its work run.
                self.store.attach_review_run(claim, run.id).await?;
            } else {
                self.store
                    .attach_run(claim, run.id, &run.model.value, &run.effort.value)
                    .await?;
            }
        }
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
                        state: crate::domain::RunState::Failed,
                        reason: Some(reason.to_string()),
                        exit_status: None,
                        exit_signal: None,
                        from: None,
                        stop_cause: None,
                    },
                )
                .await?;
        }
        let run = self.store.run(run.id).await?;
        timings.total = began.elapsed();
        Ok((run, timings))
    }

    /// Workspace, launch file, session. Errors are the reason the run failed.
    async fn start(
        &self,
        plan: Plan<'_>,
        timings: &mut LaunchTimings,
    ) -> Result<Option<Run>, StartError> {
        let Plan {
            req,
            run,
            provider: p,
            resolved,
            program,
            token,
        } = plan;
        let branch = run.branch.clone().unwrap_or_else(|| branch_name(run.id));
        // The workspace (git) and the agent's config, run folder and log file
        // (lab's own files) do not depend on each other: made side by side.
        let spec = SpawnSpec {
            session_name: run.session.clone(),
            model: resolved.model.value.clone(),
            effort: resolved.effort.value.clone(),
            options: resolved.option_values(),
            initial_prompt: run.prompt.clone(),
            working_dir: self.workspaces.path_for(run.id),
            sandboxed: run.sandboxed,
            hook_command: self.hook_command(p),
            session_id: run.cli_session_id.clone(),
            writes: crate::knob::writes_of(&run.knobs),
            read_only: matches!(run.kind, RunKind::Plan | RunKind::Review),
        };
        if !self.cfg.launch_pause.is_zero() {
            tokio::time::sleep(self.cfg.launch_pause).await;
        }
        let workspace = async {
            let t = std::time::Instant::now();
            let mut ws = self.workspaces.create(&req.repo, run.id, &branch).await;
            if let (Ok(w), Some(commit)) = (&ws, req.start_at.as_deref()) {
                let mut at = run.clone();
                at.workspace = Some(w.path.to_string_lossy().into_owned());
                let jail = self.jail_writable(&at, Some(&req.repo));
                if let Err(e) = self.workspaces.check_out(w, commit, jail.as_ref()).await {
                    ws = Err(e);
                }
            }
            (ws, t.elapsed())
        };
        let prepare = async {
            let t = std::time::Instant::now();
            let out = self.prepare_files(run, p, &spec, true).await;
            (out, t.elapsed())
        };
        // The relay is there before the pane starts (the first run after a
        // start or a relay's end waits for it to listen).
        let relay = self.relay.ensure(&self.tmux);
        let ((ws, ws_took), (prepared, prepare_took), relay) =
            tokio::join!(workspace, prepare, relay);
        timings.workspace = ws_took;
        let ws = ws.map_err(|e| StartError::Workspace(e.to_string()))?;
        let prepared = prepared?;
        timings.prepare = prepare_took;
        self.start_session(
            Start {
                run,
                provider: p,
                repo: &req.repo,
                program,
                cl: p.command_line(&spec),
                env: &req.env,
                token,
                workspace: &ws.path,
                dir: &prepared.dir,
                log: &prepared.log,
                seeded: &prepared.seeded,
                groups: &prepared.groups,
                relay,
                fresh: true,
            },
            timings,
        )
        .await
    }
}

pub(super) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::super::launch_file::PrepareError;
    use super::*;

    #[test]
    fn a_missing_cli_is_named_as_it_always_was() {
        let set = BinaryError::NotExecutable {
            var: "LAB_CODEX_BIN".into(),
            path: "/opt/codex".into(),
        };
        let missing = BinaryError::NotOnPath {
            name: "Claude Code",
            binary: "claude",
            var: "LAB_CLAUDE_CODE_BIN".into(),
        };
        assert_eq!(
            set.to_string(),
            "LAB_CODEX_BIN is set to /opt/codex, which is not an executable file"
        );
        assert_eq!(
            missing.to_string(),
            "the Claude Code CLI ('claude') is not on lab's PATH; install it or set \
             LAB_CLAUDE_CODE_BIN to its path"
        );
        let prepare = PrepareError::Create {
            path: "/d/runs/1".into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert_eq!(
            prepare.to_string(),
            "cannot create /d/runs/1: permission denied"
        );
    }
}
