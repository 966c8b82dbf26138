//! Reconcile: keeps run states true. One pass reads every pane of lab's tmux
//! server in one tmux call, whatever the number of runs, and moves states:
//!
//! - a live pane: the run is running (a `starting` run left by a crash is
//!   re-adopted, never spawned again);
//! - a dead pane: the agent exited; its status is recorded, what is left of
//!   its process tree is ended, and the session is closed;
//! - no pane: the session vanished; the run exited when the exec shim
//!   recorded its agent's exit, else it is `lost` (resumable, ADR 18) when
//!   its workspace and CLI session id remain, else failed, with the reason;
//! - a pane no run owns: a stray, reported (and closed when it belonged to a
//!   run that has already ended; a manual run the fleet held `lost` while
//!   this node was down is taken up again instead).
//!
//! The same pass runs at start-up, before lab serves anything. Between full
//! passes a screens pass reads the screens of runs whose output grew, from
//! what the last full pass read; `wakes.rs` decides which runs when.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::attention::ScreensLeft;
use super::exec::AgentExit;
use super::pane_watch::PaneWatch;
use super::tmux::Pane;
use super::{Runner, SESSION_PREFIX, proctree, session_run_id};
use crate::domain::{Run, RunState};
use crate::store::{Ending, StoreError};

/// How long a dead pane may go without an exit status before lab records
/// the run as exited with an unknown status.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// The longest the loop goes without reading this node's runs: what another
/// node writes to them (through a shared PostgreSQL) shows within it.
pub const FULL_EVERY: Duration = Duration::from_secs(10);

/// The longest the loop goes without listing the panes: a session made on
/// lab's socket by hand (a stray) shows within it. A pass due only to
/// [`FULL_EVERY`] reads the runs and, when they are what the last full
/// pass read, lists nothing: the pidfds say every pane's process lives.
pub const PANES_EVERY: Duration = Duration::from_secs(60);

/// The reconcile passes' state, their own (other modules reach it through
/// the runner's methods): one pass at a time, their count and the last
/// one's report, the strays, what the last full pass read, the pane
/// processes watched, and one map by run of the dead panes whose exit
/// status is not known yet (pruned at each full pass to its live runs).
pub(super) struct Reconciler {
    lock: tokio::sync::Mutex<()>,
    passes: AtomicUsize,
    last: Mutex<Option<PassReport>>,
    strays: Mutex<Vec<String>>,
    exit_wait: Mutex<HashMap<i64, Instant>>,
    view: Mutex<Option<View>>,
    pub(super) panes: Mutex<PaneWatch>,
}

impl Default for Reconciler {
    fn default() -> Self {
        Reconciler {
            lock: tokio::sync::Mutex::new(()),
            passes: AtomicUsize::new(0),
            last: Mutex::new(None),
            strays: Mutex::new(Vec::new()),
            exit_wait: Mutex::new(HashMap::new()),
            view: Mutex::new(None),
            panes: Mutex::new(PaneWatch::default()),
        }
    }
}

/// What the last full pass read: this node's live runs and every pane.
#[derive(Clone)]
pub(super) struct View {
    /// When the runs were read.
    pub(super) at: Instant,
    /// When the panes were listed.
    pub(super) panes_at: Instant,
    /// Whether the pass left nothing to look at again soon (no run
    /// `starting`, no dead pane, no exit status awaited).
    pub(super) settled: bool,
    runs: Arc<Vec<Run>>,
    panes: Arc<Vec<Pane>>,
}

impl Reconciler {
    pub(super) fn passes(&self) -> usize {
        self.passes.load(Ordering::Relaxed)
    }

    pub(super) fn in_flight(&self) -> bool {
        self.lock.try_lock().is_err()
    }

    pub(super) fn last(&self) -> Option<PassReport> {
        self.last.lock().expect("poisoned").clone()
    }

    pub(super) fn strays(&self) -> Vec<String> {
        self.strays.lock().expect("poisoned").clone()
    }

