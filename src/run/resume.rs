//! Resuming a lost run (ADR 18): the same run id goes from `lost` back to
//! `running` in a new tmux session of the same name, in the same workspace,
//! appending to the same log, with the CLI resuming the same session (its
//! provider's [`Provider::resume_line`]) and a fresh run token. The start is
//! the launch path's own (`launch_file.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::launch::{InFlight, LaunchTimings};
use super::launch_file::{Start, StartError};
use super::runner::{RunError, Runner};
use crate::auth::{digest, new_token};
use crate::domain::{Run, RunKind, RunState};
use crate::provider::{self, Provider, SpawnSpec};
use crate::repo::Repo;
use crate::store::{Ending, RepoKey, StoreError};

/// What a resumed agent is told, when its run had a task: a session that
/// was lost mid-turn waits at its prompt otherwise.
pub const RESUME_PROMPT: &str = "lab lost this session (its terminal went away) and resumed it. \
     Continue the task where you left off.";

/// What a resume needs, once it may go ahead.
type Resumable = (Repo, &'static dyn Provider, PathBuf);

impl Runner {
    /// The run's repo, provider and CLI binary when it can be resumed, else
    /// why not. Checked before anything changes: a refused resume writes
    /// nothing.
    async fn resumable(
        &self,
        run: &Run,
        from: RunState,
    ) -> Result<Result<Resumable, String>, StoreError> {
        let id = run.id;
        if run.state == RunState::Exited && from == RunState::Exited {
            // An AFK round of an agent that ended its session.
        } else if run.state != RunState::Lost {
            let what = if run.state.is_active() {
                "it is live"
            } else {
                "it ended"
            };
            return Ok(Err(format!(
                "run {id} is {} ({what}); only a lost run can be resumed",
                run.state
            )));
        }
        if run.node != self.cfg.node {
            return Ok(Err(format!(
                "run {id} belongs to node '{}'; resume it there",
                run.node
            )));
        }
        let ws = self.workspaces.path_for(id);
        if run.workspace_removed_at.is_some() || !ws.is_dir() {
            return Ok(Err(format!(
                "run {id} cannot be resumed: its workspace was removed"
            )));
        }
        let Some(_) = run.cli_session_id.as_deref().filter(|s| !s.is_empty()) else {
            return Ok(Err(format!(
                "run {id} cannot be resumed: lab never learnt its agent's session id"
            )));
        };
        let repo = match run.repo_id {
            Some(repo_id) => match self.store.repo(&RepoKey::Id(repo_id)).await {
                Ok(r) => r,
                Err(StoreError::NotFound) => return Ok(Err(repo_gone(id))),
                Err(e) => return Err(e),
            },
            None => return Ok(Err(repo_gone(id))),
        };
        let Some(p) = provider::get(&run.provider) else {
            return Ok(Err(format!(
                "run {id} cannot be resumed: lab no longer knows its provider '{}'",
                run.provider
            )));
        };
        let program = match self.binary_for(p) {
            Ok(b) => b,
            Err(e) => return Ok(Err(format!("run {id} cannot be resumed: {e}"))),
        };
        if run.sandboxed && self.cfg.sandbox.bwrap().is_none() {
            return Ok(Err(format!(
                "run {id} ran in lab's sandbox, which is not available on this machine now"
            )));
        }
        Ok(Ok((repo, p, program)))
    }

    /// Resumes a lost run. `Conflict` (with why) when it cannot be resumed,
    /// or another resume won; once it is `starting`, a failure to start ends
    /// it `failed` with the reason, and the run is returned.
    pub async fn resume(&self, id: i64) -> Result<Run, RunError> {
        self.resume_from(id, RunState::Lost, None).await
    }

    /// Starts the next round of an AFK run whose agent ended its session
    /// after opening its pull request: its CLI resumes the same session in
    /// the same workspace, with `prompt` (the failing check, ADR 20).
    pub async fn resume_round(&self, id: i64, prompt: String) -> Result<Run, RunError> {
        self.resume_from(id, RunState::Exited, Some(prompt)).await
    }

    async fn resume_from(
        &self,
        id: i64,
        from: RunState,
        prompt: Option<String>,
    ) -> Result<Run, RunError> {
        let run = self.store.run(id).await?;
        let (repo, p, program) = self
            .resumable(&run, from)
            .await?
            .map_err(RunError::Conflict)?;
        let token = new_token();
        let _in_flight = InFlight::of_run(self, id);
        if !self
            .store
            .begin_resume(id, &hex::encode(digest(&token)), from)
            .await?
        {
            return Err(RunError::Conflict(format!(
                "run {id} is no longer {from}: another resume came first"
            )));
        }
        // What the lost shim may have left; a new one writes its own.
        let _ = std::fs::remove_file(self.exit_file(id));
        let mut env = BTreeMap::new();
        if run.kind == RunKind::Afk
            && let Some(n) = self.store.claimed_issue_of_run(id).await?
        {
            env.insert("LAB_ISSUE".to_owned(), n.to_string());
        }
        let prompt = prompt.unwrap_or_else(|| {
            if run.prompt.is_empty() {
                String::new()
            } else {
                RESUME_PROMPT.to_owned()
            }
        });
        match self
            .restart(&run, &repo, p, program, (&token, &env), prompt)
            .await
        {
            Ok(Some(now)) => return Ok(now),
            Ok(None) => {}
            Err(reason) => {
                tracing::warn!(run = id, %reason, "run failed to resume");
                self.store
                    .finish_run(
                        id,
                        &Ending {
                            state: RunState::Failed,
                            reason: Some(format!("could not resume: {reason}")),
                            exit_status: None,
                            exit_signal: None,
                            from: Some(RunState::Starting),
                            stop_cause: None,
                        },
                    )
                    .await?;
            }
        }
        Ok(self.store.run(id).await?)
    }

    /// The agent's config, the launch file and the session, as a launch
    /// makes them; the log is appended to.
    async fn restart(
        &self,
        run: &Run,
        repo: &Repo,
        p: &'static dyn Provider,
        program: PathBuf,
        (token, env): (&str, &BTreeMap<String, String>),
        prompt: String,
    ) -> Result<Option<Run>, StartError> {
        let ws = self.workspaces.path_for(run.id);
        let spec = SpawnSpec {
            session_name: run.session.clone(),
            model: run.model.value.clone(),
            effort: run.effort.value.clone(),
            options: run
                .options
                .iter()
                .map(|(k, v)| (k.clone(), v.value.clone()))
                .collect(),
            initial_prompt: prompt,
            working_dir: ws.clone(),
            sandboxed: run.sandboxed,
            hook_command: self.hook_command(p),
            session_id: run.cli_session_id.clone(),
        };
        let prepared = self.prepare_files(run, p, &spec, false).await?;
        let relay = self.relay.ensure(&self.tmux).await;
        self.start_session(
            Start {
                run,
                provider: p,
                repo,
                program,
                cl: p.resume_line(&spec),
                env,
                token,
                workspace: &ws,
                dir: &prepared.dir,
                log: &prepared.log,
                seeded: &prepared.seeded,
                groups: &prepared.groups,
                relay,
                fresh: false,
            },
            &mut LaunchTimings::default(),
        )
        .await
    }
}

fn repo_gone(id: i64) -> String {
    format!("run {id} cannot be resumed: its repo was removed from lab")
}
