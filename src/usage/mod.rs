//! Usage from the agent CLIs' own transcripts (pure: bytes in, totals out).
//! A transcript is JSON Lines the agent can write: only whole lines count,
//! a line longer than [`MAX_LINE`] is skipped, a line that is not what lab
//! expects is ignored, and no number can overflow a total.
//!
//! - Claude Code (`claude.rs`): `<config dir>/projects/<cwd>/<session>.jsonl`,
//!   tokens per API message.
//! - Codex (`codex.rs`): `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…jsonl`,
//!   cumulative token counts.
//!
//! The price of each model is in `prices.rs`.

pub mod claude;
pub mod codex;
pub mod prices;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::{AgentState, Usage};
use prices::Tokens;

/// The longest transcript line lab reads; a longer one is skipped whole.
pub const MAX_LINE: usize = 4 << 20;

/// The most a run's total may reach (tokens, or billionths of a dollar):
/// far beyond any real run, low enough that the ledger's sums over many
/// runs a hostile agent inflated cannot overflow.
pub const MAX_TOTAL: i64 = 1 << 46;

/// Which CLI wrote a transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Claude,
    Codex,
}

impl Format {
    /// The variable naming the CLI's own folder, and that folder under the
    /// home when it is unset.
    pub fn home(self) -> (&'static str, &'static str) {
        match self {
            Format::Claude => ("CLAUDE_CONFIG_DIR", ".claude"),
            Format::Codex => ("CODEX_HOME", ".codex"),
        }
    }

    /// The transcript format of a provider's CLI.
    pub fn of(provider: &str) -> Option<Format> {
        match provider {
            "claude-code" => Some(Format::Claude),
            "codex" => Some(Format::Codex),
            _ => None,
        }
    }
}

/// One transcript's running totals, and what reading on needs (kept between
/// reads, in the database).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    pub usage: Usage,
    pub carry: Carry,
    /// The last agent state this read saw recorded (Codex: a turn's start
    /// or end), for the run's agent state (ADR 13); not kept between reads.
    pub agent: Option<Seen>,
}

/// An agent state a transcript recorded, as of the line's own time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub state: AgentState,
    /// Why an idle agent's turn ended early (an interruption), as
    /// `domain::agent_reason` keeps it.
    pub reason: Option<String>,
    /// When the CLI wrote it (ms since the epoch).
    pub at: i64,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            usage: Usage {
                cost_nano_usd: Some(0),
                ..Usage::default()
            },
            carry: Carry::default(),
            agent: None,
        }
    }
}

/// What a reader keeps between reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Carry {
    /// Claude Code: the last API messages counted, oldest first (one message
    /// is written on several lines).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<Counted>,
    /// Codex: the session's totals at its last token count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<Tokens>,
    /// Codex: the model of the current turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The read stopped inside a line too long to read: skip to its end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skipping: bool,
    /// Claude Code: the sub-agents' transcripts, by file name, each with
    /// where its read stopped.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parts: BTreeMap<String, Part>,
}

/// One more transcript of the same run (a sub-agent's): how far it was
/// read, and its reader's carry. Its counts go into the run's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    pub offset: i64,
    #[serde(default)]
    pub carry: Carry,
}

/// One API message as counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counted {
    pub id: String,
    pub model: String,
    pub tokens: Tokens,
}

impl Tally {
    /// Reads the whole lines of `buf` (the transcript from the last offset
    /// on) and returns how many bytes they took; the rest is for the next
    /// read. A line that cannot end within [`MAX_LINE`] is skipped.
    pub fn feed(&mut self, format: Format, buf: &[u8]) -> usize {
        let mut pos = 0;
        while let Some(n) = buf[pos..].iter().position(|&b| b == b'\n') {
            let line = &buf[pos..pos + n];
            pos += n + 1;
            if std::mem::take(&mut self.carry.skipping) || line.len() > MAX_LINE {
                continue;
            }
            match format {
                Format::Claude => claude::line(self, line),
                Format::Codex => codex::line(self, line),
            }
        }
        if buf.len() - pos >= MAX_LINE {
            self.carry.skipping = true;
            return buf.len();
        }
        pos
    }

