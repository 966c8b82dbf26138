//! A CLI's hook report (ADR 13): what the payload says about the agent,
//! recorded on its run. The API's `POST /runs/{id}/hook` comes here.

use serde_json::Value;

use crate::domain::{AgentBy, AgentState, Run, agent_reason};
use crate::provider::hooks::Signal;
use crate::store::Store;

use super::{ServiceError, ServiceResult};

/// The agent state a signal moves a run to; `None`: no change.
///
/// A wait the screen check found (a login screen, a trust dialog, a usage
/// limit: what no hook reports) ends when the screen shows it no more, not
/// with a hook's "working" or "idle": Claude Code still runs its prompt
/// hooks behind its login screen, and the run would flap between waiting
/// and running.
fn next(run: &Run, signal: Signal) -> Option<(AgentState, Option<String>)> {
    let screen_waits = run
        .agent
        .as_ref()
        .is_some_and(|a| a.by == AgentBy::Screen && a.state == AgentState::Waiting);
    if screen_waits && !matches!(signal, Signal::Waiting(_)) {
        return None;
    }
    match signal {
        Signal::Working => Some((AgentState::Working, None)),
        Signal::Waiting(q) => Some((AgentState::Waiting, agent_reason(&q))),
        Signal::Idle(why) => Some((AgentState::Idle, why.as_deref().and_then(agent_reason))),
        // A session that (re)starts on its own (a resume, a compaction)
        // says nothing new about a run whose state lab knows.
        Signal::Started => run.agent.is_none().then_some((AgentState::Idle, None)),
    }
}

/// Records what one hook payload of the run's CLI says about live run
/// `run`'s agent. `Ok(false)`: nothing to record (an event lab does not use,
/// or nothing changed); a run that is not live is a conflict.
pub async fn report(store: &Store, run: &Run, payload: &Value) -> ServiceResult<bool> {
    if !run.state.is_active() {
        return Err(ServiceError::Conflict(format!(
            "run {} is {}: only a live run's agent reports its state",
            run.id, run.state
        )));
    }
    // A provider that left the catalog has no hooks lab reads.
    let Ok(id) = run.provider_id() else {
        return Ok(false);
    };
    let p = id.provider();
    let Some((state, reason)) = p.hook_signal(payload).and_then(|s| next(run, s)) else {
        return Ok(false);
    };
    let same = run
        .agent
        .as_ref()
        .is_some_and(|a| a.state == state && a.reason == reason && a.by == AgentBy::Hook);
    if same {
        return Ok(false);
    }
    let written = store
        .set_agent_state(run.id, state, reason.as_deref(), AgentBy::Hook)
        .await
        .map_err(|e| ServiceError::Internal(e.to_string()))?;
    if written {
        tracing::debug!(run = run.id, state = %state, "agent state from a hook");
    }
    Ok(written)
}
