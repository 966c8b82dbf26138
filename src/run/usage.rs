//! The usage pass: reads on in each run's transcript from where the last
//! read stopped, and stores the totals (with `usage::Tally`), so requests
//! only read stored numbers and a restart never reads from zero.
//!
//! It reads the live runs of this node, and each run once more after it
//! ended (then marks it done). The transcript is the agent's to write, so it
//! is treated as hostile: opened as `transcript.rs` says, at most
//! [`READ_BUDGET`] bytes a pass (and as much again over its sub-agents'
//! transcripts), lines capped by `usage::MAX_LINE`.
//!
//! Claude Code writes each sub-agent's transcript beside the session's
//! (`<session>/subagents/agent-*.jsonl`); their tokens and cost are the
//! run's too, each file read on from an offset of its own (`Carry::parts`).

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::Runner;
use super::transcript::{find, open};
use crate::domain::{AgentState, Run};
use crate::store::{StoreError, UsageRead, now_ms};
use crate::usage::{Format, Part, Tally};

/// The most one pass reads of one transcript.
const READ_BUDGET: u64 = 16 << 20;

/// The most sub-agent transcripts of one session lab reads.
const MAX_PARTS: usize = 32;

/// How long after its end a run's transcript is still looked for.
const ENDED_WINDOW_MS: i64 = 3_600_000;

/// The longest a live run's transcript goes unread, in reconcile passes,
/// while its output moves: a run whose usage did not change is read again
/// after 1 pass, then 2, 4, 8, 16 (16 s at the default interval), and every
/// pass again once it changes (a hook, or input sent to the run, resets it
/// too; a working Codex run rests at most [`REST_WORKING`] passes).
const REST_MAX: u32 = 16;

/// The longest a live run's transcript goes unread while its log did not
/// grow either (the screen check's sizes, `log_watch.rs`): an agent that
/// draws nothing does nothing, and a turn that ends draws its answer. The
/// rest doubles on to this (256 s at the default interval) and ends at the
/// first pass that finds the log grown. A hundred idle runs cost a read
/// every few seconds, not a hundred every sixteen.
const REST_QUIET: u32 = 256;

/// A live run whose usage did not change at its last read.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rest {
    /// When to read it again.
    next: std::time::Instant,
    /// The wait after that, before doubling.
    wait: Duration,
    /// Its log's size at that read, as the screen check last saw it.
    log: Option<u64>,
}

impl Rest {
    /// The rest after a read at `now` that changed nothing, from the one
    /// before (if any): the log unchanged since then lets it grow past the
    /// usual cap `most`, up to `quiet`.
    fn after(
        before: Option<Rest>,
        now: std::time::Instant,
        log: Option<u64>,
        pass: Duration,
        most: Duration,
        quiet: Duration,
    ) -> Rest {
        let wait = match before {
            None => pass,
            Some(b) => {
                let still = log.is_some() && b.log == log;
                (b.wait * 2).min(if still { quiet } else { most })
            }
        };
        Rest {
            next: now + wait,
            wait,
            log,
        }
    }

    /// Whether the run is still resting at `now`: a rest past the usual cap
    /// ends as soon as the log grew.
    fn holds(&self, now: std::time::Instant, log: Option<u64>, most: Duration) -> bool {
        self.next > now && (self.wait <= most || log == self.log)
    }
}

/// The usage pass's runs, with the store's write count and the time they
/// were read.
pub(super) type TallyRuns = (u64, std::time::Instant, Arc<Vec<Run>>);

/// The longest a working Codex run's rollout goes unread, in passes: its
/// turn's end shows within seconds even without its notify hook.
const REST_WORKING: u32 = 4;

/// How many passes run `run`'s transcript may go unread at most.
fn rest_max(run: &Run) -> u32 {
    let working = run
        .agent
        .as_ref()
        .is_some_and(|a| a.state == AgentState::Working);
    if working && Format::of(&run.provider) == Some(Format::Codex) {
        REST_WORKING
    } else {
        REST_MAX
    }
}