    /// Adds tokens used by `model` (negative counts take back what a
    /// message counted before).
    fn add(&mut self, model: &str, t: &Tokens, sign: i64) {
        if t.is_zero() {
            return;
        }
        let u = &mut self.usage;
        let add = |total: &mut i64, n: i64| {
            *total = total
                .saturating_add(n.saturating_mul(sign))
                .clamp(0, MAX_TOTAL)
        };
        add(&mut u.input_tokens, t.input);
        add(&mut u.output_tokens, t.output);
        add(&mut u.cache_read_tokens, t.cache_read);
        add(
            &mut u.cache_creation_tokens,
            t.cache_write_5m.saturating_add(t.cache_write_1h),
        );
        match prices::price(model) {
            Some(p) => {
                u.cost_nano_usd = u.cost_nano_usd.map(|c| {
                    c.saturating_add(t.cost_nano(p).saturating_mul(sign))
                        .clamp(0, MAX_TOTAL)
                })
            }
            // Counted apart, never guessed (`prices::UNPRICED`).
            None => add(&mut u.unpriced_tokens, t.total()),
        }
    }

    fn turn(&mut self) {
        self.usage.turns = self.usage.turns.saturating_add(1).min(MAX_TOTAL);
    }
}

/// A token count from a transcript: a JSON number lab takes as it is, but
/// never negative nor beyond what a sum can hold.
fn count(n: Option<u64>) -> i64 {
    i64::try_from(n.unwrap_or(0))
        .unwrap_or(i64::MAX)
        .min(1 << 50)
}

/// Checks that a fixture read whole counts as read in two pieces cut
/// anywhere (the offset kept between reads).
#[cfg(test)]
pub(crate) fn assert_pieces_count_as_whole(format: Format, fixture: &str, cuts: &[usize]) {
    let mut whole = Tally::default();
    assert_eq!(whole.feed(format, fixture.as_bytes()), fixture.len());
    for &cut in cuts {
        let mut t = Tally::default();
        let used = t.feed(format, &fixture.as_bytes()[..cut]);
        let rest = t.feed(format, &fixture.as_bytes()[used..]);
        assert_eq!(used + rest, fixture.len(), "cut at {cut}");
        assert_eq!(t, whole, "cut at {cut}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_lines_are_read_and_long_ones_are_skipped() {
        let mut t = Tally::default();
        let line = br#"{"type":"user","message":{"role":"user","content":"hi"}}"#;
        let mut buf = line.to_vec();
        buf.extend_from_slice(b"\n{\"type\":\"us");
        assert_eq!(t.feed(Format::Claude, &buf), line.len() + 1);
        assert_eq!(t.usage.turns, 1);

        // A line longer than MAX_LINE: skipped to its end, whatever it holds.
        let mut long = vec![b' '; MAX_LINE];
        assert_eq!(t.feed(Format::Claude, &long), MAX_LINE);
        assert!(t.carry.skipping);
        long.truncate(10);
        long.push(b'\n');
        long.extend_from_slice(line);
        long.push(b'\n');
        assert_eq!(t.feed(Format::Claude, &long), long.len());
        assert!(!t.carry.skipping);
        assert_eq!(t.usage.turns, 2);

        // Garbage is ignored.
        let junk = b"\xff\xfe not json\n{}\n[1,2]\n\"x\"\nnull\n";
        assert_eq!(t.feed(Format::Claude, junk), junk.len());
        assert_eq!(t.feed(Format::Codex, junk), junk.len());
        assert_eq!(t.usage.turns, 2);
    }

    #[test]
    fn the_carry_survives_its_stored_form() {
        let mut t = Tally::default();
        t.carry.model = Some("gpt-5".into());
        t.carry.skipping = true;
        let s = serde_json::to_string(&t.carry).unwrap();
        assert_eq!(serde_json::from_str::<Carry>(&s).unwrap(), t.carry);
        assert_eq!(serde_json::to_string(&Carry::default()).unwrap(), "{}");
    }
}
