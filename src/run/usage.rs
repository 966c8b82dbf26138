//! The usage pass: reads on in each run's transcript from where the last
//! read stopped, and stores the totals (with `usage::Tally`), so requests
//! only read stored numbers and a restart never reads from zero.
//!
//! It reads the live runs of this node, and each run once more after it
//! ended (then marks it done). The transcript is the agent's to write, so it
//! is treated as hostile: opened as `transcript.rs` says and read on as
//! `transcript_read.rs` does (a budget a pass, lines capped by
//! `usage::MAX_LINE`).
//! Sub-agents' tokens and cost are the run's too.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::Runner;
use super::transcript::find;
use super::transcript_read::read_transcript;
use crate::domain::{AgentState, Run};
use crate::store::{StoreError, now_ms};
use crate::usage::Format;

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

/// What the usage pass keeps of one run between passes.
#[derive(Debug, Default, Clone)]
struct Tracked {
    /// While its usage did not change: when to read it again.
    rest: Option<Rest>,
    /// What the pass last stored of its transcript (this node alone writes
    /// its runs' usage, so it is what the database holds).
    read: Option<crate::store::UsageRead>,
    /// An ended run read for the last time.
    finished: bool,
    /// How many times its transcript was looked for or read on.
    reads: u64,
}

/// The usage pass's state, its own: one map from run to what the pass keeps
/// of it (pruned to the runs each pass reads, the one place an entry goes),
/// and the runs it reads with when they were read.
pub(super) struct UsageTracker {
    runs: Mutex<HashMap<i64, Tracked>>,
    list: Mutex<Option<(std::time::Instant, Arc<Vec<Run>>)>>,
    /// Changes with each write to runs this process makes: the list is read
    /// again after one.
    written: Mutex<watch::Receiver<u64>>,
}

impl UsageTracker {
    pub(super) fn new(written: watch::Receiver<u64>) -> UsageTracker {
        UsageTracker {
            runs: Mutex::new(HashMap::new()),
            list: Mutex::new(None),
            written: Mutex::new(written),
        }
    }

    /// How many times the pass looked at `run`'s transcript (tests wait on
    /// it instead of a quiet window).
    pub(super) fn reads_of(&self, run: i64) -> u64 {
        self.runs
            .lock()
            .expect("poisoned")
            .get(&run)
            .map_or(0, |t| t.reads)
    }

    /// Ends a run's rest: the next pass reads its transcript.
    pub(super) fn read_soon(&self, run: i64) {
        if let Some(t) = self.runs.lock().expect("poisoned").get_mut(&run) {
            t.rest = None;
        }
    }

    /// A run resumed (a new round in its session): its transcript is read
    /// on again, from where the last read ended, so its new turns count.
    pub(super) fn reopen(&self, run: i64) {
        if let Some(t) = self.runs.lock().expect("poisoned").get_mut(&run) {
            t.rest = None;
            t.finished = false;
            if let Some(r) = &mut t.read {
                r.done = false;
            }
        }
    }

    fn keep_read(&self, run: i64, read: crate::store::UsageRead) {
        self.runs
            .lock()
            .expect("poisoned")
            .entry(run)
            .or_default()
            .read = Some(read);
    }

    /// When the next usage pass has something to read: now when a run is
    /// not resting (or ended and not read to its end), else the end of the
    /// first rest, else (no run) never.
    pub(super) fn next_due(&self) -> Option<std::time::Instant> {
        let now = std::time::Instant::now();
        let stale = self
            .written
            .lock()
            .expect("poisoned")
            .has_changed()
            .unwrap_or(true);
        let list = self.list.lock().expect("poisoned");
        let Some((at, runs)) = list.as_ref().filter(|_| !stale) else {
            // The runs to read are not known, or changed.
            return Some(now);
        };
        let tracked = self.runs.lock().expect("poisoned");
        let first = runs
            .iter()
            .filter_map(|r| match tracked.get(&r.id) {
                None => Some(now),
                Some(t) if !r.state.is_active() => (!t.finished).then_some(now),
                Some(t) => Some(t.rest.map_or(now, |rest| rest.next)),
            })
            .min();
        // The list is read again at least every FULL_EVERY (other nodes).
        let again = *at + super::reconcile::FULL_EVERY;
        Some(first.map_or(again, |f| f.min(again)))
    }
}