impl Runner {
    /// One usage pass over this node's runs; returns how many runs' usage
    /// changed. A run whose usage cannot be read or stored is logged and
    /// left for the next pass; the others go on.
    pub async fn tally_usage(&self) -> Result<usize, StoreError> {
        let runs = self.runs_to_tally().await?;
        let mut changed = 0;
        let now = std::time::Instant::now();
        let ids: HashSet<i64> = runs.iter().map(|r| r.id).collect();
        let active: HashSet<i64> = runs
            .iter()
            .filter(|r| r.state.is_active())
            .map(|r| r.id)
            .collect();
        self.usage_rest
            .lock()
            .expect("poisoned")
            .retain(|id, _| active.contains(id));
        self.usage_reads
            .lock()
            .expect("poisoned")
            .retain(|id, _| ids.contains(id));
        let pass = self.cfg.reconcile_every;
        let quiet = pass * REST_QUIET;
        for run in runs.iter() {
            let log = self
                .log_last
                .lock()
                .expect("poisoned")
                .get(&run.id)
                .copied();
            let most = pass * rest_max(run);
            let rest = self
                .usage_rest
                .lock()
                .expect("poisoned")
                .get(&run.id)
                .copied();
            if run.state.is_active() && rest.is_some_and(|r| r.holds(now, log, most)) {
                continue;
            }
            match self.tally_run(run).await {
                Ok(true) => {
                    changed += 1;
                    self.usage_rest.lock().expect("poisoned").remove(&run.id);
                }
                Ok(false) => {
                    let next = Rest::after(rest, now, log, pass, most, quiet);
                    self.usage_rest
                        .lock()
                        .expect("poisoned")
                        .insert(run.id, next);
                }
                Err(e) => {
                    tracing::warn!(run = run.id, error = %e, "could not read the run's usage")
                }
            }
        }
        Ok(changed)
    }

    /// The runs a usage pass reads: this node's live runs and those that
    /// ended within the hour and were not read to their end. Read again
    /// only after this process wrote to runs, or every `quiet::FULL_EVERY`
    /// (as the reconcile loop's runs are).
    async fn runs_to_tally(&self) -> Result<Arc<Vec<Run>>, StoreError> {
        let generation = self.store.runs_generation();
        if let Some((g, at, runs)) = &*self.usage_runs.lock().expect("poisoned")
            && *g == generation
            && at.elapsed() < super::quiet::FULL_EVERY
        {
            return Ok(runs.clone());
        }
        let runs = Arc::new(
            self.store
                .runs_to_tally(&self.cfg.node, now_ms() - ENDED_WINDOW_MS)
                .await?,
        );
        *self.usage_runs.lock().expect("poisoned") =
            Some((generation, std::time::Instant::now(), runs.clone()));
        Ok(runs)
    }

    async fn tally_run(&self, run: &Run) -> Result<bool, StoreError> {
        let Some(format) = Format::of(&run.provider) else {
            return Ok(false);
        };
        // This node alone reads its runs' transcripts, so what it stored
        // last is what the database holds.
        let known = self
            .usage_reads
            .lock()
            .expect("poisoned")
            .get(&run.id)
            .cloned();
        let before = match known {
            Some(r) => r,
            None => self.store.usage_read(run.id).await?,
        };
        if before.done {
            return Ok(false);
        }
        let ended = !run.state.is_active();
        let home = self.cli_home(run.id, format);
        let run2 = run.clone();
        let start = before.clone();
        let (read, session) = tokio::task::spawn_blocking(move || {
            let mut read = start;
            let mut session = None;
            if read.transcript.is_none() {
                let found = find(format, &home, &run2);
                session = found.as_ref().and_then(|f| f.session.clone());
                read.transcript = found.map(|f| f.path.to_string_lossy().into_owned());
            }
            let at_end = match read.transcript.clone() {
                Some(path) => read_transcript(format, &home, Path::new(&path), &mut read),
                None => true,
            };
            read.done = ended && at_end;
            (read, session)
        })
        .await
        .unwrap_or_else(|_| (before.clone(), None));
        if let Some(id) = session {
            self.store.set_cli_session_id(run.id, &id).await?;
        }
        let mut read = read;
        let seen = read.tally.agent.take();
        if read == before {
            self.usage_reads
                .lock()
                .expect("poisoned")
                .insert(run.id, read);
            return Ok(false);
        }
        self.store.save_usage_read(run.id, &read).await?;
        self.usage_reads
            .lock()
            .expect("poisoned")
            .insert(run.id, read);
        if let Some(seen) = seen.filter(|_| !ended) {
            self.record_seen(run.id, &seen).await?;
        }
        Ok(true)
    }

