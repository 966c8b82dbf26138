//! Claude Code's session transcript (checked against Claude Code 2.1.332).
//!
//! The file: `<config dir>/projects/<cwd>/<session id>.jsonl`, where the
//! config dir is `$CLAUDE_CONFIG_DIR` or `~/.claude`, and `<cwd>` is the
//! working directory with every character outside `[a-zA-Z0-9]` replaced by
//! `-` (the CLI's own `replace(/[^a-zA-Z0-9]/g,"-")`; a name longer than 200
//! characters is cut there and given a hash suffix).
//!
//! The lines lab reads (the fields are those of the Messages API's `usage`
//! and of the CLI's transcript entries):
//! - `{"type":"assistant","message":{"id","model","usage":{"input_tokens",
//!   "output_tokens","cache_creation_input_tokens","cache_read_input_tokens",
//!   "cache_creation":{"ephemeral_5m_input_tokens","ephemeral_1h_input_tokens"}}}}`:
//!   one API message may be written on several lines (one per content block)
//!   with the same `message.id`; it is counted once, with its last line's
//!   usage.
//! - `{"type":"user","message":{"role":"user","content":…}}`: a prompt when
//!   its content is text, not a `tool_result`, and the line is neither
//!   `isMeta`, `isCompactSummary`, a sub-agent's (`isSidechain`), nor a tool's
//!   result (`toolUseResult`). Turns count prompts.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::prices::Tokens;
use super::{Counted, Tally, count};

/// How many API messages are remembered to count repeated lines once.
const RECENT: usize = 64;

/// The longest project folder name Claude Code uses as it is.
const MAX_NAME: usize = 200;

/// The project folder name of a working directory, and whether it is
/// whole (`false`: a longer name, of which this is the start: the CLI adds a
/// hash of the path).
pub fn project_dir_name(cwd: &Path) -> (String, bool) {
    let name: String = cwd
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    if name.chars().count() <= MAX_NAME {
        (name, true)
    } else {
        (name.chars().take(MAX_NAME).collect(), false)
    }
}

/// The transcript of a session started in `cwd` (when its folder name is
/// whole).
pub fn transcript(config_dir: &Path, cwd: &Path, session_id: &str) -> Option<PathBuf> {
    let (name, whole) = project_dir_name(cwd);
    whole.then(|| {
        config_dir
            .join("projects")
            .join(name)
            .join(format!("{session_id}.jsonl"))
    })
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<Message>,
    #[serde(rename = "isMeta", default)]
    is_meta: bool,
    #[serde(rename = "isSidechain", default)]
    is_sidechain: bool,
    #[serde(rename = "isCompactSummary", default)]
    is_compact_summary: bool,
    #[serde(rename = "toolUseResult")]
    tool_use_result: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct Message {
    id: Option<String>,
    model: Option<String>,
    role: Option<String>,
    usage: Option<ApiUsage>,
    content: Option<Value>,
}

#[derive(Deserialize)]
struct ApiUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation: Option<CacheCreation>,
}

#[derive(Deserialize)]
struct CacheCreation {
    ephemeral_5m_input_tokens: Option<u64>,
    ephemeral_1h_input_tokens: Option<u64>,
}

impl ApiUsage {
    fn tokens(&self) -> Tokens {
        let written = count(self.cache_creation_input_tokens);
        let (m5, h1) = match &self.cache_creation {
            Some(c) => (
                count(c.ephemeral_5m_input_tokens),
                count(c.ephemeral_1h_input_tokens),
            ),
            None => (0, 0),
        };
        Tokens {
            input: count(self.input_tokens),
            output: count(self.output_tokens),
            cache_read: count(self.cache_read_input_tokens),
            // Writes the split does not account for are priced as 5-minute
            // ones (the default, and the cheaper).
            cache_write_5m: m5.saturating_add((written - m5 - h1).max(0)),
            cache_write_1h: h1,
        }
    }
}

/// Counts one line.
pub(super) fn line(t: &mut Tally, bytes: &[u8]) {
    let Ok(l) = serde_json::from_slice::<Line>(bytes) else {
        return;
    };
    let Some(m) = l.message else { return };
    match l.kind.as_deref() {
        Some("assistant") => {
            let Some(usage) = &m.usage else { return };
            let tokens = usage.tokens();
            let model = m.model.unwrap_or_default();
            let Some(id) = m.id else {
                t.add(&model, &tokens, 1);
                return;
            };
            let recent = &mut t.carry.recent;
            if let Some(i) = recent.iter().position(|c| c.id == id) {
                let before = recent.remove(i);
                t.add(&before.model, &before.tokens, -1);
            }
            t.add(&model, &tokens, 1);
            let recent = &mut t.carry.recent;
            recent.push(Counted { id, model, tokens });
            if recent.len() > RECENT {
                recent.remove(0);
            }
        }
        Some("user")
            if m.role.as_deref() == Some("user")
                && !(l.is_meta
                    || l.is_sidechain
                    || l.is_compact_summary
                    || l.tool_use_result.is_some())
                && is_prompt(m.content.as_ref()) =>
        {
            t.turn()
        }
        _ => {}
    }
}