/// The longest a working Codex run's rollout goes unread, in passes: its
/// turn's end shows within seconds even without its notify hook.
const REST_WORKING: u32 = 4;

/// How many passes run `run`'s transcript may go unread at most.
fn rest_max(run: &Run) -> u32 {
    let working = run
        .agent
        .as_ref()
        .is_some_and(|a| matches!(a.state, AgentState::Working | AgentState::Retrying));
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
        {
            let mut tracked = self.usage.runs.lock().expect("poisoned");
            // The one place a run's entry goes: the pass no longer reads it.
            tracked.retain(|id, _| ids.contains(id));
            for r in runs.iter().filter(|r| !r.state.is_active()) {
                if let Some(t) = tracked.get_mut(&r.id) {
                    t.rest = None;
                }
            }
        }
        let pass = self.cfg.reconcile_every;
        let quiet = pass * REST_QUIET;
        for run in runs.iter() {
            let log = self.screen_check.log_size(run.id);
            let most = pass * rest_max(run);
            let rest = self
                .usage
                .runs
                .lock()
                .expect("poisoned")
                .get(&run.id)
                .and_then(|t| t.rest);
            if run.state.is_active() && rest.is_some_and(|r| r.holds(now, log, most)) {
                continue;
            }
            let read = self.tally_run(run).await;
            self.usage
                .runs
                .lock()
                .expect("poisoned")
                .entry(run.id)
                .or_default()
                .reads += 1;
            match read {
                Ok(true) => {
                    changed += 1;
                    self.usage.read_soon(run.id);
                }
                Ok(false) => {
                    let mut tracked = self.usage.runs.lock().expect("poisoned");
                    let t = tracked.entry(run.id).or_default();
                    if run.state.is_active() {
                        t.rest = Some(Rest::after(rest, now, log, pass, most, quiet));
                    } else {
                        // Read to its end (or nothing to read): not again.
                        t.finished = true;
                    }
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
    /// only after this process wrote to runs, or every
    /// [`FULL_EVERY`](super::reconcile::FULL_EVERY) (as the reconcile
    /// loop's runs are).
    async fn runs_to_tally(&self) -> Result<Arc<Vec<Run>>, StoreError> {
        let written = self
            .usage
            .written
            .lock()
            .expect("poisoned")
            .has_changed()
            .unwrap_or(true);
        if !written
            && let Some((at, runs)) = &*self.usage.list.lock().expect("poisoned")
            && at.elapsed() < super::reconcile::FULL_EVERY
        {
            return Ok(runs.clone());
        }
        // Marked seen before the read: a write after it is read next time.
        self.usage
            .written
            .lock()
            .expect("poisoned")
            .mark_unchanged();
        let runs = Arc::new(
            self.store
                .runs_to_tally(&self.cfg.node, now_ms() - ENDED_WINDOW_MS)
                .await?,
        );
        *self.usage.list.lock().expect("poisoned") =
            Some((std::time::Instant::now(), runs.clone()));
        Ok(runs)
    }

    async fn tally_run(&self, run: &Run) -> Result<bool, StoreError> {
        let Some(format) = Format::of(&run.provider) else {
            return Ok(false);
        };
        // This node alone reads its runs' transcripts, so what it stored
        // last is what the database holds.
        let known = self
            .usage
            .runs
            .lock()
            .expect("poisoned")
            .get(&run.id)
            .and_then(|t| t.read.clone());
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
            self.usage.keep_read(run.id, read);
            return Ok(false);
        }
        self.store.save_usage_read(run.id, &read).await?;
        self.usage.keep_read(run.id, read);
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
}
