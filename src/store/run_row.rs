//! A run row as the store reads it: the columns, the joins that bring a
//! run's usage and its AFK claim's attempt, rounds and outcome, and how a
//! row becomes a [`Run`].

use sqlx::FromRow;

use super::{Result, StoreError};
use crate::domain::{AgentStatus, Layer, Run, RunIssue, Sourced, StopCause, Usage};

pub(super) const COLUMNS: &str = "id, kind, repo_id, repo_name, provider, model, model_source, effort, effort_source, \
     options, prompt, state, state_reason, node, session, workspace, branch, log_path, pid, pid_start, exit_status, \
     exit_signal, created_at, started_at, ended_at, workspace_removed_at, sandboxed, stop_cause, \
     agent_state, agent_reason, agent_since, agent_by, cli_session_id, issue_number, issue_title, issue_url, \
     memory_max_mb, pids_max, knobs, issue_budget, limit_line";

/// A run's usage, for reads of runs joined with `run_usage` ([`USAGE_JOIN`]).
/// Also the run's AFK claim's attempt, rounds and outcome (a derived table,
/// so none of the claim's column names meets one of the run's).
pub(super) const USAGE_COLUMNS: &str = "u.transcript AS usage_transcript, u.input_tokens AS usage_input, \
     u.output_tokens AS usage_output, u.cache_read_tokens AS usage_cache_read, \
     u.cache_creation_tokens AS usage_cache_creation, u.turns AS usage_turns, \
     u.cost_nano_usd AS usage_cost, u.unpriced_tokens AS usage_unpriced, c.claim_attempt, c.claim_rounds, c.claim_outcome, c.claim_stage";
pub(super) const USAGE_JOIN: &str = "LEFT JOIN run_usage u ON u.run_id = runs.id \
     LEFT JOIN (SELECT run_id AS claim_run, attempt AS claim_attempt, rounds AS claim_rounds, \
     outcome AS claim_outcome, CASE WHEN active THEN stage END AS claim_stage FROM afk_claims) c \
     ON c.claim_run = runs.id";

#[derive(FromRow)]
pub(super) struct RunRow {
    id: i64,
    kind: String,
    repo_id: Option<i64>,
    repo_name: String,
    provider: String,
    model: String,
    model_source: String,
    effort: String,
    effort_source: String,
    options: String,
    prompt: String,
    state: String,
    state_reason: Option<String>,
    node: String,
    session: String,
    workspace: Option<String>,
    branch: Option<String>,
    log_path: Option<String>,
    pid: Option<i64>,
    pid_start: Option<i64>,
    exit_status: Option<i64>,
    exit_signal: Option<i64>,
    created_at: i64,
    started_at: Option<i64>,
    ended_at: Option<i64>,
    workspace_removed_at: Option<i64>,
    sandboxed: bool,
    stop_cause: Option<StopCause>,
    agent_state: Option<String>,
    agent_reason: Option<String>,
    agent_since: Option<i64>,
    agent_by: Option<String>,
    cli_session_id: Option<String>,
    issue_number: Option<i64>,
    issue_title: Option<String>,
    issue_url: Option<String>,
    memory_max_mb: Option<i64>,
    pids_max: Option<i64>,
    knobs: String,
    issue_budget: Option<String>,
    limit_line: Option<String>,
    #[sqlx(flatten)]
    usage: UsageColumns,
}

/// The usage columns of a joined read; absent (all `None`) elsewhere.
#[derive(FromRow, Default)]
struct UsageColumns {
    #[sqlx(default)]
    usage_transcript: Option<String>,
    #[sqlx(default)]
    usage_input: Option<i64>,
    #[sqlx(default)]
    usage_output: Option<i64>,
    #[sqlx(default)]
    usage_cache_read: Option<i64>,
    #[sqlx(default)]
    usage_cache_creation: Option<i64>,
    #[sqlx(default)]
    usage_turns: Option<i64>,
    #[sqlx(default)]
    usage_cost: Option<i64>,
    #[sqlx(default)]
    usage_unpriced: Option<i64>,
    #[sqlx(default)]
    claim_attempt: Option<i64>,
    #[sqlx(default)]
    claim_rounds: Option<i64>,
    #[sqlx(default)]
    claim_outcome: Option<String>,
    #[sqlx(default)]
    claim_stage: Option<String>,
}

