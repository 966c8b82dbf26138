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
//!   `TokenUsage` {`input_tokens`, `cached_input_tokens`, `output_tokens`,
//!   `reasoning_output_tokens`, `total_tokens`}: `cached_input_tokens` is part
//!   of `input_tokens`, and `reasoning_output_tokens` part of `output_tokens`
//!   (Codex's own `blended_total` is non-cached input plus output);
//! - `event_msg` with `payload.type` `task_started` (`turn_started` is its
//!   alias): a turn, which a prompt starts. (0.171.0's `codex exec` writes no
//!   `user_message` event for its prompt, only an `item_completed` one, so
//!   turns are counted by their start.)
//!
//! Totals are cumulative, so each count adds what grew since the last one,
//! priced at the model of the turn. Checked against the source (the
//! `RolloutLine`, `RolloutItem`, `EventMsg`, `TokenUsage` and
//! `TokenUsageInfo` types of `codex-rs/protocol`), the event names in the
//! pinned binary, and a rollout the pinned 0.171.0 wrote offline
//! (`session_meta`, `task_started`, `turn_context` with `model`).

use serde::Deserialize;

use super::prices::Tokens;
use super::{Tally, count};

#[derive(Deserialize)]
struct Line {
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
}

#[derive(Deserialize)]
struct Info {
    total_token_usage: TokenUsage,
}

#[derive(Deserialize)]
struct TokenUsage {
    input_tokens: Option<u64>,
    cached_input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

impl TokenUsage {
    fn tokens(&self) -> Tokens {
        let input = count(self.input_tokens);
        let cached = count(self.cached_input_tokens).min(input);
        Tokens {
            input: input - cached,
            output: count(self.output_tokens),
            cache_read: cached,
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
                    {
                        before
                    } else {
                        Tokens::default()
                    };
                    let delta = Tokens {
                        input: now.input - before.input,
                        output: now.output - before.output,
                        cache_read: now.cache_read - before.cache_read,
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
        assert_eq!(
            session_meta(first.as_bytes()),
            Some(SessionMeta {
                id: "019ad5c2-7f3e-7a10-b6c4-5e2f9d8a1b37".into(),
                cwd: "/var/lib/lab/workspaces/8".into(),
                timestamp: "2026-12-01T10:00:00.120Z".into(),
            })
        );
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

    #[test]
    fn a_model_without_a_price_makes_the_cost_unknown() {
        let mut t = Tally::default();
        let lines = concat!(
            r#"{"timestamp":"t","type":"turn_context","payload":{"cwd":"/w","model":"gpt-6-sol"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":2,"reasoning_output_tokens":1,"total_tokens":12},"last_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":2,"reasoning_output_tokens":1,"total_tokens":12},"model_context_window":272000},"rate_limits":null}}"#,
            "\n"
        );
        t.feed(Format::Codex, lines.as_bytes());
        assert_eq!((t.usage.input_tokens, t.usage.cache_read_tokens), (6, 4));
        assert_eq!(t.usage.cost_nano_usd, None);
    }
}
