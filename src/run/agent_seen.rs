//! An agent state read from the CLI's own session file (Codex's rollout:
//! its turns' starts and ends, `usage::codex`), recorded as the run's agent
//! state (ADR 13, amended). The usage pass reads the file; this decides
//! whether what it saw is news.

use super::Runner;
use crate::domain::{AgentBy, Run};
use crate::store::StoreError;
use crate::usage::Seen;

impl Runner {
    /// Records `seen` on live run `id` unless lab already knows something
    /// as new or newer. Returns whether it changed the run's agent state.
    pub(super) async fn record_seen(&self, id: i64, seen: &Seen) -> Result<bool, StoreError> {
        // Read now, not at the pass's start: a hook may have come since.
        let run = self.store.run(id).await?;
        if !is_news(&run, seen) {
            return Ok(false);
        }
        let written = self
            .store
            .set_agent_state(id, seen.state, seen.reason.as_deref(), AgentBy::Rollout)
            .await?;
        if written {
            tracing::debug!(run = id, state = %seen.state, "agent state from the rollout");
        }
        Ok(written)
    }
}

/// Whether a state the CLI wrote down changes what lab shows. It is exact
/// like a hook, and it carries its own time, so it applies over any source
/// (a screen's wait among them: the agent went on after it) unless what lab
/// recorded is newer (a late read never undoes a newer hook or input) or
/// says the same already (no write).
fn is_news(run: &Run, seen: &Seen) -> bool {
    if !run.state.is_active() {
        return false;
    }
    match &run.agent {
        None => true,
        Some(a) => seen.at >= a.since && (a.state, &a.reason) != (seen.state, &seen.reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{AgentState, AgentStatus, RunState};

    fn run(state: RunState, agent: Option<(AgentState, AgentBy, i64)>) -> Run {
        let mut r = super::super::attention::tests::run(state, None, None);
        r.agent = agent.map(|(state, by, since)| AgentStatus {
            state,
            reason: None,
            since,
            by,
        });
        r
    }

    #[test]
    fn only_a_newer_different_state_is_news() {
        use AgentBy::{Hook, Input, Rollout, Screen};
        use AgentState::{Idle, Waiting, Working};
        let seen = |state, at| Seen {
            state,
            reason: None,
            at,
        };
        let table = [
            // Nothing known yet.
            (run(RunState::Running, None), seen(Working, 5), true),
            // The turn ended after lab's input: idle.
            (
                run(RunState::Running, Some((Working, Input, 10))),
                seen(Idle, 20),
                true,
            ),
            // A read that comes late: the notify hook's idle (at 30) is
            // newer than the turn's start (at 20).
            (
                run(RunState::Running, Some((Idle, Hook, 30))),
                seen(Working, 20),
                false,
            ),
            // The same state again writes nothing.
            (
                run(RunState::Running, Some((Working, Rollout, 10))),
                seen(Working, 20),
                false,
            ),
            // An approval the screen saw was answered, and the turn ended.
            (
                run(RunState::Waiting, Some((Waiting, Screen, 10))),
                seen(Idle, 20),
                true,
            ),
            // An ended run's agent does nothing.
            (run(RunState::Stopped, None), seen(Working, 5), false),
        ];
        for (i, (r, s, want)) in table.into_iter().enumerate() {
            assert_eq!(is_news(&r, &s), want, "row {i}");
        }
        // A reason is part of the state: an interruption after a plain end.
        let interrupted = Seen {
            state: Idle,
            reason: Some("the turn was interrupted".into()),
            at: 40,
        };
        assert!(is_news(
            &run(RunState::Running, Some((Idle, Rollout, 30))),
            &interrupted
        ));
    }
}
