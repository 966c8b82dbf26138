//! Starting a manual run, stopping and removing runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::domain::{AgentState, Key, Run, RunKind, RunState, ScreenFormat, StopCause};
use crate::run::screen::Shot;
use crate::run::{LaunchError, LaunchRequest, LaunchTimings, RunError, Runner};
use crate::store::{RepoKey, Store};
use crate::validate::{self, FieldError};

use super::{ServiceError, ServiceResult};

/// A launch's failure as the API and the pages report it.
pub fn launch_error(e: LaunchError) -> ServiceError {
    match e {
        LaunchError::Invalid(i) => ServiceError::Invalid(i),
        LaunchError::Unavailable(m) => ServiceError::Unavailable(m.to_string()),
        LaunchError::Unsandboxed(u) => ServiceError::Unsandboxed(u.to_string()),
        LaunchError::Store(s) => ServiceError::from_store(s, || "run".into()),
    }
}

/// A failure of something done to run `id`.
pub fn run_error(id: i64) -> impl FnOnce(RunError) -> ServiceError {
    move |e| match e {
        RunError::NotFound => ServiceError::NotFound(format!("run {id} not found")),
        RunError::Conflict(c) => ServiceError::Conflict(c.to_string()),
        RunError::Store(s) => ServiceError::Internal(s.to_string()),
        RunError::Io(m) => ServiceError::Internal(m),
    }
}

/// A manual start as a person asked for it, unchecked.
#[derive(Debug, Default)]
pub struct ManualStart<'a> {
    /// Repo name or id.
    pub repo: &'a str,
    pub provider: Option<&'a str>,
    pub model: Option<String>,
    pub effort: Option<String>,
    /// Spawn options of the run's provider (`GET /providers`); a key not
    /// named is the CLI's own default.
    pub options: BTreeMap<String, String>,
    pub prompt: String,
}

/// Starts a manual run: the model, effort and options asked for override
/// the repo's resolved base defaults for this one start.
pub async fn start_manual(
    store: &Store,
    runner: &Arc<Runner>,
    start: ManualStart<'_>,
) -> ServiceResult<(Run, LaunchTimings)> {
    let ManualStart {
        repo,
        provider,
        model,
        effort,
        options,
        prompt,
    } = start;
    // Checked before anything else: a rejected request writes nothing.
    let provider = provider
        .map(|p| crate::validate::provider_id("provider", p))
        .transpose()
        .map_err(crate::validate::Invalid::from)?;
    let key = RepoKey::parse(repo);
    let (repo, global) = store
        .repo_with_global(&key)
        .await
        .map_err(|e| ServiceError::from_store(e, || format!("repo '{key}'")))?;
    if store
        .node_draining(runner.node())
        .await
        .map_err(|e| ServiceError::from_store(e, || "this node".to_owned()))?
    {
        return Err(ServiceError::Conflict(crate::afk::draining(runner.node())));
    }
    let req = LaunchRequest {
        repo,
        global,
        kind: RunKind::Manual,
        provider,
        model,
        effort,
        options,
        prompt,
        prompt_names_branch: false,
        env: BTreeMap::new(),
        afk_claim: None,
        issue: None,
        issue_layer: None,
        knobs: Vec::new(),
        start_at: None,
    };
    // A task of its own: a client that hangs up mid-launch still gets its
    // run started and recorded, not half of one.
    let runner = runner.clone();
    crate::to_the_end(async move { runner.launch_timed(req).await })
        .await
        .map_err(launch_error)
        .map_err(|e| match e {
            // A model or effort of another provider: say how to choose it.
            ServiceError::Invalid(mut i) => {
                for f in &mut i.0 {
                    if f.field == "model" || f.field == "effort" || f.field.starts_with("options.")
                    {
                        f.message.push_str(CHOOSE_PROVIDER);
                    }
                }
                ServiceError::Invalid(i)
            }
            e => e,
        })
}

/// What a manual run's model or effort error adds: how to run another
/// provider.
const CHOOSE_PROVIDER: &str = "; to run another provider, choose it for this run (`provider` \
     in the request, `labctl start --provider`, the start form's Provider)";

/// Stops a live run: its whole process tree, then its session.
pub async fn stop(runner: &Arc<Runner>, id: i64, why: &str) -> ServiceResult<Run> {
    runner
        .stop(id, StopCause::Operator, why)
        .await
        .map_err(run_error(id))
}

