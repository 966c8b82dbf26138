//! What the launch path asks of the sandbox: whether a run may start
//! without one on this machine, and its bubblewrap arguments.

use std::path::{Path, PathBuf};

use super::agent_config::Seeded;
use super::git::Jail;
use super::launch::{LaunchError, LaunchRequest, create_private_dir};
use super::runner::Runner;
use super::sandbox;
use crate::domain::{Run, RunLimits};
use crate::provider::Provider;
use crate::repo::Repo;
use crate::resolve;

impl Runner {
    /// Whether the run starts sandboxed; refused when this machine cannot
    /// sandbox and the run would ask nobody (its options make the CLI act
    /// without a person), unless the operator allowed that for its repo or
    /// globally.
    pub(super) async fn may_run(
        &self,
        p: &dyn Provider,
        resolved: &resolve::Resolved,
        req: &LaunchRequest,
    ) -> Result<bool, LaunchError> {
        let sandboxed = self.cfg.sandbox.bwrap().is_some();
        let missing = match (&self.cfg.sandbox, &self.cfg.cgroups) {
            (sandbox::Availability::Missing { why, fix }, _) => {
                format!("lab cannot sandbox it here: {why}. Fix: {fix}")
            }
            (_, super::cgroup::Cgroups::None { why }) => format!(
                "lab cannot limit its memory and processes here ({why}). Fix: run lab where \
                 cgroups can be written (as root, or with the cgroup v2 controllers delegated \
                 to it: systemd's Delegate=yes)"
            ),
            _ => return Ok(true),
        };
        if !p.unattended(&resolved.option_values()) {
            return Ok(sandboxed);
        }
        let allowed = match req.repo.allow_unsandboxed {
            Some(a) => a,
            None => self.store.settings().await?.runs.allow_unsandboxed,
        };
        if allowed {
            return Ok(sandboxed);
        }
        Err(LaunchError::Unsandboxed(format!(
            "this {} run would act without asking anyone, and {missing}; or for this repo \
             only: labctl repo set {} --allow-unsandboxed true",
            req.kind, req.repo.name
        )))
    }

    /// The caps a run of `repo` gets here (the repo's, else the global
    /// settings'; none where cgroups cannot be used).
    pub(super) async fn limits_for(&self, repo: &Repo) -> Result<RunLimits, LaunchError> {
        let settings = self.store.settings().await?;
        Ok(self.cfg.cgroups.applied(repo.run_limits(&settings.runs)))
    }

    /// The folders every sandbox of a run's sees read-only beside the
    /// system's: the repo's object store and hooks (wherever the repo
    /// lies: a repo under `/tmp` works too), and lab's own binaries.
    fn repo_view(&self, repo: Option<&Repo>) -> Vec<PathBuf> {
        let mut ro = Vec::new();
        if let Some(repo) = repo {
            let git = super::workspace::git_folder(&self.workspaces.git_dir(repo));
            // The repo's own alternates too (a repo that is itself a shared
            // clone): the operator's file, read on the host.
            let alternates =
                std::fs::read_to_string(git.join("objects/info/alternates")).unwrap_or_default();
            ro.extend(
                alternates
                    .lines()
                    .map(str::trim)
                    .filter(|l| l.starts_with('/'))
                    .map(PathBuf::from),
            );
            ro.push(git.join("objects"));
            ro.push(git.join("hooks"));
        }
        ro.extend(self.cfg.lab_exe.parent().map(Path::to_path_buf));
        ro
    }

    /// bubblewrap's arguments for a run's agent: the deny-by-default view
    /// (`sandbox.rs`) with its workspace and home writable, the CLI's
    /// install and the repo's objects read-only, the operator's credentials
    /// read-only over their places in the run's CLI folder. Returns them
    /// with the path to start the CLI by (its real path: a link to it may
    /// lie in a folder the sandbox does not show).
    pub(super) fn sandbox_args(
        &self,
        repo: &Repo,
        workspace: &Path,
        program: &Path,
        seeded: &Seeded,
    ) -> Result<(Vec<String>, PathBuf), String> {
        let (real, install) = sandbox::install_of(program)
            .ok_or_else(|| format!("cannot find the CLI {}", program.display()))?;
        let mut ro = self.repo_view(Some(repo));
        ro.push(install);
        let args = sandbox::RunSandbox {
            policy: &self.cfg.sandbox_policy,
            workspace,
            workspace_writable: true,
            read_only: &ro,
            read_only_files: &seeded.credentials,
            writable: std::slice::from_ref(&seeded.home),
            network: true,
            operator_paths: true,
        }
        .args();
        Ok((args, real))
    }

    /// bubblewrap's arguments for a repo's check command over a run's
    /// workspace: the agent's view without its home or CLI (the workspace
    /// is its `HOME`).
    pub(super) fn check_sandbox_args(&self, repo: &Repo, ws: &Path) -> Vec<String> {
        let ro = self.repo_view(Some(repo));
        sandbox::RunSandbox {
            policy: &self.cfg.sandbox_policy,
            workspace: ws,
            workspace_writable: true,
            read_only: &ro,
            read_only_files: &[],
            writable: &[],
            network: true,
            operator_paths: true,
        }
        .args()
    }

    /// The jail lab's git over run `run`'s workspace runs in (ADR 24): the
    /// run's view with its workspace read-only, a scratch folder of lab's
    /// writable, no network. `None` where this node cannot sandbox: that
    /// git then runs on the host, hardened (`git.rs`).
    pub fn jail(&self, run: &Run, repo: Option<&Repo>) -> Option<Jail> {
        let bwrap = self.cfg.sandbox.bwrap()?;
        let ws = Path::new(run.workspace.as_deref()?);
        let scratch = self.run_dir(run.id).join("scratch");
        if let Err(e) = create_private_dir(&scratch) {
            tracing::warn!(run = run.id, error = %e, "cannot make a jail's scratch folder");
            return None;
        }
        let ro = self.repo_view(repo);
        let args = sandbox::RunSandbox {
            policy: &self.cfg.sandbox_policy,
            workspace: ws,
            workspace_writable: false,
            read_only: &ro,
            read_only_files: &[],
            writable: std::slice::from_ref(&scratch),
            network: false,
            operator_paths: false,
        }
        .args();
        Some(Jail {
            bwrap: bwrap.to_path_buf(),
            args,
            scratch: Some(scratch),
        })
    }
}
