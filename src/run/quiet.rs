//! Quiet passes: what the reconcile loop does when nothing changed.
//!
//! A full pass (`reconcile.rs`) reads this node's runs from the database and
//! every pane from tmux (a client process). At a hundred idle runs that was
//! most of what lab cost each second, to learn that nothing had changed. So
//! the loop runs a full pass only when something may have: a write to runs
//! in this process (`Store::runs_generation`), a launch in flight, a pane's
//! process that ended, a pass that left something to look at again (a run
//! starting, a dead pane without its status), or what no counter here sees:
//! every [`FULL_EVERY`] the runs are read again (another node's write) and a
//! full pass follows when they changed, and every [`PANES_EVERY`] one lists
//! the panes (a session made by hand). In between, a quiet pass asks the
//! kernel, in one `poll` of a pidfd per pane process, whether any of them
//! ended, and reads the screens of runs whose output grew (`log_watch.rs`
//! says which), from what the last full pass read (ADR 23).
//!
//! A pane's process is the exec shim; it ends when its agent does, when its
//! session is killed, and with the tmux server (the pane's terminal hangs
//! up), so every way a run's session can end shows as a pidfd that turned
//! readable.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::reconcile::PassReport;
use super::tmux::Pane;
use super::{Runner, proctree};
use crate::domain::{Run, RunState};
use crate::store::StoreError;

/// The longest the loop goes without reading this node's runs.
pub const FULL_EVERY: Duration = Duration::from_secs(10);

/// The longest the loop goes without listing the panes. Between, a pass
/// due only to [`FULL_EVERY`] reads the runs and, when they are what the
/// last full pass read, goes on as a quiet one: the pidfds already said
/// every pane's process lives, and what only a listing shows (a session
/// made on lab's socket by hand, a stray) can wait this long.
pub const PANES_EVERY: Duration = Duration::from_secs(60);

/// What the last full pass read, for the quiet passes after it.
pub(super) struct Seen {
    /// `Store::runs_generation` before the pass read the runs.
    generation: u64,
    /// When the runs were read.
    at: Instant,
    /// When the panes were listed.
    panes_at: Instant,
    /// Whether the pass left nothing to look at again soon.
    settled: bool,
    runs: Arc<Vec<Run>>,
    panes: Arc<Vec<Pane>>,
}

/// A live pane's process: a pidfd (readable once it ended), or its start
/// time where a pidfd cannot be had.
enum Watch {
    Fd(OwnedFd),
    Start(u64),
}

/// The most pidfds lab holds: past them, a process is watched by its start
/// time (a read of `/proc`), so that runs never take the descriptors lab's
/// requests need (a soft limit of 1 024 is common).
const MAX_PIDFDS: usize = 256;

/// The pane processes being watched, by pid.
#[derive(Default)]
pub(super) struct Watches(HashMap<i64, Watch>);

impl Watches {
    /// Watches exactly these pids (the live panes of the last full pass).
    fn keep(&mut self, pids: &[i64]) {
        self.0.retain(|pid, _| pids.contains(pid));
        for &pid in pids {
            if self.0.contains_key(&pid) {
                continue;
            }
            let Some(start) = proctree::start_time(pid) else {
                continue;
            };
            let fds = self
                .0
                .values()
                .filter(|w| matches!(w, Watch::Fd(_)))
                .count();
            let fd = (fds < MAX_PIDFDS).then(|| pidfd(pid)).flatten();
            let watch = match fd {
                // The pid was the same process before and after the open.
                Some(fd) if proctree::start_time(pid) == Some(start) => Watch::Fd(fd),
                _ => Watch::Start(start),
            };
            self.0.insert(pid, watch);
        }
    }

    /// Whether every watched process still lives (and there is one for
    /// each of `pids`).
    fn all_alive(&self, pids: &[i64]) -> bool {
        if pids.iter().any(|p| !self.0.contains_key(p)) {
            return false;
        }
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let mut fds: Vec<PollFd<'_>> = Vec::new();
        for (pid, w) in &self.0 {
            match w {
                Watch::Fd(fd) => fds.push(PollFd::new(fd, PollFlags::IN)),
                Watch::Start(s) => {
                    if proctree::start_time(*pid) != Some(*s) {
                        return false;
                    }
                }
            }
        }
        if fds.is_empty() {
            return true;
        }
        // No wait: a pidfd turns readable when its process ended.
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        poll(&mut fds, Some(&now)).is_ok_and(|n| n == 0)
    }
}

/// A pidfd for `pid`, close-on-exec.
fn pidfd(pid: i64) -> Option<OwnedFd> {
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let pid = Pid::from_raw(i32::try_from(pid).ok()?)?;
    // pidfds are opened close-on-exec.
    pidfd_open(pid, PidfdFlags::empty()).ok()
}