/// Resumes a lost run (ADR 18); a conflict, with why, when it cannot be.
/// A task of its own, like a launch: a client that hangs up mid-way leaves a
/// run resumed, not half of one.
pub async fn resume(runner: &Arc<Runner>, id: i64) -> ServiceResult<Run> {
    let r = runner.clone();
    crate::to_the_end(async move { r.resume(id).await })
        .await
        .map_err(run_error(id))
}

/// Removes an ended run, its workspace and its log. Its branch stays.
pub async fn remove(runner: &Arc<Runner>, id: i64) -> ServiceResult<()> {
    runner.remove(id).await.map_err(run_error(id))
}

/// The most keys one input request sends.
pub const MAX_KEYS: usize = 64;

/// Types into a live run: `text` as it is, then `keys` in order. Every
/// value is checked before anything is sent; a run that is not live is a
/// conflict.
pub async fn input(
    runner: &Arc<Runner>,
    id: i64,
    text: Option<&str>,
    keys: &[String],
) -> ServiceResult<Run> {
    let mut errors = validate::Errors::default();
    let text = text
        .and_then(|t| errors.check(validate::input_text("text", t)))
        .unwrap_or_default();
    if keys.len() > MAX_KEYS {
        errors.push(FieldError::new(
            "keys",
            format!(
                "has {} keys; at most {MAX_KEYS} are sent in one request",
                keys.len()
            ),
        ));
    }
    let keys: Vec<Key> = keys
        .iter()
        .enumerate()
        .filter_map(|(i, k)| errors.check(validate::choice::<Key>(&format!("keys[{i}]"), k)))
        .collect();
    errors.finish()?;
    if text.is_empty() && keys.is_empty() {
        return Err(FieldError::new(
            "text",
            "nothing to send: give text, keys (Enter, Escape, …) or both",
        )
        .into());
    }
    let run = runner
        .store()
        .run(id)
        .await
        .map_err(|e| ServiceError::from_store(e, || format!("run {id}")))?;
    on_this_node(runner, &run)?;
    if !matches!(run.state, RunState::Running | RunState::Waiting) {
        return Err(ServiceError::Conflict(format!(
            "run {id} is {}: only a running or waiting run takes input",
            run.state
        )));
    }
    let names: Vec<&str> = keys.iter().map(|k| k.tmux_name()).collect();
    let sent_at = crate::store::now_ms();
    match runner.tmux().send_input(&run.session, &text, &names).await {
        Ok(()) => {
            // The next usage pass reads the run's transcript (Codex's
            // rollout says when the turn this input starts ends).
            runner.look_again(run.id);
            // Text sent with Enter is a prompt: the agent works on it. (Codex
            // reports only the end of a turn; Claude Code's own hook says
            // the same a moment later.) A slash command (`/help`, `/login`)
            // is the CLI's own: it starts no turn, so the state stays what
            // the CLI last said (a command that does start one is reported
            // by the CLI's hooks).
            let prompt = !text.trim().is_empty()
                && !text.trim_start().starts_with('/')
                && keys.contains(&Key::Enter);
            let working = run
                .agent
                .as_ref()
                .is_some_and(|a| a.state == AgentState::Working);
            if prompt && !working {
                runner
                    .store()
                    .working_after_input(run.id, sent_at)
                    .await
                    .map_err(|e| ServiceError::Internal(e.to_string()))?;
            }
            Ok(run)
        }
        Err(e) if e.session_gone() => Err(ServiceError::Conflict(format!(
            "run {id}'s session has ended: it takes no more input"
        ))),
        Err(e) => Err(ServiceError::Internal(e.to_string())),
    }
}

/// Refuses what only the node that owns `run` can do (read its log, type
/// into its session) when that is another node: a request reaches this
/// node for such a run only when its node does not answer (issue 29).
pub fn on_this_node(runner: &Runner, run: &Run) -> ServiceResult<()> {
    if run.node == runner.node() {
        return Ok(());
    }
    Err(ServiceError::Conflict(format!(
        "run {} lives on lab node '{}', which does not answer now (labctl node ls); \
         its session, screen and output are on that node",
        run.id, run.node
    )))
}

/// Run `run`'s screen now, in `format`, with up to `history` lines above it.
/// A run without a log yet shows a blank screen.
pub async fn screen(
    runner: &Arc<Runner>,
    run: &Run,
    format: ScreenFormat,
    history: usize,
) -> ServiceResult<Shot> {
    on_this_node(runner, run)?;
    let log = run.log_path.clone().unwrap_or_default();
    runner
        .screens()
        .with(run.id, log.into(), move |emu| emu.shot(format, history))
        .await
        .map_err(|e| ServiceError::Internal(format!("reading run {}'s log: {e}", run.id)))
}
