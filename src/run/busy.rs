//! Runs that something is being done to right now (stopped, given a pull
//! request), so that a second caller is told so instead of doing it again.
//!
//! A run leaves the set when its [`BusyGuard`] is dropped, whatever ended
//! the work: a cancelled future (a client that hung up) cannot leave a run
//! marked for ever.

use std::collections::HashSet;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct RunSet(Mutex<HashSet<i64>>);

/// A run's place in a [`RunSet`], held while the work goes on.
#[derive(Debug)]
pub struct BusyGuard<'a> {
    set: &'a RunSet,
    id: i64,
}

impl RunSet {
    /// Marks `id`; `None` when it already is.
    pub fn enter(&self, id: i64) -> Option<BusyGuard<'_>> {
        // Not `then_some`: it would build (and drop, leaving the set) a
        // guard for a run that was already there.
        let fresh = self.0.lock().expect("poisoned").insert(id);
        fresh.then(|| BusyGuard { set: self, id })
    }

    pub fn contains(&self, id: i64) -> bool {
        self.0.lock().expect("poisoned").contains(&id)
    }
}

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        self.set.0.lock().expect("poisoned").remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_busy_until_its_guard_goes() {
        let set = RunSet::default();
        let g = set.enter(7).expect("free");
        assert!(set.contains(7));
        assert!(set.enter(7).is_none(), "entered twice");
        assert!(set.enter(8).is_some(), "another run is free");
        drop(g);
        assert!(!set.contains(7));
        assert!(set.enter(7).is_some());
    }

    #[tokio::test]
    async fn a_cancelled_future_lets_its_run_go() {
        let set = std::sync::Arc::new(RunSet::default());
        let s = set.clone();
        let task = tokio::spawn(async move {
            let _g = s.enter(1).unwrap();
            std::future::pending::<()>().await;
        });
        while !set.contains(1) {
            tokio::task::yield_now().await;
        }
        task.abort();
        let _ = task.await;
        assert!(!set.contains(1));
    }
}