    /// The run's own CLI folder (ADR 24): its transcripts are read there
    /// and nowhere else.
    fn cli_home(&self, run: i64, format: Format) -> PathBuf {
        let (_, dir) = format.home();
        self.run_dir(run).join("home").join(dir)
    }
}

/// Reads a run's transcript on, and its sub-agents' (Claude Code).
/// Returns whether every read reached its end (or cannot read at all).
fn read_transcript(format: Format, home: &Path, path: &Path, read: &mut UsageRead) -> bool {
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
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    let mut stack = vec![(home.join("sessions"), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            if kind.is_dir() && depth < 3 {
                stack.push((e.path(), depth + 1));
            } else if kind.is_file()
                && name.starts_with("rollout-")
                && name.ends_with(".jsonl")
                && e.path() != main
                && super::transcript::first_meta(&e.path())
                    .is_some_and(|m| m.parent() == Some(session.id.as_str()))
            {
                out.push((name, e.path()));
            }
        }
    }
    out.sort();
    out.truncate(MAX_PARTS);
    out
}

/// The sub-agents' transcripts of a Claude Code session, by name, at most
/// [`MAX_PARTS`] (in name order).
fn parts(session: &Path) -> Vec<(String, PathBuf)> {
    // `<session>/subagents/agent-*.jsonl`, and nested ones (a workflow's
    // `subagents/workflows/<run>/agent-*.jsonl`, Claude Code 2.1.332 reads
    // them down to 6 levels), keyed by their path below `subagents`. Links
    // are not followed (`open` refuses them too).
    let root = session.with_extension("").join("subagents");
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    let mut stack = vec![(root.clone(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            if kind.is_dir() && depth < 6 {
                stack.push((e.path(), depth + 1));
            } else if kind.is_file() && name.starts_with("agent-") && name.ends_with(".jsonl") {
                let key = e
                    .path()
                    .strip_prefix(&root)
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or(name);
                out.push((key, e.path()));
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
    fn a_rest_grows_past_its_cap_only_while_the_log_stands_still() {
        let pass = Duration::from_secs(1);
        let (most, quiet) = (pass * REST_MAX, pass * REST_QUIET);
        let now = std::time::Instant::now();
        let mut rest = Rest::after(None, now, Some(10), pass, most, quiet);
        assert_eq!(rest.wait, pass);
        // The log stands still: 2, 4, … past the usual cap, to REST_QUIET.
        for _ in 0..20 {
            rest = Rest::after(Some(rest), now, Some(10), pass, most, quiet);
        }
        assert_eq!(rest.wait, quiet);
        assert!(rest.holds(now + most * 2, Some(10), most), "still resting");
        // The log grew: the long rest ends at once, and the next rests keep
        // to the usual cap.
        assert!(!rest.holds(now + pass, Some(11), most));
        rest = Rest::after(Some(rest), now, Some(11), pass, most, quiet);
        assert_eq!(rest.wait, most);
        assert!(
            rest.holds(now + pass, Some(12), most),
            "within the usual cap"
        );
        assert!(!rest.holds(now + most, Some(11), most), "its time came");
        // A run whose log is not known never rests past the usual cap.
        let mut rest = Rest::after(None, now, None, pass, most, quiet);
        for _ in 0..20 {
            rest = Rest::after(Some(rest), now, None, pass, most, quiet);
        }
        assert_eq!(rest.wait, most);
    }

    #[test]
    fn only_a_working_codex_run_rests_less() {
        use crate::domain::{AgentBy, RunState};
        let run = |provider: &str, state| {
            let mut r = super::super::attention::tests::run(
                RunState::Running,
                None,
                Some((state, AgentBy::Rollout)),
            );
            r.provider = provider.into();
            r
        };
        assert_eq!(rest_max(&run("codex", AgentState::Working)), REST_WORKING);
        assert_eq!(rest_max(&run("codex", AgentState::Idle)), REST_MAX);
        assert_eq!(rest_max(&run("claude-code", AgentState::Working)), REST_MAX);
    }

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
