//! Reading a run's transcripts on from where the last read stopped: the
//! session's own, and its sub-agents' (Claude Code's `<session>/subagents/`,
//! Codex's child rollouts), each from an offset of its own
//! (`Carry::parts`), whole lines only, at most [`READ_BUDGET`] bytes a pass
//! for the session and as much again for its sub-agents.
//!
//! Host side over the agent's files: they are found without following a
//! link and opened as `transcript.rs` says; their bytes only feed
//! `usage::Tally`.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::transcript::open;
use crate::store::UsageRead;
use crate::usage::{Format, Part, Tally};

/// The most one pass reads of one transcript.
const READ_BUDGET: u64 = 16 << 20;

/// The most sub-agent transcripts of one session lab reads.
const MAX_PARTS: usize = 32;

/// Reads a run's transcript on, and its sub-agents' (Claude Code).
/// Returns whether every read reached its end (or cannot read at all).
pub(super) fn read_transcript(
    format: Format,
    home: &Path,
    path: &Path,
    read: &mut UsageRead,
) -> bool {
    let mut budget = READ_BUDGET;
    let mut at_end = read_on(
        format,
        home,
        path,
        &mut read.offset,
        &mut read.tally,
        &mut budget,
    );
    let parts = match format {
        Format::Claude => parts(path),
        Format::Codex => codex_parts(home, path),
    };
    let mut budget = READ_BUDGET;
    // A sub-agent's prompts are no turns of the run.
    let turns = read.tally.usage.turns;
    for (name, part_path) in parts {
        let part = read.tally.carry.parts.remove(&name).unwrap_or_default();
        let (mut offset, mut sub) = (
            part.offset,
            Tally {
                usage: read.tally.usage.clone(),
                carry: part.carry,
                agent: None,
            },
        );
        at_end &= read_on(format, home, &part_path, &mut offset, &mut sub, &mut budget);
        read.tally.usage = sub.usage;
        read.tally.usage.turns = turns;
        read.tally.carry.parts.insert(
            name,
            Part {
                offset,
                carry: sub.carry,
            },
        );
    }
    at_end
}

/// The rollouts of the sub-agents a Codex session spawned (their
/// `session_meta` names it as `parent_thread_id`), in the run's own
/// `CODEX_HOME`: each rollout's totals are its own thread's, counted apart.
fn codex_parts(home: &Path, main: &Path) -> Vec<(String, PathBuf)> {
    let Some(session) = super::transcript::first_meta(main) else {
        return Vec::new();
    };
    let sessions = home.join("sessions");
    files_below(&sessions, 3, |name, path| {
        (name.starts_with("rollout-")
            && name.ends_with(".jsonl")
            && path != main
            && super::transcript::first_meta(path)
                .is_some_and(|m| m.parent() == Some(session.id.as_str())))
        .then(|| name.to_owned())
    })
}

/// The sub-agents' transcripts of a Claude Code session, by name, at most
/// [`MAX_PARTS`] (in name order).
fn parts(session: &Path) -> Vec<(String, PathBuf)> {
    // `<session>/subagents/agent-*.jsonl`, and nested ones (a workflow's
    // `subagents/workflows/<run>/agent-*.jsonl`, Claude Code 2.1.332 reads
    // them down to 6 levels), keyed by their path below `subagents`.
    let root = session.with_extension("").join("subagents");
    files_below(&root, 6, |name, path| {
        (name.starts_with("agent-") && name.ends_with(".jsonl")).then(|| {
            path.strip_prefix(&root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| name.to_owned())
        })
    })
}

/// The regular files below `root` (at most `depth` folders down, no link
/// followed) that `key` names, by their key, in key order, at most
/// [`MAX_PARTS`].
fn files_below(
    root: &Path,
    depth: usize,
    key: impl Fn(&str, &Path) -> Option<String>,
) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, d)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            // `file_type` does not follow a link: a link is neither.
            let Ok(kind) = e.file_type() else { continue };
            let path = e.path();
            if kind.is_dir() && d < depth {
                stack.push((path, d + 1));
            } else if kind.is_file()
                && let Some(k) = key(&e.file_name().to_string_lossy(), &path)
            {
                out.push((k, path));
            }
        }
    }
    out.sort();
    out.truncate(MAX_PARTS);
    out
}

