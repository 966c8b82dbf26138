//! The reconcile loop: it waits for what can change a run's truth, never on
//! a clock it compares counters on (ADR 30), and then runs the pass that
//! change needs:
//!
//! - a write to runs by this process (`Store::subscribe(Written::Runs)`: a
//!   launch, a stop, a hook, a resume, a pass's own write), or the end of a
//!   launch (one dropped mid-way writes nothing): a **full pass**;
//! - a pane's process that ended (its pidfd, in one epoll set the runtime
//!   watches through `AsyncFd`, `pane_watch.rs`): a full pass;
//! - a log written (the inotify queue, through `AsyncFd`, `log_watch.rs`),
//!   or a look asked for (a hook, input): a **screens pass**;
//! - time, only for what no event announces: what a pass left to look at
//!   again (a run starting, a dead pane's status, a screen behind its log, a
//!   log or a process no watch covers) after `reconcile_every`; the runs
//!   read again every [`FULL_EVERY`] and the panes listed every
//!   [`PANES_EVERY`] (another node's write, a session made by hand); the
//!   usage pass when a run's rest ends; workspace retention once a minute.
//!
//! Two passes are at least `reconcile_every` apart, so a burst of events
//! costs one pass. An idle node's loop sleeps until one of the timers above.

use std::future::pending;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::sync::watch;
use tokio::time::sleep_until;

use super::Runner;
use super::reconcile::{FULL_EVERY, PANES_EVERY};
use crate::store::Written;

/// The shortest gap between two usage passes.
const USAGE_EVERY: Duration = Duration::from_secs(1);

/// How often the workspace retention runs.
const RETENTION_EVERY: Duration = Duration::from_secs(60);

/// What woke the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Woke {
    /// Runs were written, a launch ended, or a pane's process ended.
    Changed,
    /// A log was written, or a look was asked for.
    Looked,
    /// A timer.
    Time,
    Shutdown,
}

/// A descriptor the runtime watches for readability.
fn watched(fd: Option<OwnedFd>) -> Option<AsyncFd<OwnedFd>> {
    let fd = fd?;
    match crate::sys::watch_readable(fd) {
        Ok(a) => Some(a),
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch a descriptor; the loop looks at every pass");
            None
        }
    }
}

