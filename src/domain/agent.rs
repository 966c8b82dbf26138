//! What a run's agent is doing, as its CLI's hooks report it (ADR 13).

use super::spelled::spelled;

spelled! {
    /// The agent's own state, beside the run's (`running`/`waiting`).
    pub enum AgentState ("agent state") {
        /// A turn is under way.
        Working = "working",
        /// A turn is under way, but the model API does not answer: the CLI
        /// retries (its screen says so; the reason names the error).
        Retrying = "retrying",
        /// It asks a person something (a permission, a question).
        Waiting = "waiting",
        /// The turn finished and nothing is asked.
        Idle = "idle",
    }
}

spelled! {
    /// Who set a run's agent state: the CLI's hook, lab's launch (a run
    /// given a prompt is working from its start), a person's input (text
    /// sent with Enter: the agent has a prompt), the CLI's own session file
    /// (Codex's rollout: a turn's start and end, read by the usage pass), or
    /// lab's screen check (the fallback for what no hook reports).
    pub enum AgentBy ("agent state source") {
        Hook = "hook",
        Launch = "launch",
        Input = "input",
        Rollout = "rollout",
        Screen = "screen",
    }
}

/// A run's agent state, why (a waiting agent's question), and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentStatus {
    pub state: AgentState,
    pub reason: Option<String>,
    /// When it entered this state (ms since the epoch).
    pub since: i64,
    pub by: AgentBy,
}

/// The most characters of a reason lab keeps (a question can be long).
pub const AGENT_REASON_CHARS: usize = 500;

/// A reason as lab keeps it: control characters (a terminal's escape
/// sequences among them: the text comes from the agent, and `labctl ps`
/// prints it) made spaces, trimmed, at most [`AGENT_REASON_CHARS`]
/// characters (an ellipsis marks a cut), `None` when empty.
pub fn agent_reason(s: &str) -> Option<String> {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let s = clean.trim();
    if s.is_empty() {
        return None;
    }
    if s.chars().count() <= AGENT_REASON_CHARS {
        return Some(s.to_owned());
    }
    let mut cut: String = s.chars().take(AGENT_REASON_CHARS - 1).collect();
    cut.push('…');
    Some(cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_trimmed_and_capped() {
        assert_eq!(agent_reason("  "), None);
        assert_eq!(
            agent_reason(" Allow Bash? ").as_deref(),
            Some("Allow Bash?")
        );
        let long = "é".repeat(2000);
        let r = agent_reason(&long).unwrap();
        assert_eq!(r.chars().count(), AGENT_REASON_CHARS);
        assert!(r.ends_with('…'));
    }

    #[test]
    fn states_are_spelled_once() {
        for s in AgentState::ALL {
            assert_eq!(s.as_str().parse::<AgentState>().unwrap(), *s);
        }
        assert_eq!(
            "busy".parse::<AgentState>().unwrap_err(),
            "unknown agent state 'busy'; allowed: working, retrying, waiting, idle"
        );
    }
}
