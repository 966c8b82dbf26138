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

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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
