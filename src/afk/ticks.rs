//! Tick and claims: one tick (or settle) at a time on this node, how many
//! were done, the repos whose forge asked lab to wait, and the pace the
//! last settle set for the loop (`wakes.rs`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// What the last settle found, and so what wakes the loop for the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pace {
    /// Nothing of this node's to follow or tell: a claims write, or the
    /// backstop.
    #[default]
    Quiet,
    /// Live AFK runs, none followed yet: a runs or claims write, the first
    /// time limit among them (ms), or the backstop.
    Watch { until_ms: Option<i64> },
    /// A claim is followed (its pull request, a usage limit, an agent that
    /// waits, its issue to tell, a lost run resumed): every second, as its
    /// follow-up tasks (and a screen that changes) write nothing that could
    /// wake the loop.
    Follow,
}

impl Pace {
    /// The pace of two claims' needs together: the more attentive.
    pub fn and(self, other: Pace) -> Pace {
        match (self, other) {
            (Pace::Follow, _) | (_, Pace::Follow) => Pace::Follow,
            (Pace::Watch { until_ms: a }, Pace::Watch { until_ms: b }) => Pace::Watch {
                until_ms: match (a, b) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                },
            },
            (w @ Pace::Watch { .. }, Pace::Quiet) | (Pace::Quiet, w @ Pace::Watch { .. }) => w,
            (Pace::Quiet, Pace::Quiet) => Pace::Quiet,
        }
    }
}

#[derive(Debug, Default)]
pub struct Ticks {
    /// One tick or settle at a time on this node.
    one: tokio::sync::Mutex<()>,
    ticks: AtomicU64,
    settles: AtomicU64,
    /// Repos whose forge asked lab to wait, until when.
    backoff: Mutex<HashMap<i64, Instant>>,
    pace: Mutex<Pace>,
}

impl Ticks {
    /// Holds the others off while a tick or a settle runs.
    pub async fn one_at_a_time(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.one.lock().await
    }

    pub fn ticked(&self) {
        self.ticks.fetch_add(1, Ordering::Relaxed);
    }

    pub fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }

    /// A settle is over, and found `pace`.
    pub fn settled(&self, pace: Pace) {
        *self.pace.lock().expect("poisoned") = pace;
        self.settles.fetch_add(1, Ordering::Relaxed);
    }

    pub fn settles(&self) -> u64 {
        self.settles.load(Ordering::Relaxed)
    }

    /// What the last settle found.
    pub fn pace(&self) -> Pace {
        *self.pace.lock().expect("poisoned")
    }

    /// Whether the forge of repo `id` asked lab to wait still.
    pub fn backing_off(&self, id: i64, now: Instant) -> bool {
        self.backoff
            .lock()
            .expect("poisoned")
            .get(&id)
            .is_some_and(|until| now < *until)
    }

    /// The forge of repo `id` asked lab to wait until `until`.
    pub fn back_off(&self, id: i64, until: Instant) {
        self.backoff.lock().expect("poisoned").insert(id, until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_more_attentive_pace_wins() {
        let w = |t| Pace::Watch { until_ms: t };
        assert_eq!(Pace::Quiet.and(Pace::Quiet), Pace::Quiet);
        assert_eq!(Pace::Quiet.and(w(None)), w(None));
        assert_eq!(w(Some(5)).and(w(Some(3))), w(Some(3)));
        assert_eq!(w(None).and(w(Some(3))), w(Some(3)));
        assert_eq!(w(Some(3)).and(Pace::Follow), Pace::Follow);
        assert_eq!(Pace::Follow.and(Pace::Quiet), Pace::Follow);
    }
}
