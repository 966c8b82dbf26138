//! What the launch path asks of the sandbox: whether a run may start
//! without one on this machine, and its bubblewrap arguments.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::launch::{LaunchError, LaunchRequest, create_private_dir};
use super::runner::Runner;
use super::sandbox;
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
        let sandbox::Availability::Missing { why, fix } = &self.cfg.sandbox else {
            return Ok(true);
        };
        if !p.unattended(&resolved.option_values()) {
            return Ok(false);
        }
        let allowed = match req.repo.allow_unsandboxed {
            Some(a) => a,
            None => self.store.settings().await?.runs.allow_unsandboxed,
        };
        if allowed {
            return Ok(false);
        }
        Err(LaunchError::Unsandboxed(format!(
            "this {} run would act without asking anyone, and lab cannot sandbox it here: {why}. \
             Fix: {fix}, or for this repo only: labctl repo set {} --allow-unsandboxed true",
            req.kind, req.repo.name
        )))
    }

    /// bubblewrap's arguments for a run: its workspace, the objects its
    /// clone borrows when they lie in lab's data dir (a mirror), and its
    /// CLI's own state, made first if missing so it can be bound.
    pub(super) fn sandbox_args(
        &self,
        p: &dyn Provider,
        repo: &Repo,
        workspace: &Path,
        program: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<Vec<String>, String> {
        let home = &self.cfg.agent_home;
        let state: Vec<PathBuf> = p
            .state()
            .iter()
            .map(|s| {
                let path = s.path(home, |k| env.get(k).cloned());
                if s.is_dir && !path.exists() {
                    create_private_dir(&path)
                        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
                }
                Ok(path)
            })
            .collect::<Result<_, String>>()?;
        let mut programs = vec![program.to_path_buf()];
        programs.extend(self.cfg.lab_exe.parent().map(Path::to_path_buf));
        let git_dir = self.workspaces.git_dir(repo);
        let objects = git_dir
            .starts_with(&self.cfg.data_dir)
            .then_some(git_dir.as_path());
        Ok(sandbox::RunSandbox {
            policy: &self.cfg.sandbox_policy,
            workspace,
            objects,
            cli_state: &state,
            programs: &programs,
        }
        .args())
    }
}