    /// What the last full pass read, if it is still what lab knows.
    pub(super) fn view(&self) -> Option<View> {
        self.view.lock().expect("poisoned").clone()
    }

    fn done(&self, report: &PassReport) {
        self.passes.fetch_add(1, Ordering::Relaxed);
        *self.last.lock().expect("poisoned") = Some(report.clone());
    }
}

/// What one pass saw and did.
#[derive(Debug, Default, Clone)]
pub struct PassReport {
    /// tmux client processes this pass started.
    pub tmux_calls: u64,
    /// Active runs of this node the pass looked at.
    pub checked: usize,
    /// Runs whose agent exited.
    pub exited: Vec<i64>,
    /// Runs whose session was gone (now `lost` or `failed`).
    pub lost: Vec<i64>,
    /// `starting` runs found alive (re-adopted after a restart).
    pub adopted: Vec<i64>,
    pub strays: Vec<String>,
    /// Runs that started or stopped waiting for a person.
    pub attention: Vec<i64>,
    pub elapsed: Duration,
    /// A full pass (the runs and the panes read); else a screens pass.
    pub full: bool,
    /// Whether the pass left something to look at again soon: a run
    /// starting, a dead pane without its status, a screen behind its log,
    /// a log or a process no event covers.
    pub soon: bool,
}

impl Runner {
    /// One reconcile pass. `startup` is the pass before lab serves: no launch
    /// can be in flight then.
    pub async fn reconcile(&self, startup: bool) -> Result<PassReport, StoreError> {
        let _one_at_a_time = self.reconciler.lock.lock().await;
        let began = Instant::now();
        let calls_before = self.tmux.calls();
        let mut report = PassReport {
            full: true,
            ..PassReport::default()
        };
        // Runs first, panes second: a run that went live before the runs
        // were read has its session in the panes read after.
        let runs = self.store.active_runs(&self.cfg.node).await?;
        let in_flight = self.launches.pending();
        // Launches as of the read: a launch that ends after it may create its
        // session after the panes are listed.
        let launching_then = self.launches.snapshot();
        let panes = match self.tmux.panes().await {
            Ok(p) => p,
            Err(e) => {
                // Without a trustworthy view of tmux, change nothing.
                tracing::warn!(error = %e, "reconcile skipped: cannot list tmux panes");
                return Ok(report);
            }
        };
        report.checked = runs.len();
        let by_session: HashMap<&str, &Pane> =
            panes.iter().map(|p| (p.session.as_str(), p)).collect();
        let owned: HashSet<&str> = runs.iter().map(|r| r.session.as_str()).collect();
        let mut to_close: Vec<String> = Vec::new();

        for run in &runs {
            if self.ending.contains(run.id) {
                continue;
            }
            let launching = launching_then.contains_key(&run.id) || self.launches.contains(run.id);
            match by_session.get(run.session.as_str()) {
                Some(pane) if !pane.dead => {
                    if run.state == RunState::Starting
                        && !launching
                        && self
                            .store
                            .mark_running(run.id, pane.pid, proctree::start_time(pane.pid))
                            .await?
                            .is_some()
                    {
                        report.adopted.push(run.id);
                    }
                }
                Some(pane) => {
                    let Some(end) = self.ending(run, pane) else {
                        continue;
                    };
                    if self.record_exit(run, end).await? {
                        report.exited.push(run.id);
                    }
                    to_close.push(run.session.clone());
                }
                None => {
                    if launching || (run.state == RunState::Starting && in_flight && !startup) {
                        continue;
                    }
                    if let Some(end) = AgentExit::read(&self.exit_file(run.id)) {
                        // The agent ended on its own; its session went after.
                        if self.record_exit(run, end).await? {
                            report.exited.push(run.id);
                        }
                    } else if self.lose(run, startup).await? {
                        report.lost.push(run.id);
                    }
                }
            }
        }

        for pane in &panes {
            if owned.contains(pane.session.as_str()) {
                continue;
            }
            let owner = match session_run_id(&pane.session) {
                Some(id) => match self.store.run(id).await {
                    Ok(r) => Some(r),
                    Err(StoreError::NotFound) => None,
                    Err(e) => return Err(e),
                },
                None => None,
            };
            // A run that went live after this pass read the runs is not a stray.
            if owner.as_ref().is_some_and(|r| r.state.is_active()) {
                continue;
            }
            let leftover = owner.filter(|r| r.node == self.cfg.node);
            if let Some(run) = leftover.as_ref()
                && !pane.dead
                && self.readopt_after_node_down(run).await?
            {
                report.adopted.push(run.id);
                continue;
            }
            if let Some(run) = leftover {
                // The run ended but lab stopped before closing its session.
                proctree::kill_run(&proctree::RunMark::of(&run), self.cfg.stop_grace).await;
                to_close.push(pane.session.clone());
            } else if !self.launching_session(&pane.session) {
                report.strays.push(pane.session.clone());
            }
        }

        let left = self.watch_screens(&runs, &by_session, &mut report).await?;

        if !to_close.is_empty()
            && let Err(e) = self.tmux.kill_sessions(&to_close).await
        {
            tracing::warn!(error = %e, "could not close ended sessions; the next pass retries");
        }
        self.report_strays(&report.strays);
        let settled = self.remember(runs, panes, began, to_close.is_empty());
        report.soon =
            !settled || left.any() || self.reconciler.panes.lock().expect("poisoned").polled();
        report.tmux_calls = self.tmux.calls() - calls_before;
        report.elapsed = began.elapsed();
        self.reconciler.done(&report);
        Ok(report)
    }