impl Runner {
    /// One pass of the loop: a quiet one when nothing can have changed
    /// since the last full pass, else a full one.
    pub async fn pass(&self) -> Result<PassReport, StoreError> {
        if let Some(report) = self.quiet_pass().await? {
            return Ok(report);
        }
        self.reconcile(false).await
    }

    /// Remembers what a full pass read. `generation` is the store's count
    /// from before it read the runs.
    pub(super) fn remember(
        &self,
        generation: u64,
        runs: Vec<Run>,
        panes: Vec<Pane>,
        began: Instant,
    ) {
        let by_session: HashMap<&str, &Pane> =
            panes.iter().map(|p| (p.session.as_str(), p)).collect();
        let settled = self.exit_wait.lock().expect("poisoned").is_empty()
            && runs.iter().all(|r| {
                r.state != RunState::Starting
                    && by_session.get(r.session.as_str()).is_some_and(|p| !p.dead)
            });
        let pids: Vec<i64> = live_pids(&runs, &by_session);
        self.watches.lock().expect("poisoned").keep(&pids);
        *self.seen.lock().expect("poisoned") = Some(Seen {
            generation,
            at: began,
            panes_at: began,
            settled,
            runs: Arc::new(runs),
            panes: Arc::new(panes),
        });
    }

    /// A quiet pass, when one will do; `None` when a full pass is due.
    async fn quiet_pass(&self) -> Result<Option<PassReport>, StoreError> {
        let _one_at_a_time = self.pass_lock.lock().await;
        let began = Instant::now();
        let (runs, panes, recheck) = {
            let seen = self.seen.lock().expect("poisoned");
            let Some(seen) = seen.as_ref() else {
                return Ok(None);
            };
            let busy = self.pending.load(Ordering::SeqCst) > 0
                || !self.launching.lock().expect("poisoned").is_empty();
            if busy
                || !seen.settled
                || seen.generation != self.store.runs_generation()
                || seen.panes_at.elapsed() >= PANES_EVERY
            {
                return Ok(None);
            }
            let recheck = seen.at.elapsed() >= FULL_EVERY;
            (seen.runs.clone(), seen.panes.clone(), recheck)
        };
        let runs = if recheck {
            let generation = self.store.runs_generation();
            let now = self.store.active_runs(&self.cfg.node).await?;
            if now != *runs {
                return Ok(None);
            }
            if let Some(seen) = self.seen.lock().expect("poisoned").as_mut() {
                seen.generation = generation;
                seen.at = began;
            }
            runs
        } else {
            runs
        };
        let by_session: HashMap<&str, &Pane> =
            panes.iter().map(|p| (p.session.as_str(), p)).collect();
        let pids = live_pids(&runs, &by_session);
        if !self.watches.lock().expect("poisoned").all_alive(&pids) {
            return Ok(None);
        }
        let calls_before = self.tmux.calls();
        let mut report = PassReport {
            checked: runs.len(),
            ..PassReport::default()
        };
        self.watch_screens(&runs, &by_session, &mut report).await?;
        report.tmux_calls = self.tmux.calls() - calls_before;
        report.elapsed = began.elapsed();
        self.passes.fetch_add(1, Ordering::Relaxed);
        *self.last_pass.lock().expect("poisoned") = Some(report.clone());
        Ok(Some(report))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that lives until killed, and its pid.
    fn sleeper() -> (std::process::Child, i64) {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = i64::from(child.id());
        (child, pid)
    }

    #[test]
    fn a_pidfd_turns_readable_when_its_process_ends() {
        let (mut child, pid) = sleeper();
        let mut w = Watches::default();
        w.keep(&[pid]);
        assert!(matches!(w.0.get(&pid), Some(Watch::Fd(_))), "a pidfd");
        assert!(w.all_alive(&[pid]));
        assert!(!w.all_alive(&[pid, 999_999_999]), "an unwatched pid");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!w.all_alive(&[pid]));
        w.keep(&[]);
        assert!(w.0.is_empty());
    }

    #[test]
    fn past_the_pidfds_a_start_time_tells_the_same() {
        let (mut child, pid) = sleeper();
        let mut w = Watches::default();
        w.0.insert(pid, Watch::Start(proctree::start_time(pid).unwrap()));
        assert!(w.all_alive(&[pid]));
        // Another process under the same pid would have another start.
        w.0.insert(pid, Watch::Start(1));
        assert!(!w.all_alive(&[pid]));
        w.0.insert(pid, Watch::Start(proctree::start_time(pid).unwrap()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!w.all_alive(&[pid]));
    }
}
