//! Resuming a lost run (ADR 18): the same run id goes from `lost` back to
//! `running` in a new tmux session of the same name, in the same workspace,
//! appending to the same log, with the CLI resuming the same session (its
//! provider's [`Provider::resume_line`]) and a fresh run token. The start is
//! the launch path's own (`launch_file.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::launch::{BinaryError, LaunchTimings};
use super::launch_file::{Start, StartError};
use super::launches::InFlight;
use super::runner::{RunError, Runner};
use crate::auth::{digest, new_token};
use crate::domain::{Run, RunState};
use crate::provider::{Provider, ProviderId, SpawnSpec};
use crate::repo::Repo;
use crate::store::{Ending, RepoKey, StoreError};

/// What a resumed agent is told, when its run had a task: a session that
/// was lost mid-turn waits at its prompt otherwise.
pub const RESUME_PROMPT: &str = "lab lost this session (its terminal went away) and resumed it. \
     Continue the task where you left off.";

/// Why a run cannot be resumed (nothing was changed); the API's 409.
#[derive(Debug, thiserror::Error)]
pub enum NotResumable {
    #[error("run {id} is {state} ({}); only a lost run can be resumed",
        if .state.is_active() { "it is live" } else { "it ended" })]
    NotLost { id: i64, state: RunState },
    #[error("run {id} belongs to node '{node}'; resume it there")]
    OtherNode { id: i64, node: String },
    #[error("run {id} cannot be resumed: its workspace was removed")]
    NoWorkspace { id: i64 },
    #[error("run {id} cannot be resumed: lab never learnt its agent's session id")]
    NoSessionId { id: i64 },
    #[error("run {id} cannot be resumed: its repo was removed from lab")]
    NoRepo { id: i64 },
    /// The run's provider left lab's catalog.
    #[error("run {id} cannot be resumed: lab no longer knows its provider '{provider}'")]
    UnknownProvider { id: i64, provider: String },
    #[error("run {id} cannot be resumed: {error}")]
    NoBinary { id: i64, error: BinaryError },
    #[error("run {id} ran in lab's sandbox, which is not available on this machine now")]
    NoSandbox { id: i64 },
    /// Another resume moved the run on first.
    #[error("run {id} is no longer {from}: another resume came first")]
    Raced { id: i64, from: RunState },
}

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
    ) -> Result<Result<Resumable, NotResumable>, StoreError> {
        let id = run.id;
        if run.state == from && matches!(from, RunState::Exited | RunState::Stopped) {
            // An AFK round of an agent that ended its session, or a planning
            // run lab stopped once it submitted its plan.
        } else if run.state != RunState::Lost {
            return Ok(Err(NotResumable::NotLost {
                id,
                state: run.state,
            }));
        }
        if run.node != self.cfg.node {
            return Ok(Err(NotResumable::OtherNode {
                id,
                node: run.node.clone(),
            }));
        }
        let ws = self.workspaces.path_for(id);
        if run.workspace_removed_at.is_some() || !ws.is_dir() {
            return Ok(Err(NotResumable::NoWorkspace { id }));
        }
        let Some(_) = run.cli_session_id.as_deref().filter(|s| !s.is_empty()) else {
            return Ok(Err(NotResumable::NoSessionId { id }));
        };
        let repo = match run.repo_id {
            Some(repo_id) => match self.store.repo(&RepoKey::Id(repo_id)).await {
                Ok(r) => r,
                Err(StoreError::NotFound) => return Ok(Err(NotResumable::NoRepo { id })),
                Err(e) => return Err(e),
            },
            None => return Ok(Err(NotResumable::NoRepo { id })),
        };
        let Ok(provider) = run.provider.parse::<ProviderId>() else {
            return Ok(Err(NotResumable::UnknownProvider {
                id,
                provider: run.provider.clone(),
            }));
        };
        let p = provider.provider();
        let program = match self.binary_for(provider) {
            Ok(b) => b,
            Err(error) => return Ok(Err(NotResumable::NoBinary { id, error })),
        };
        if run.sandboxed && self.cfg.sandbox.bwrap().is_none() {
            return Ok(Err(NotResumable::NoSandbox { id }));
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

    /// Sends a run lab stopped back to work: its CLI resumes the same
    /// session with `prompt` (a planning run: why its plan was rejected; a
    /// work run: what a review found).
    pub async fn resume_stopped(&self, id: i64, prompt: String) -> Result<Run, RunError> {
        self.resume_from(id, RunState::Stopped, Some(prompt)).await
    }

    async fn resume_from(
        &self,
        id: i64,
        from: RunState,
        prompt: Option<String>,
    ) -> Result<Run, RunError> {
        let run = self.store.run(id).await?;
        let (repo, p, program) = self.resumable(&run, from).await?.map_err(RunError::from)?;
        let token = new_token();
        let _in_flight = InFlight::of_run(&self.launches, id);
        if !self
            .store
            .begin_resume(id, &hex::encode(digest(&token)), from)
            .await?
        {
            return Err(NotResumable::Raced { id, from }.into());
        }
        self.usage.reopen(id);
        // What the lost shim may have left; a new one writes its own.
        let _ = std::fs::remove_file(self.exit_file(id));
        let mut env = BTreeMap::new();
        if run.kind.is_unattended()
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
            writes: crate::knob::writes_of(&run.knobs),
            read_only: matches!(
                run.kind,
                crate::domain::RunKind::Plan | crate::domain::RunKind::Review
            ),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each reason's text, as the API's 409 and the AFK loop's lost-run
    /// reason say it.
    #[test]
    fn each_reason_names_the_run_and_why() {
        let cases = [
            (
                NotResumable::NotLost {
                    id: 3,
                    state: RunState::Running,
                },
                "run 3 is running (it is live); only a lost run can be resumed",
            ),
            (
                NotResumable::NotLost {
                    id: 3,
                    state: RunState::Stopped,
                },
                "run 3 is stopped (it ended); only a lost run can be resumed",
            ),
            (
                NotResumable::OtherNode {
                    id: 3,
                    node: "n2".into(),
                },
                "run 3 belongs to node 'n2'; resume it there",
            ),
            (
                NotResumable::NoWorkspace { id: 3 },
                "run 3 cannot be resumed: its workspace was removed",
            ),
            (
                NotResumable::NoSessionId { id: 3 },
                "run 3 cannot be resumed: lab never learnt its agent's session id",
            ),
            (
                NotResumable::NoRepo { id: 3 },
                "run 3 cannot be resumed: its repo was removed from lab",
            ),
            (
                NotResumable::UnknownProvider {
                    id: 3,
                    provider: "gemini".into(),
                },
                "run 3 cannot be resumed: lab no longer knows its provider 'gemini'",
            ),
            (
                NotResumable::NoSandbox { id: 3 },
                "run 3 ran in lab's sandbox, which is not available on this machine now",
            ),
            (
                NotResumable::Raced {
                    id: 3,
                    from: RunState::Lost,
                },
                "run 3 is no longer lost: another resume came first",
            ),
        ];
        for (why, said) in cases {
            assert_eq!(RunError::from(why).to_string(), said);
        }
    }
}