    /// Remembers what a full pass read, and watches the processes of its
    /// live panes; whether it left nothing to look at again soon. A pass
    /// that closed sessions is never settled (the next one sees them gone).
    fn remember(
        &self,
        runs: Vec<Run>,
        panes: Vec<Pane>,
        began: Instant,
        closed_none: bool,
    ) -> bool {
        let by_session: HashMap<&str, &Pane> =
            panes.iter().map(|p| (p.session.as_str(), p)).collect();
        let ids: HashSet<i64> = runs.iter().map(|r| r.id).collect();
        let settled = {
            let mut waiting = self.reconciler.exit_wait.lock().expect("poisoned");
            // The one place a run's entry goes: it is no longer live here.
            waiting.retain(|id, _| ids.contains(id));
            waiting.is_empty()
        } && closed_none
            && runs.iter().all(|r| {
                r.state != RunState::Starting
                    && by_session.get(r.session.as_str()).is_some_and(|p| !p.dead)
            });
        let pids: Vec<i64> = live_pids(&runs, &by_session);
        self.reconciler.panes.lock().expect("poisoned").keep(&pids);
        *self.reconciler.view.lock().expect("poisoned") = Some(View {
            at: began,
            panes_at: began,
            settled,
            runs: Arc::new(runs),
            panes: Arc::new(panes),
        });
        settled
    }

    /// A pass between full ones: the screens of runs whose output grew, from
    /// what the last full pass read (the pidfds say its panes' processes
    /// live). `recheck` reads the runs first, and makes it a full pass when
    /// they changed (another node's write). Without a view, a full pass.
    pub(super) async fn screens_pass(&self, recheck: bool) -> Result<PassReport, StoreError> {
        let Some(view) = self.reconciler.view() else {
            return self.reconcile(false).await;
        };
        if recheck {
            let now = self.store.active_runs(&self.cfg.node).await?;
            if now != *view.runs {
                return self.reconcile(false).await;
            }
            if let Some(v) = self.reconciler.view.lock().expect("poisoned").as_mut() {
                v.at = Instant::now();
            }
        }
        let _one_at_a_time = self.reconciler.lock.lock().await;
        let began = Instant::now();
        let calls_before = self.tmux.calls();
        let by_session: HashMap<&str, &Pane> =
            view.panes.iter().map(|p| (p.session.as_str(), p)).collect();
        let mut report = PassReport {
            checked: view.runs.len(),
            ..PassReport::default()
        };
        let left: ScreensLeft = self
            .watch_screens(&view.runs, &by_session, &mut report)
            .await?;
        report.soon =
            !view.settled || left.any() || self.reconciler.panes.lock().expect("poisoned").polled();
        report.tmux_calls = self.tmux.calls() - calls_before;
        report.elapsed = began.elapsed();
        self.reconciler.done(&report);
        Ok(report)
    }

