//! Codex's rollout (checked against the Codex source, `codex-rs/protocol`,
//! for the pinned 0.171.0).
//!
//! The file: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`
//! (`CODEX_HOME` defaults to `~/.codex`). Each line is a `RolloutLine`:
//! `{"timestamp", "type", "payload"}` (`RolloutItem` is tagged `type`, with
//! its content in `payload`, snake_case). The lines lab reads:
//! - `session_meta` (the first line): `payload.id` (the session id),
//!   `payload.cwd`, `payload.timestamp`;
//! - `turn_context`: `payload.model`, the model of the turn that follows;
//! - `event_msg` with `payload.type` `token_count`: `payload.info` (null
//!   until known) holds `total_token_usage`, the session's cumulative
//!   `TokenUsage` {`input_tokens`, `cached_input_tokens`,
//!   `cache_write_input_tokens`, `output_tokens`, `reasoning_output_tokens`,
//!   `total_tokens`}: `cached_input_tokens` and `cache_write_input_tokens`
//!   are part of `input_tokens`, and `reasoning_output_tokens` part of
//!   `output_tokens`
//!   (Codex's own `blended_total` is non-cached input plus output);
//! - `event_msg` with `payload.type` `task_started` (`turn_started` is its
//!   alias): a turn, which a prompt starts. (0.171.0's `codex exec` writes no
//!   `user_message` event for its prompt, only an `item_completed` one, so
//!   turns are counted by their start.)
//!
//! - the same turn events, and `user_message` (a prompt typed in) and
//!   `turn_aborted` (`payload.reason`: `interrupted`, `replaced`,
//!   `review_ended`, `budget_limited`), and a `task_complete` with an
//!   `error` (a turn the CLI gave up on, `afk/no_answer.rs`), as the
//!   agent's state (ADR 13,
//!   amended): the last one a read sees, at the line's `timestamp`
//!   (RFC 3339, UTC), is the run's [`Seen`]. Approval requests are never
//!   written to a rollout (the persistence policy of `codex-rs/rollout`
//!   drops them), so a waiting agent is still the screen check's to see.
//!
//! Totals are cumulative, so each count adds what grew since the last one,
//! priced at the model of the turn. Checked against the source (the
//! `RolloutLine`, `RolloutItem`, `EventMsg`, `TokenUsage` and
//! `TokenUsageInfo` types of `codex-rs/protocol`), the event names in the
//! pinned binary, and a rollout the pinned 0.171.0 wrote offline
//! (`session_meta`, `task_started`, `turn_context` with `model`).

use serde::Deserialize;

use super::prices::Tokens;
use super::{Seen, Tally, count};
use crate::domain::{AgentState, agent_reason};

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    payload: serde_json::Value,
}

#[derive(Deserialize)]
struct TurnContext {
    model: String,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    info: Option<Info>,
    /// `turn_aborted`'s reason.
    reason: Option<serde_json::Value>,
    /// `task_complete`'s error, on a turn the CLI gave up on.
    error: Option<TurnError>,
}

/// The error of a turn Codex gave up on. 0.171.0 writes no `error` event
/// to its rollout: the turn's `task_complete` carries `error` with a
/// `message` (the server's words: never read) and `codex_error_info`, a
/// `CodexErrorInfo` of `codex-rs/protocol` in snake case (a name, or an
/// object keyed by one, some with an `http_status_code`).
#[derive(Deserialize)]
struct TurnError {
    codex_error_info: Option<serde_json::Value>,
}

/// The `CodexErrorInfo` names lab repeats; any other is `other`.
pub(crate) const ERROR_NAMES: &[&str] = &[
    "context_window_exceeded",
    "usage_limit_exceeded",
    "server_overloaded",
    "http_connection_failed",
    "response_stream_connection_failed",
    "internal_server_error",
    "unauthorized",
    "bad_request",
    "sandbox_error",
    "response_stream_disconnected",
    "response_too_many_failed_attempts",
    "thread_rollback_failed",
];