impl Runner {
    /// Runs the reconcile loop until `shutdown` turns true (after the
    /// start-up pass, which the server runs before it serves).
    pub fn spawn_loop(
        self: Arc<Self>,
        shutdown: watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move { self.run_loop(shutdown).await })
    }

    async fn run_loop(&self, mut shutdown: watch::Receiver<bool>) {
        let mut runs = self.store.subscribe(Written::Runs);
        let mut launches = self.launches.subscribe();
        let panes = watched(self.reconciler.panes.lock().expect("poisoned").descriptor());
        let logs = watched(self.screen_check.descriptor());
        let every = self.cfg.reconcile_every;
        let mut last_pass = Instant::now();
        let mut last_usage = Instant::now() - USAGE_EVERY;
        let mut last_expiry = Instant::now();
        // A full pass first: the start-up pass may be a while ago.
        let mut full = true;
        let mut soon = true;
        loop {
            // When a pass is due without an event, and when the other work.
            let view = self.reconciler.view();
            let mut pass_at = None::<Instant>;
            let mut due = |t: Instant| pass_at = Some(pass_at.map_or(t, |p| p.min(t)));
            if full || soon || view.is_none() || panes.is_none() {
                due(last_pass + every);
            }
            if let Some(v) = &view {
                due(v.at + FULL_EVERY);
                due(v.panes_at + PANES_EVERY);
            }
            let mut at = last_expiry + RETENTION_EVERY;
            if let Some(p) = pass_at {
                at = at.min(p);
            }
            if let Some(due) = self.usage.next_due() {
                at = at.min(due.max(last_usage + USAGE_EVERY));
            }
            let woke = tokio::select! {
                biased;
                _ = shutdown.changed() => Woke::Shutdown,
                _ = runs.changed() => Woke::Changed,
                _ = launches.changed() => Woke::Changed,
                _ = self.pane_ended(panes.as_ref()) => Woke::Changed,
                _ = log_written(logs.as_ref()) => Woke::Looked,
                _ = self.screen_check.asked() => Woke::Looked,
                _ = sleep_until(at.into()) => Woke::Time,
            };
            if woke == Woke::Shutdown || *shutdown.borrow() {
                break;
            }
            full |= woke == Woke::Changed;
            // A timer for the usage pass or the retention alone: no pass.
            let pass_now = woke != Woke::Time || pass_at.is_some_and(|p| p <= Instant::now());
            if pass_now {
                match self
                    .pass_after(&mut runs, &mut full, &mut last_pass, &mut shutdown)
                    .await
                {
                    Some(left) => soon = left,
                    None => break,
                }
            }
            if last_usage.elapsed() >= USAGE_EVERY
                && self
                    .usage
                    .next_due()
                    .is_some_and(|due| due <= Instant::now())
            {
                last_usage = Instant::now();
                if let Err(e) = self.tally_usage().await {
                    tracing::warn!(error = %e, "usage pass failed");
                }
            }
            if last_expiry.elapsed() >= RETENTION_EVERY {
                last_expiry = Instant::now();
                if let Err(e) = self.expire_workspaces().await {
                    tracing::warn!(error = %e, "workspace retention failed");
                }
            }
        }
    }

    /// One pass, at least `reconcile_every` after the last: a full one when
    /// `full` (or what the last one left says so), else a screens pass.
    /// Whether it left something to look at soon; `None` on shutdown.
    async fn pass_after(
        &self,
        runs: &mut watch::Receiver<u64>,
        full: &mut bool,
        last_pass: &mut Instant,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<bool> {
        let every = self.cfg.reconcile_every;
        {
            // Passes at least `every` apart: a burst costs one pass.
            let gap = *last_pass + every;
            if Instant::now() < gap {
                tokio::select! {
                    _ = shutdown.changed() => {}
                    _ = sleep_until(gap.into()) => {}
                }
                if *shutdown.borrow() {
                    return None;
                }
            }
        }
        // Writes while waiting out the gap are in this pass.
        if runs.has_changed().unwrap_or(false) {
            runs.mark_unchanged();
            *full = true;
        }
        *last_pass = Instant::now();
        let view = self.reconciler.view();
        let full_due = *full
            || view
                .as_ref()
                .is_none_or(|v| !v.settled || v.panes_at.elapsed() >= PANES_EVERY)
            || self.launches.any()
            || self.reconciler.panes.lock().expect("poisoned").any_ended();
        let recheck = view.as_ref().is_some_and(|v| v.at.elapsed() >= FULL_EVERY);
        let pass = if full_due {
            self.reconcile(false).await
        } else {
            self.screens_pass(recheck).await
        };
        *full = false;
        Some(match pass {
            Ok(report) => report.soon,
            Err(e) => {
                tracing::warn!(error = %e, "reconcile pass failed");
                *full = true;
                true
            }
        })
    }

    /// Resolves when a watched pane's process ended (never without the
    /// epoll set: the loop then looks at every pass).
    async fn pane_ended(&self, fd: Option<&AsyncFd<OwnedFd>>) {
        let Some(fd) = fd else {
            return pending().await;
        };
        loop {
            let Ok(mut ready) = fd.readable().await else {
                return pending().await;
            };
            if self.reconciler.panes.lock().expect("poisoned").any_ended() {
                return;
            }
            // Nothing ended (a process left the set since): wait again.
            ready.clear_ready();
        }
    }
}

/// Resolves when the inotify queue has events (never without it: every log
/// is then sized at every pass). The pass that follows drains the queue;
/// the readiness is cleared first, so an event after the drain wakes the
/// loop again.
async fn log_written(fd: Option<&AsyncFd<OwnedFd>>) {
    let Some(fd) = fd else {
        return pending().await;
    };
    match fd.readable().await {
        Ok(mut ready) => ready.clear_ready(),
        Err(_) => pending().await,
    }
}