/// Reads one file on from `offset`, whole lines only, at most `budget`
/// bytes (taken from it). Returns whether it reached the end (or cannot
/// read at all).
fn read_on(
    format: Format,
    home: &Path,
    path: &Path,
    offset: &mut i64,
    tally: &mut Tally,
    budget: &mut u64,
) -> bool {
    let Some(mut f) = open(home, path) else {
        return true;
    };
    let Ok(len) = f.metadata().map(|m| m.len()) else {
        return true;
    };
    let from = u64::try_from(*offset).unwrap_or(0);
    let len = len.min(super::transcript::MAX_TRANSCRIPT);
    if len < from {
        // Cut short under lab: what it held was counted; count what comes
        // after the cut.
        *offset = i64::try_from(len).unwrap_or(i64::MAX);
        return true;
    }
    if *budget == 0 {
        return len == from;
    }
    if f.seek(SeekFrom::Start(from)).is_err() {
        return true;
    }
    let mut buf = Vec::new();
    if f.take((*budget).min(len - from))
        .read_to_end(&mut buf)
        .is_err()
    {
        return true;
    }
    *budget -= buf.len() as u64;
    let used = tally.feed(format, &buf);
    *offset = offset.saturating_add(used as i64);
    from + (buf.len() as u64) == len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_on_counts_only_what_was_appended() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let path = home.join("t.jsonl");
        let prompt = r#"{"type":"user","message":{"role":"user","content":"go"}}"#;
        std::fs::write(&path, format!("{prompt}\n{{\"type\":")).unwrap();
        let mut read = UsageRead::default();
        assert!(read_transcript(Format::Claude, home, &path, &mut read));
        assert_eq!(read.tally.usage.turns, 1);
        assert_eq!(read.offset as usize, prompt.len() + 1);
        // The partial line is finished, and another added.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        use std::io::Write;
        write!(
            f,
            "\"user\",\"message\":{{\"role\":\"user\",\"content\":\"and\"}}}}\n{prompt}\n"
        )
        .unwrap();
        assert!(read_transcript(Format::Claude, home, &path, &mut read));
        assert_eq!(read.tally.usage.turns, 3);
        let len = std::fs::metadata(&path).unwrap().len();
        assert_eq!(read.offset as u64, len);
        // Nothing new: nothing counted twice.
        assert!(read_transcript(Format::Claude, home, &path, &mut read));
        assert_eq!(read.tally.usage.turns, 3);
    }

    #[test]
    fn sub_agents_transcripts_count_for_the_run_each_from_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let main = home.join("s.jsonl");
        let msg = |id: &str, out: u64| {
            format!(
                r#"{{"type":"assistant","isSidechain":true,"message":{{"id":"{id}","model":"claude-sonnet-4-6","role":"assistant","usage":{{"input_tokens":1,"output_tokens":{out}}}}}}}"#
            )
        };
        std::fs::write(&main, format!("{}\n", msg("m0", 1))).unwrap();
        let subs = home.join("s/subagents");
        std::fs::create_dir_all(&subs).unwrap();
        std::fs::write(subs.join("agent-a.jsonl"), format!("{}\n", msg("a1", 10))).unwrap();
        std::fs::write(
            subs.join("agent-b.jsonl"),
            format!("{}\n{}", msg("b1", 100), msg("b2", 7)),
        )
        .unwrap();
        std::fs::write(subs.join("notes.txt"), format!("{}\n", msg("x", 1000))).unwrap();
        let mut read = UsageRead::default();
        read_transcript(Format::Claude, home, &main, &mut read);
        assert_eq!(read.tally.usage.output_tokens, 111);
        // More lines: only they are counted (b2's line is now whole).
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(subs.join("agent-b.jsonl"))
            .unwrap();
        use std::io::Write;
        writeln!(f).unwrap();
        read_transcript(Format::Claude, home, &main, &mut read);
        assert_eq!(read.tally.usage.output_tokens, 118);
        read_transcript(Format::Claude, home, &main, &mut read);
        assert_eq!(read.tally.usage.output_tokens, 118);
        assert_eq!(read.tally.usage.input_tokens, 4);
        assert_eq!(read.tally.carry.parts.len(), 2);
        // Sub-agents' prompts are no turns of the run.
        assert_eq!(read.tally.usage.turns, 0);
        // A workflow's sub-agent, nested below: counted too.
        let nested = subs.join("workflows/w1");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::write(
            nested.join("agent-c.jsonl"),
            format!("{}\n", msg("c1", 1000)),
        )
        .unwrap();
        read_transcript(Format::Claude, home, &main, &mut read);
        assert_eq!(read.tally.usage.output_tokens, 1118);
        assert!(
            read.tally
                .carry
                .parts
                .contains_key("workflows/w1/agent-c.jsonl")
        );
    }

    #[test]
    fn a_codex_session_s_sub_agents_count_for_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("codex");
        let day = home.join("sessions/2026/12/02");
        std::fs::create_dir_all(&day).unwrap();
        let meta = |id: &str, parent: Option<&str>| {
            let source = match parent {
                Some(p) => format!(
                    r#"{{"subagent":{{"thread_spawn":{{"parent_thread_id":"{p}","depth":1}}}}}}"#
                ),
                None => r#""cli""#.to_owned(),
            };
            format!(
                r#"{{"timestamp":"t","type":"session_meta","payload":{{"id":"{id}","cwd":"/w","timestamp":"t","source":{source}}}}}"#
            )
        };
        let tokens = |n: u64| {
            format!(
                r#"{{"timestamp":"t","type":"turn_context","payload":{{"cwd":"/w","model":"gpt-5.5"}}}}
{{"timestamp":"t","type":"event_msg","payload":{{"type":"task_started"}}}}
{{"timestamp":"t","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{n},"cached_input_tokens":0,"output_tokens":1,"reasoning_output_tokens":0,"total_tokens":{n}}}}}}}}}"#
            )
        };
        let main = day.join("rollout-2026-12-02T10-00-00-main.jsonl");
        std::fs::write(&main, format!("{}\n{}\n", meta("main", None), tokens(100))).unwrap();
        std::fs::write(
            day.join("rollout-2026-12-02T10-01-00-sub.jsonl"),
            format!("{}\n{}\n", meta("sub", Some("main")), tokens(20)),
        )
        .unwrap();
        std::fs::write(
            day.join("rollout-2026-12-02T10-02-00-other.jsonl"),
            format!("{}\n{}\n", meta("other", Some("elsewhere")), tokens(5000)),
        )
        .unwrap();
        let mut read = UsageRead::default();
        read_transcript(Format::Codex, &home, &main, &mut read);
        assert_eq!(read.tally.usage.input_tokens, 120);
        assert_eq!(read.tally.usage.turns, 1);
        assert_eq!(read.tally.carry.parts.len(), 1);
    }
}