impl TurnError {
    /// Why the turn ended, in lab's words: the rollout is the agent's to
    /// write (the run side of the trust boundary), so only a name from
    /// [`ERROR_NAMES`] and an HTTP status in 400..600 are kept.
    fn reason(&self) -> String {
        let info = self.codex_error_info.as_ref();
        let (name, detail) = match info {
            Some(serde_json::Value::String(n)) => (n.as_str(), None),
            Some(serde_json::Value::Object(m)) if m.len() == 1 => {
                let (n, d) = m.iter().next().expect("one entry");
                (n.as_str(), Some(d))
            }
            _ => ("other", None),
        };
        let name = ERROR_NAMES.iter().find(|k| **k == name).unwrap_or(&"other");
        let status = detail
            .and_then(|d| d.get("http_status_code"))
            .and_then(serde_json::Value::as_u64)
            .filter(|n| (400..600).contains(n));
        match status {
            Some(n) => format!("the turn ended on an error: HTTP {n} {name}"),
            None => format!("the turn ended on an error: {name}"),
        }
    }
}

impl Event {
    /// The agent state this event says the agent entered, and why.
    fn agent_state(&self) -> Option<(AgentState, Option<String>)> {
        match self.kind.as_str() {
            "task_started" | "turn_started" | "user_message" => Some((AgentState::Working, None)),
            "task_complete" | "turn_complete" => match &self.error {
                // A turn the CLI gave up on (`afk/no_answer.rs`).
                Some(e) => Some((AgentState::Idle, agent_reason(&e.reason()))),
                None => Some((AgentState::Idle, None)),
            },
            "turn_aborted" => {
                let why = match self.reason.as_ref().and_then(|r| r.as_str()) {
                    Some("interrupted") => "the turn was interrupted".to_owned(),
                    Some(r) => format!("the turn was aborted: {r}"),
                    None => "the turn was aborted".to_owned(),
                };
                Some((AgentState::Idle, agent_reason(&why)))
            }
            _ => None,
        }
    }
}

/// A line's `timestamp` as ms since the epoch; `None` when it is not an
/// RFC 3339 time after the epoch.
fn millis(timestamp: &str) -> Option<i64> {
    let t = humantime::parse_rfc3339_weak(timestamp).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_millis()).ok()
}

#[derive(Deserialize)]
struct Info {
    total_token_usage: TokenUsage,
}

#[derive(Deserialize)]
struct TokenUsage {
    input_tokens: Option<u64>,
    cached_input_tokens: Option<u64>,
    /// 0.171.0's: input written to the prompt cache (part of
    /// `input_tokens`, like the cached input).
    #[serde(default)]
    cache_write_input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

impl TokenUsage {
    fn tokens(&self) -> Tokens {
        let input = count(self.input_tokens);
        let cached = count(self.cached_input_tokens).min(input);
        let written = count(self.cache_write_input_tokens).min(input - cached);
        Tokens {
            input: input - cached - written,
            output: count(self.output_tokens),
            cache_read: cached,
            cache_write_5m: written,
            ..Tokens::default()
        }
    }
}

/// What a rollout's first line says about its session.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SessionMeta {
    pub id: String,
    pub cwd: String,
    #[serde(default)]
    pub timestamp: String,
    /// 0.171.0's: where the session came from; a sub-agent's says its
    /// parent (`{"subagent": {"thread_spawn": {"parent_thread_id", …}}}`).
    #[serde(default)]
    pub source: Option<serde_json::Value>,
}

impl SessionMeta {
    /// The session a sub-agent's rollout was spawned from, if it is one.
    pub fn parent(&self) -> Option<&str> {
        self.source
            .as_ref()?
            .get("subagent")?
            .get("thread_spawn")?
            .get("parent_thread_id")?
            .as_str()
    }
}

/// The session of a rollout, from its first line.
pub fn session_meta(first_line: &[u8]) -> Option<SessionMeta> {
    let l: Line = serde_json::from_slice(first_line).ok()?;
    if l.kind != "session_meta" {
        return None;
    }
    serde_json::from_value(l.payload).ok()
}

