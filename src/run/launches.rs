//! Launches in flight, for the reconcile passes: a launch is counted as
//! pending until its run is recorded, then its run is marked launching until
//! the launch ends (its session made, or it failed). Reconcile leaves such
//! runs be: their session may not exist yet. When a launch ends the
//! reconcile loop is woken, since a launch that was dropped mid-way (a
//! client that hung up) writes nothing that would wake it and may leave a
//! run `starting` for the pass to adopt or fail.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::watch;

/// The launches of this node in flight. One owner: the map from run id to
/// how many starts of it are in flight goes only through these methods.
pub(super) struct Launches {
    /// Runs between their insert and their session. Counted: two resumes
    /// of one run may be in flight at once (one then loses), and the
    /// loser's end must not unmark the winner's.
    launching: Mutex<HashMap<i64, usize>>,
    /// Launches that have not yet recorded their run.
    pending: AtomicUsize,
    /// Bumped when a launch ends.
    ended: watch::Sender<u64>,
}

impl Default for Launches {
    fn default() -> Self {
        Launches {
            launching: Mutex::new(HashMap::new()),
            pending: AtomicUsize::new(0),
            ended: watch::Sender::new(0),
        }
    }
}

impl Launches {
    /// Whether `run` is being started now.
    pub(super) fn contains(&self, run: i64) -> bool {
        self.launching.lock().expect("poisoned").contains_key(&run)
    }

    /// Whether any launch is in flight (recorded or not).
    pub(super) fn any(&self) -> bool {
        self.pending() || !self.launching.lock().expect("poisoned").is_empty()
    }

    /// Whether a launch has not yet recorded its run (a session may show
    /// up whose run a pass cannot read yet).
    pub(super) fn pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst) > 0
    }

    /// The runs being started, as of now.
    pub(super) fn snapshot(&self) -> HashMap<i64, usize> {
        self.launching.lock().expect("poisoned").clone()
    }

    /// A receiver that changes when a launch ends.
    pub(super) fn subscribe(&self) -> watch::Receiver<u64> {
        self.ended.subscribe()
    }

    fn mark(&self, run: i64) {
        *self
            .launching
            .lock()
            .expect("poisoned")
            .entry(run)
            .or_default() += 1;
    }

    fn unmark(&self, run: i64) {
        let mut launching = self.launching.lock().expect("poisoned");
        if let Some(n) = launching.get_mut(&run) {
            *n -= 1;
            if *n == 0 {
                launching.remove(&run);
            }
        }
    }
}

/// A launch's marks: counted pending until its run is recorded, then its
/// run marked launching until the launch ends. Dropping the guard clears
/// both, however the launch ends: an error, or its request dropped mid-way.
/// A run left `starting` is then reconcile's to adopt (its session exists)
/// or fail (it does not).
pub(super) struct InFlight<'a> {
    launches: &'a Launches,
    pending: bool,
    run: Option<i64>,
}

impl<'a> InFlight<'a> {
    /// A new launch: pending until [`InFlight::recorded`].
    pub(super) fn new(launches: &'a Launches) -> Self {
        launches.pending.fetch_add(1, Ordering::SeqCst);
        InFlight {
            launches,
            pending: true,
            run: None,
        }
    }

    /// The start of a run recorded long before (a resume): marked launching
    /// at once, before its state changes.
    pub(super) fn of_run(launches: &'a Launches, id: i64) -> Self {
        launches.mark(id);
        InFlight {
            launches,
            pending: false,
            run: Some(id),
        }
    }

    /// The run is recorded (`Some`): mark it launching, then stop counting
    /// the launch as pending. `None`: the insert failed.
    pub(super) fn recorded(&mut self, id: Option<i64>) {
        if let Some(id) = id {
            self.launches.mark(id);
            self.run = Some(id);
        }
        self.unpend();
    }

    fn unpend(&mut self) {
        if std::mem::take(&mut self.pending) {
            self.launches.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.unpend();
        if let Some(id) = self.run {
            self.launches.unmark(id);
        }
        self.launches.ended.send_modify(|n| *n = n.wrapping_add(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_is_pending_then_launching_then_gone_and_its_end_announced() {
        let l = Launches::default();
        let mut ended = l.subscribe();
        let mut f = InFlight::new(&l);
        assert!(l.pending() && l.any() && !l.contains(7));
        f.recorded(Some(7));
        assert!(!l.pending() && l.contains(7));
        // A second start of the same run (a losing resume) ends first.
        let g = InFlight::of_run(&l, 7);
        drop(g);
        assert!(l.contains(7), "the first start still holds it");
        assert!(ended.has_changed().unwrap());
        ended.mark_unchanged();
        drop(f);
        assert!(!l.any() && !l.contains(7));
        assert!(ended.has_changed().unwrap(), "the end is announced");
        // A launch whose insert failed is no longer pending.
        let mut h = InFlight::new(&l);
        h.recorded(None);
        assert!(!l.any());
    }
}