    /// How a dead pane's agent ended, once that is known. The exec shim
    /// writes it to the run's exit file; without that file (the shim itself
    /// was killed), tmux's status of the pane. tmux marks a pane dead when its
    /// terminal closes and may learn the status later: while the pane's
    /// process still lives (it let go of the terminal), the run goes on; else
    /// lab waits up to [`EXIT_WAIT`] and then records an unknown status.
    fn ending(&self, run: &Run, pane: &Pane) -> Option<AgentExit> {
        let mut waiting = self.reconciler.exit_wait.lock().expect("poisoned");
        let known = AgentExit::read(&self.exit_file(run.id)).or((pane.status.is_some()
            || pane.signal.is_some())
        .then_some(AgentExit {
            code: pane.status,
            signal: pane.signal,
            oom: false,
        }));
        if let Some(end) = known {
            waiting.remove(&run.id);
            return Some(end);
        }
        let first = *waiting.entry(run.id).or_insert_with(Instant::now);
        // Alive: the very process lab started (not a reused pid).
        let alive = run.pid == Some(pane.pid)
            && proctree::start_time(pane.pid)
                .is_some_and(|s| run.pid_start == i64::try_from(s).ok());
        if alive || first.elapsed() < EXIT_WAIT {
            return None;
        }
        waiting.remove(&run.id);
        tracing::warn!(
            run = run.id,
            "the agent's pane is dead but nothing reported its exit status"
        );
        Some(AgentExit {
            code: None,
            signal: None,
            oom: false,
        })
    }

    /// Whether a session belongs to a launch in flight (its row may not be
    /// visible to this pass yet).
    fn launching_session(&self, session: &str) -> bool {
        let Some(id) = session_run_id(session) else {
            return false;
        };
        self.launches.contains(id) || self.launches.pending()
    }

    fn report_strays(&self, now: &[String]) {
        let mut prev = self.reconciler.strays.lock().expect("poisoned");
        for s in now {
            if !prev.contains(s) {
                let hint = if s.starts_with(SESSION_PREFIX) {
                    "no live run owns it"
                } else {
                    "lab did not make it"
                };
                tracing::warn!(session = %s, "stray tmux session on lab's socket: {hint}");
            }
        }
        *prev = now.to_vec();
    }

    /// A run whose session vanished with nothing recording an exit (the
    /// tmux server was killed, the machine restarted, the shim was killed):
    /// what is left of its process tree is ended, and the run is `lost` when
    /// it can be resumed (its workspace and its CLI session id remain; ADR
    /// 17), else `failed`. False when the run had moved on meanwhile.
    async fn lose(&self, run: &Run, startup: bool) -> Result<bool, StoreError> {
        proctree::kill_run(&proctree::RunMark::of(run), Duration::ZERO).await;
        self.cfg.cgroups.release(run.id);
        let reason = if startup {
            "its tmux session was gone when lab started (was the machine restarted?)"
        } else {
            "its tmux session vanished"
        };
        let resumable = run.state != RunState::Starting
            && run.cli_session_id.as_deref().is_some_and(|s| !s.is_empty())
            && run.workspace_removed_at.is_none()
            && self.workspaces.path_for(run.id).is_dir();
        let ended = if resumable {
            let why = format!("{reason}; it can be resumed");
            self.store.mark_lost(run.id, run.state, &why).await?
        } else {
            self.store
                .finish_run(
                    run.id,
                    &Ending {
                        state: RunState::Failed,
                        reason: Some(reason.to_owned()),
                        exit_status: None,
                        exit_signal: None,
                        from: Some(run.state),
                        stop_cause: None,
                    },
                )
                .await?
        };
        if ended {
            tracing::warn!(run = run.id, session = %run.session, reason, resumable, "run lost");
        }
        Ok(ended)
    }