/// Counts one line.
pub(super) fn line(t: &mut Tally, bytes: &[u8]) {
    let Ok(l) = serde_json::from_slice::<Line>(bytes) else {
        return;
    };
    match l.kind.as_str() {
        "turn_context" => {
            if let Ok(c) = serde_json::from_value::<TurnContext>(l.payload) {
                t.carry.model = Some(c.model);
            }
        }
        "event_msg" => {
            let Ok(e) = serde_json::from_value::<Event>(l.payload) else {
                return;
            };
            if let Some((state, reason)) = e.agent_state()
                && let Some(at) = l.timestamp.as_deref().and_then(millis)
            {
                t.agent = Some(Seen { state, reason, at });
            }
            match (e.kind.as_str(), e.info) {
                ("task_started" | "turn_started", _) => t.turn(),
                ("token_count", Some(info)) => {
                    let now = info.total_token_usage.tokens();
                    let before = t.carry.total.unwrap_or_default();
                    // Totals only grow; one that shrank started over.
                    let grew = |a: i64, b: i64| a >= b;
                    let before = if grew(now.input, before.input)
                        && grew(now.output, before.output)
                        && grew(now.cache_read, before.cache_read)
                        && grew(now.cache_write_5m, before.cache_write_5m)
                    {
                        before
                    } else {
                        Tokens::default()
                    };
                    let delta = Tokens {
                        input: now.input - before.input,
                        output: now.output - before.output,
                        cache_read: now.cache_read - before.cache_read,
                        cache_write_5m: now.cache_write_5m - before.cache_write_5m,
                        ..Tokens::default()
                    };
                    let model = t.carry.model.clone().unwrap_or_default();
                    t.add(&model, &delta, 1);
                    t.carry.total = Some(now);
                }
                _ => {}
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Format, Tally};
    use super::*;

    const FIXTURE: &str = include_str!("../../tests/fixtures/codex-0.171.0.jsonl");

    #[test]
    fn the_first_line_names_the_session_and_its_folder() {
        let first = FIXTURE.lines().next().unwrap();
        let m = session_meta(first.as_bytes()).unwrap();
        assert_eq!(
            (m.id.as_str(), m.cwd.as_str(), m.timestamp.as_str()),
            (
                "019ad5c2-7f3e-7a10-b6c4-5e2f9d8a1b37",
                "/var/lib/lab/workspaces/8",
                "2026-12-01T10:00:00.120Z"
            )
        );
        assert_eq!(m.parent(), None);
        let second = FIXTURE.lines().nth(1).unwrap();
        assert_eq!(session_meta(second.as_bytes()), None);
        assert_eq!(session_meta(b"garbage"), None);
    }

    /// What the pinned `codex exec` wrote itself, offline (long texts cut,
    /// paths changed): its session, one turn, no token count.
    #[test]
    fn what_the_pinned_cli_wrote_names_its_session_and_one_turn() {
        let real = include_str!("../../tests/fixtures/codex-0.171.0-offline.jsonl");
        let first = real.lines().next().unwrap();
        let meta = session_meta(first.as_bytes()).unwrap();
        assert_eq!(meta.id, "01a23186-f20d-7192-ae81-06859cb377d8");
        assert_eq!(meta.cwd, "/var/lib/lab/workspaces/10");
        let mut t = Tally::default();
        assert_eq!(t.feed(Format::Codex, real.as_bytes()), real.len());
        assert_eq!(t.usage.turns, 1);
        assert_eq!(t.usage.tokens(), 0);
        assert_eq!(t.carry.model.as_deref(), Some("gpt-6.2-sol"));
    }

    #[test]
    fn cumulative_counts_add_what_grew_at_the_turns_model() {
        let mut t = Tally::default();
        assert_eq!(t.feed(Format::Codex, FIXTURE.as_bytes()), FIXTURE.len());
        let u = &t.usage;
        // The last total: 21000 in of which 15000 cached, 900 out.
        assert_eq!(
            (
                u.input_tokens,
                u.cache_read_tokens,
                u.output_tokens,
                u.cache_creation_tokens
            ),
            (6000, 15000, 900, 0)
        );
        assert_eq!(u.turns, 2);
        // First count (gpt-5.5: $5 in, $0.50 cached, $30 out): 4000 in,
        // 8000 cached, 500 out; the second (gpt-5-codex: $1.25, $0.125,
        // $10): 2000 in, 7000 cached, 400 out.
        let first = 4000 * 5000 + 8000 * 500 + 500 * 30000;
        let second = 2000 * 1250 + 7000 * 125 + 400 * 10000;
        assert_eq!(u.cost_nano_usd, Some(first + second));
    }

    #[test]
    fn read_in_pieces_it_counts_the_same() {
        super::super::assert_pieces_count_as_whole(
            Format::Codex,
            FIXTURE,
            &[1, 500, 1200, FIXTURE.len() - 2],
        );
    }

    /// A TUI session's turns in the 0.171.0 shapes (`task_started` as the
    /// pinned CLI wrote it offline; `task_complete` and `turn_aborted` with
    /// the fields of `TurnCompleteEvent`/`TurnAbortedEvent` in
    /// `codex-rs/protocol`): each read's last state, at its line's time.
    #[test]
    fn turns_give_the_agent_state_at_the_line_s_time() {
        let turns = include_str!("../../tests/fixtures/codex-0.171.0-turns.jsonl");
        let lines: Vec<&str> = turns.lines().collect();
        let seen = |upto: usize| {
            let mut t = Tally::default();
            let text: String = lines[..upto].iter().map(|l| format!("{l}\n")).collect();
            t.feed(Format::Codex, text.as_bytes());
            t.agent.map(|s| (s.state, s.reason, s.at))
        };
        // The session's first line says nothing about a turn.
        assert_eq!(seen(1), None);
        // A turn started (then its prompt): working.
        assert_eq!(seen(2), Some((AgentState::Working, None, 1796122800100)));
        assert_eq!(seen(5).unwrap().0, AgentState::Working);
        // It completed: idle, nothing asked.
        assert_eq!(seen(6), Some((AgentState::Idle, None, 1796122809500)));
        assert_eq!(seen(8).unwrap().0, AgentState::Working);
        // The next one was interrupted: idle, and why.
        assert_eq!(
            seen(9),
            Some((
                AgentState::Idle,
                Some("the turn was interrupted".into()),
                1796122920250
            ))
        );
        // The token fixture ends inside its second turn.
        let mut t = Tally::default();
        t.feed(Format::Codex, FIXTURE.as_bytes());
        assert_eq!(t.agent.unwrap().state, AgentState::Working);
    }

    /// A turn the pinned 0.171.0 gave up on (its model API answered 500
    /// to every request): the `task_complete` line it wrote, cut to the
    /// fields read, as the agent's state in lab's words.
    #[test]
    fn a_turn_codex_gave_up_on_is_idle_with_its_error() {
        let read = |error: &str| {
            let line = format!(
                "{{\"timestamp\":\"2026-12-07T15:15:19.604Z\",\"type\":\"event_msg\",\"payload\":{{\"type\":\"task_complete\",\"turn_id\":\"t\",\"last_agent_message\":null,\"error\":{error},\"duration_ms\":828}}}}\n"
            );
            let mut t = Tally::default();
            t.feed(Format::Codex, line.as_bytes());
            let s = t.agent.unwrap();
            assert_eq!(s.state, AgentState::Idle);
            s.reason.unwrap()
        };
        assert_eq!(
            read(
                "{\"message\":\"We\\u2019re currently experiencing high demand\",\"codex_error_info\":\"internal_server_error\"}"
            ),
            "the turn ended on an error: internal_server_error"
        );
        assert_eq!(
            read(
                "{\"message\":\"x\",\"codex_error_info\":{\"response_too_many_failed_attempts\":{\"http_status_code\":503}}}"
            ),
            "the turn ended on an error: HTTP 503 response_too_many_failed_attempts"
        );
        // The agent writes its rollout: nothing of its own goes on.
        assert_eq!(
            read("{\"message\":\"x\",\"codex_error_info\":\"see https://evil.example @everyone\"}"),
            "the turn ended on an error: other"
        );
        assert_eq!(
            read(
                "{\"message\":\"x\",\"codex_error_info\":{\"bad_request\":{\"http_status_code\":99999}}}"
            ),
            "the turn ended on an error: bad_request"
        );
    }

    #[test]
    fn a_state_line_without_its_time_or_with_odd_fields_is_read_safely() {
        let read = |lines: &str| {
            let mut t = Tally::default();
            t.feed(Format::Codex, lines.as_bytes());
            t.agent.map(|s| (s.state, s.reason))
        };
        // No time, or no RFC 3339 time: no state (the order would be unknown).
        assert_eq!(
            read("{\"type\":\"event_msg\",\"payload\":{\"type\":\"task_complete\"}}\n"),
            None
        );
        assert_eq!(
            read(
                "{\"timestamp\":\"t\",\"type\":\"event_msg\",\"payload\":{\"type\":\"task_complete\"}}\n"
            ),
            None
        );
        // A reason lab does not know is shown as given, cleaned and cut.
        let odd = format!(
            "{{\"timestamp\":\"2026-12-01T11:00:00Z\",\"type\":\"event_msg\",\"payload\":{{\"type\":\"turn_aborted\",\"reason\":\"\\u001b[2Jx{}\"}}}}\n",
            "y".repeat(3000)
        );
        let (state, reason) = read(&odd).unwrap();
        assert_eq!(state, AgentState::Idle);
        let reason = reason.unwrap();
        assert!(
            reason.starts_with("the turn was aborted:  [2Jx"),
            "{reason}"
        );
        assert_eq!(reason.chars().count(), crate::domain::AGENT_REASON_CHARS);
        // A reason that is no string, and an event lab does not use.
        assert_eq!(
            read(
                "{\"timestamp\":\"2026-12-01T11:00:00Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\"turn_aborted\",\"reason\":{\"x\":1}}}\n"
            ),
            Some((AgentState::Idle, Some("the turn was aborted".into())))
        );
        assert_eq!(
            read(
                "{\"timestamp\":\"2026-12-01T11:00:00Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\"exec_approval_request\"}}\n"
            ),
            None
        );
    }

    #[test]
    fn a_model_without_a_price_is_counted_apart() {
        let mut t = Tally::default();
        let lines = concat!(
            r#"{"timestamp":"t","type":"turn_context","payload":{"cwd":"/w","model":"gpt-6-sol"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":2,"reasoning_output_tokens":1,"total_tokens":12},"last_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":2,"reasoning_output_tokens":1,"total_tokens":12},"model_context_window":272000},"rate_limits":null}}"#,
            "\n"
        );
        t.feed(Format::Codex, lines.as_bytes());
        assert_eq!((t.usage.input_tokens, t.usage.cache_read_tokens), (6, 4));
        assert_eq!(t.usage.cost_nano_usd, Some(0));
        assert_eq!(t.usage.unpriced_tokens, 12);
        // 0.171.0's cache writes are input too, counted as cache creation.
        let mut t = Tally::default();
        let lines = concat!(
            r#"{"timestamp":"t","type":"turn_context","payload":{"cwd":"/w","model":"gpt-5.5"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":40,"cache_write_input_tokens":50,"output_tokens":2,"reasoning_output_tokens":1,"total_tokens":102},"model_context_window":272000},"rate_limits":null}}"#,
            "\n"
        );
        t.feed(Format::Codex, lines.as_bytes());
        assert_eq!(
            (
                t.usage.input_tokens,
                t.usage.cache_read_tokens,
                t.usage.cache_creation_tokens
            ),
            (10, 40, 50)
        );
        assert_eq!(t.usage.unpriced_tokens, 0);
    }
}