impl UsageColumns {
    /// Known once the transcript was found.
    fn usage(&self) -> Option<Usage> {
        self.usage_transcript.as_ref()?;
        Some(Usage {
            input_tokens: self.usage_input.unwrap_or(0),
            output_tokens: self.usage_output.unwrap_or(0),
            cache_read_tokens: self.usage_cache_read.unwrap_or(0),
            cache_creation_tokens: self.usage_cache_creation.unwrap_or(0),
            turns: self.usage_turns.unwrap_or(0),
            cost_nano_usd: self.usage_cost,
            unpriced_tokens: self.usage_unpriced.unwrap_or(0),
        })
    }
}

fn layer(s: &str) -> Result<Layer> {
    serde_json::from_value(serde_json::Value::String(s.to_owned()))
        .map_err(|_| StoreError::Corrupt(format!("unknown provenance '{s}'")))
}

impl TryFrom<RunRow> for Run {
    type Error = StoreError;
    fn try_from(r: RunRow) -> Result<Run> {
        let corrupt =
            |what: &str, e: String| StoreError::Corrupt(format!("run {} {what}: {e}", r.id));
        let agent = match (r.agent_state.as_deref(), r.agent_by.as_deref()) {
            (Some(state), by) => Some(AgentStatus {
                state: state.parse().map_err(|e| corrupt("agent state", e))?,
                reason: r.agent_reason.clone(),
                since: r.agent_since.unwrap_or(r.created_at),
                by: by
                    .unwrap_or("hook")
                    .parse()
                    .map_err(|e| corrupt("agent state source", e))?,
            }),
            (None, _) => None,
        };
        let outcome = match r.usage.claim_outcome.as_deref() {
            Some(o) => Some(o.parse().map_err(|e| corrupt("outcome", e))?),
            None => None,
        };
        let issue = match (r.issue_number, r.issue_title) {
            (Some(number), Some(title)) => Some(RunIssue {
                number,
                title,
                url: r.issue_url,
            }),
            _ => None,
        };
        let knobs = serde_json::from_str(&r.knobs).map_err(|e| corrupt("knobs", e.to_string()))?;
        let issue_budget = r
            .issue_budget
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| corrupt("issue budget", e.to_string()))?;
        let stage = match r.usage.claim_stage.as_deref() {
            Some(st) => Some(st.parse().map_err(|e| corrupt("stage", e))?),
            None => None,
        };
        Ok(Run {
            stage,
            knobs,
            issue_budget,
            usage: r.usage.usage(),
            issue,
            attempt: r.usage.claim_attempt.unwrap_or(1),
            round: r.usage.claim_rounds.unwrap_or(1),
            outcome,
            cli_session_id: r.cli_session_id,
            limit_line: r.limit_line,
            id: r.id,
            kind: r.kind.parse().map_err(|e| corrupt("kind", e))?,
            repo_id: r.repo_id,
            model: Sourced {
                value: r.model,
                layer: layer(&r.model_source)?,
            },
            effort: Sourced {
                value: r.effort,
                layer: layer(&r.effort_source)?,
            },
            options: serde_json::from_str(&r.options)
                .map_err(|e| corrupt("options", e.to_string()))?,
            state: r.state.parse().map_err(|e| corrupt("state", e))?,
            repo_name: r.repo_name,
            provider: r.provider,
            prompt: r.prompt,
            state_reason: r.state_reason,
            node: r.node,
            session: r.session,
            workspace: r.workspace,
            branch: r.branch,
            log_path: r.log_path,
            pid: r.pid,
            pid_start: r.pid_start,
            exit_status: r.exit_status,
            exit_signal: r.exit_signal,
            created_at: r.created_at,
            started_at: r.started_at,
            ended_at: r.ended_at,
            workspace_removed_at: r.workspace_removed_at,
            sandboxed: r.sandboxed,
            limits: crate::domain::RunLimits {
                memory_max_mb: r.memory_max_mb,
                pids_max: r.pids_max,
            },
            stop_cause: r.stop_cause,
            agent,
        })
    }
}
