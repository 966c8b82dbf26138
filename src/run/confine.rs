//! What the launch path asks of the sandbox: whether a run may start
//! without one on this machine, and its bubblewrap arguments.

use std::path::{Path, PathBuf};

use super::agent_config::Seeded;
use super::git::Jail;
use super::launch::{LaunchError, LaunchRequest, create_private_dir};
use super::launch_file::LaunchFileError;
use super::runner::Runner;
use super::sandbox;
use crate::domain::{Run, RunKind, RunLimits};
use crate::provider::Provider;
use crate::repo::Repo;
use crate::resolve;

/// Why this machine cannot confine a run as lab means to, and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unconfined {
    /// No bubblewrap sandbox (or no user namespaces for it).
    #[error("lab cannot sandbox it here: {why}. Fix: {fix}")]
    NoSandbox { why: String, fix: String },
    /// No control groups to limit its memory and processes.
    #[error(
        "lab cannot limit its memory and processes here ({why}). Fix: run lab where \
         cgroups can be written (as root, or with the cgroup v2 controllers delegated \
         to it: systemd's Delegate=yes)"
    )]
    NoLimits { why: String },
}

/// A run refused because it would act without asking anyone where lab
/// cannot confine it, and nobody allowed that.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this {kind} run would act without asking anyone, and {why}; or for this repo \
     only: labctl repo set {repo} --allow-unsandboxed true"
)]
pub struct Unsandboxed {
    pub kind: RunKind,
    /// The repo's name.
    pub repo: String,
    pub why: Unconfined,
}

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
            (sandbox::Availability::Missing { why, fix }, _) => Unconfined::NoSandbox {
                why: why.clone(),
                fix: fix.clone(),
            },
            (_, super::cgroup::Cgroups::None { why }) => Unconfined::NoLimits { why: why.clone() },
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
        Err(LaunchError::Unsandboxed(Unsandboxed {
            kind: req.kind,
            repo: req.repo.name.clone(),
            why: missing,
        }))
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
    /// (`sandbox.rs`) with its workspace (unless `writable` is false: a
    /// plan or review run only reads it) and home writable, the CLI's
    /// install and the repo's objects read-only, the operator's credentials
    /// read-only over their places in the run's CLI folder. Returns them
    /// with the path to start the CLI by (its real path: a link to it may
    /// lie in a folder the sandbox does not show).
    pub(super) fn sandbox_args(
        &self,
        repo: &Repo,
        (workspace, writable): (&Path, bool),
        program: &Path,
        seeded: &Seeded,
    ) -> Result<(Vec<String>, PathBuf), LaunchFileError> {
        let (real, install) = sandbox::install_of(program, &self.cfg.sandbox_policy)
            .map_err(|why| LaunchFileError::NoCli { why })?;
        let mut ro = self.repo_view(Some(repo));
        ro.push(install);
        let args = sandbox::RunSandbox {
            policy: &self.cfg.sandbox_policy,
            workspace,
            workspace_writable: writable,
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
        self.jail_with(run, repo, false)
    }

    /// The run's jail with its workspace writable: lab's checkout of a
    /// pull request's head into a review run's fresh workspace (the tree is
    /// another run's bytes: written inside a sandbox, never by a host git).
    pub(super) fn jail_writable(&self, run: &Run, repo: Option<&Repo>) -> Option<Jail> {
        self.jail_with(run, repo, true)
    }

    fn jail_with(&self, run: &Run, repo: Option<&Repo>, workspace_writable: bool) -> Option<Jail> {
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
            workspace_writable,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The refusal's text, as the API's 409 says it.
    #[test]
    fn an_unsandboxed_refusal_says_why_and_the_way_out() {
        let refused = |why| {
            LaunchError::Unsandboxed(Unsandboxed {
                kind: RunKind::Afk,
                repo: "app".into(),
                why,
            })
            .to_string()
        };
        assert_eq!(
            refused(Unconfined::NoSandbox {
                why: "bwrap is not installed".into(),
                fix: "install bubblewrap".into(),
            }),
            "this afk run would act without asking anyone, and lab cannot sandbox it here: \
             bwrap is not installed. Fix: install bubblewrap; or for this repo only: labctl \
             repo set app --allow-unsandboxed true"
        );
        assert_eq!(
            refused(Unconfined::NoLimits {
                why: "no cgroup v2".into()
            }),
            "this afk run would act without asking anyone, and lab cannot limit its memory and \
             processes here (no cgroup v2). Fix: run lab where cgroups can be written (as root, \
             or with the cgroup v2 controllers delegated to it: systemd's Delegate=yes); or for \
             this repo only: labctl repo set app --allow-unsandboxed true"
        );
    }
}