    /// This node was `down` to the fleet (issue 29 §3), and a run the fleet
    /// made `lost` meanwhile still lives in its tmux: a manual run is taken
    /// up again (nobody else could run it); any other run's work was given
    /// to another node (its claim taken over), so its session is closed.
    async fn readopt_after_node_down(&self, run: &Run) -> Result<bool, StoreError> {
        if run.state != RunState::Lost
            || run.kind != crate::domain::RunKind::Manual
            || run.state_reason.as_deref() != Some(crate::domain::NODE_DOWN)
        {
            return Ok(false);
        }
        let back = self
            .store
            .readopt_node_run(run.id, crate::domain::NODE_DOWN)
            .await?;
        if back {
            tracing::info!(
                run = run.id,
                "re-adopted a manual run the fleet held lost while this node was down"
            );
        }
        Ok(back)
    }

    /// Records how a dead pane's agent ended and ends what is left of its
    /// process tree. False when the run had already ended.
    async fn record_exit(&self, run: &Run, end: AgentExit) -> Result<bool, StoreError> {
        proctree::kill_run(&proctree::RunMark::of(run), Duration::ZERO).await;
        let oom = end.oom || self.cfg.cgroups.oom_killed(run.id);
        self.cfg.cgroups.release(run.id);
        let (state, reason) = match (oom, end.code, end.signal) {
            (true, _, _) => (
                RunState::Failed,
                match run.limits.memory_max_mb {
                    Some(mb) => format!(
                        "out of memory: the run passed its memory limit of {mb} MiB and was ended"
                    ),
                    None => "out of memory: the run was ended".to_owned(),
                },
            ),
            (_, Some(s), _) => (
                RunState::Exited,
                format!("the agent exited with status {s}"),
            ),
            (_, None, Some(sig)) => (
                RunState::Exited,
                format!("the agent was killed by signal {sig}"),
            ),
            (_, None, None) => (
                RunState::Exited,
                "the agent exited; its exit status is unknown".to_owned(),
            ),
        };
        let ended = self
            .store
            .finish_run(
                run.id,
                &Ending {
                    state,
                    reason: Some(reason),
                    exit_status: end.code,
                    exit_signal: end.signal,
                    from: None,
                    stop_cause: None,
                },
            )
            .await?;
        if ended {
            tracing::info!(run = run.id, status = ?end.code, signal = ?end.signal, "run exited");
        }
        Ok(ended)
    }

    /// Removes workspaces of runs that ended longer ago than the retention
    /// setting allows.
    pub async fn expire_workspaces(&self) -> Result<usize, StoreError> {
        let settings = self.store.settings().await?;
        let Some(hours) = settings.runs.workspace_retention_hours else {
            return Ok(0);
        };
        let cutoff = crate::store::now_ms() - hours * 3_600_000;
        let mut removed = 0;
        for run in self
            .store
            .workspaces_to_expire(&self.cfg.node, cutoff)
            .await?
        {
            match self.remove_workspace(&run).await {
                Ok(()) => removed += 1,
                Err(e) => {
                    tracing::warn!(run = run.id, error = %e, "could not remove an expired workspace")
                }
            }
        }
        Ok(removed)
    }
}

/// The pane processes of the runs that have a live pane.
fn live_pids(runs: &[Run], by_session: &HashMap<&str, &Pane>) -> Vec<i64> {
    runs.iter()
        .filter_map(|r| by_session.get(r.session.as_str()))
        .filter(|p| !p.dead)
        .map(|p| p.pid)
        .collect()
}