/// Text a person typed: a string, or blocks none of which is a tool result.
fn is_prompt(content: Option<&Value>) -> bool {
    match content {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(blocks)) => {
            !blocks.is_empty()
                && blocks
                    .iter()
                    .all(|b| b.get("type").and_then(Value::as_str) != Some("tool_result"))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Format, Tally};
    use super::*;

    const FIXTURE: &str = include_str!("../../tests/fixtures/claude-2.1.332.jsonl");

    #[test]
    fn the_project_folder_is_the_cwd_with_non_alphanumerics_as_dashes() {
        assert_eq!(
            transcript(
                Path::new("/h/.claude"),
                Path::new("/var/lib/lab/workspaces/7"),
                "abc"
            ),
            Some(PathBuf::from(
                "/h/.claude/projects/-var-lib-lab-workspaces-7/abc.jsonl"
            ))
        );
        assert_eq!(project_dir_name(Path::new("/a_b.c/é")).0, "-a-b-c--");
        let long = format!("/{}", "x".repeat(300));
        assert_eq!(
            project_dir_name(Path::new(&long)),
            ("-".to_owned() + &"x".repeat(199), false)
        );
        assert_eq!(transcript(Path::new("/h"), Path::new(&long), "s"), None);
    }

    #[test]
    fn a_transcript_counts_each_message_once_and_each_prompt_as_a_turn() {
        let mut t = Tally::default();
        assert_eq!(t.feed(Format::Claude, FIXTURE.as_bytes()), FIXTURE.len());
        let u = &t.usage;
        // msg_01: 3 in, 1200 written (1h), 0 read, 40 out (its last line);
        // msg_02: 5 in, 300 written (5m), 1200 read, 120 out;
        // msg_03 (a sub-agent's): 10 in, 0 written, 50 read, 7 out.
        assert_eq!(
            (
                u.input_tokens,
                u.output_tokens,
                u.cache_read_tokens,
                u.cache_creation_tokens
            ),
            (18, 167, 1250, 1500)
        );
        // Two prompts: the first message and "now run the tests"; not the
        // meta line, the tool result, the sub-agent's prompt or the summary.
        assert_eq!(u.turns, 2);
        // Sonnet 4.5: $3 in, $15 out, $0.30 read, $3.75 (5m) / $6 (1h) written.
        let nano = 18 * 3000 + 167 * 15000 + 1250 * 300 + 300 * 3750 + 1200 * 6000;
        assert_eq!(u.cost_nano_usd, Some(nano));
    }

    /// What the pinned CLI wrote itself, offline (long texts cut, paths
    /// changed): one prompt, and a `<synthetic>` message with no tokens
    /// ("Not logged in"), among lines of other types (`queue-operation`,
    /// `attachment`, `api-request-blob` with a `message` of role user,
    /// `api-request`, `last-prompt`, `cost-state`).
    #[test]
    fn what_the_pinned_cli_wrote_counts_one_prompt_and_nothing_else() {
        let real = include_str!("../../tests/fixtures/claude-2.1.332-offline.jsonl");
        let mut t = Tally::default();
        assert_eq!(t.feed(Format::Claude, real.as_bytes()), real.len());
        assert_eq!(
            t.usage,
            crate::domain::Usage {
                turns: 1,
                cost_nano_usd: Some(0),
                ..crate::domain::Usage::default()
            }
        );
        // It named its file after the session id lab gave it, in the folder
        // of its working directory.
        assert!(real.contains(r#""cwd":"/var/lib/lab/workspaces/9""#));
    }

    #[test]
    fn read_in_pieces_it_counts_the_same() {
        super::super::assert_pieces_count_as_whole(
            Format::Claude,
            FIXTURE,
            &[1, 100, 700, 1500, FIXTURE.len() - 3],
        );
    }

    #[test]
    fn a_model_without_a_price_is_counted_apart_and_the_rest_priced() {
        let mut t = Tally::default();
        let line = r#"{"type":"assistant","message":{"id":"m","model":"fable-1","role":"assistant","usage":{"input_tokens":5,"output_tokens":1}}}"#;
        t.feed(Format::Claude, format!("{line}\n").as_bytes());
        assert_eq!(t.usage.input_tokens, 5);
        assert_eq!(t.usage.unpriced_tokens, 6);
        assert_eq!(t.usage.cost_nano_usd, Some(0));
        // A priced model's tokens keep their cost beside them; a Bedrock id
        // prices as its first-party one.
        let line = r#"{"type":"assistant","message":{"id":"n","model":"us.anthropic.claude-sonnet-4-5-20250929-v1:0","role":"assistant","usage":{"input_tokens":1000000,"output_tokens":0}}}"#;
        t.feed(Format::Claude, format!("{line}\n").as_bytes());
        assert_eq!(t.usage.cost_nano_usd, Some(3_000_000_000));
        assert_eq!(t.usage.unpriced_tokens, 6);
        // A synthetic message (no tokens) does not.
        let mut t = Tally::default();
        let line = r#"{"type":"assistant","message":{"id":"s","model":"<synthetic>","role":"assistant","usage":{"input_tokens":0,"output_tokens":0}}}"#;
        t.feed(Format::Claude, format!("{line}\n").as_bytes());
        assert_eq!(t.usage.cost_nano_usd, Some(0));
    }

    #[test]
    fn hostile_numbers_neither_panic_nor_wrap() {
        let mut t = Tally::default();
        for i in 0..3 {
            let line = format!(
                r#"{{"type":"assistant","message":{{"id":"m{i}","model":"claude-sonnet-4-6","usage":{{"input_tokens":18446744073709551615,"output_tokens":18446744073709551615}}}}}}"#
            );
            t.feed(Format::Claude, format!("{line}\n").as_bytes());
        }
        assert_eq!(t.usage.input_tokens, super::super::MAX_TOTAL);
        assert_eq!(t.usage.cost_nano_usd, Some(super::super::MAX_TOTAL));
        assert!(t.usage.cost_nano_usd.unwrap() > 0);
        // A negative or fractional count is not a count: the line is ignored.
        let before = t.clone();
        let line = r#"{"type":"assistant","message":{"id":"x","model":"claude-sonnet-4-6","usage":{"input_tokens":-1,"output_tokens":1.5}}}"#;
        t.feed(Format::Claude, format!("{line}\n").as_bytes());
        assert_eq!(t, before);
    }
}
