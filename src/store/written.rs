//! The store announces its writes: each kind of row this process writes
//! (runs, AFK claims, the notification outbox, the settings) has a count on
//! a `tokio::sync::watch` channel, bumped once the write is over (or has
//! failed). A loop that must act on such a write awaits
//! [`Store::subscribe`]'s receiver instead of waking on a clock to compare
//! counters (ADR 28). Other nodes' writes are not announced here: what
//! depends on them keeps a backstop timeout.

use tokio::sync::watch;

use super::Store;

/// A kind of row whose writes the store announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// Runs (their states, places, usage rows' runs), and the outbox rows
    /// a run's state change queues in the same transaction.
    Runs,
    /// AFK claims.
    Claims,
    /// The notification outbox, outside the runs' own writes.
    Outbox,
    /// The global settings, the per-provider defaults and the AFK pause.
    Settings,
}

/// One watch channel per [`Written`] kind.
#[derive(Debug)]
pub(super) struct Announcer {
    runs: watch::Sender<u64>,
    claims: watch::Sender<u64>,
    outbox: watch::Sender<u64>,
    settings: watch::Sender<u64>,
}

impl Default for Announcer {
    fn default() -> Self {
        Announcer {
            runs: watch::Sender::new(0),
            claims: watch::Sender::new(0),
            outbox: watch::Sender::new(0),
            settings: watch::Sender::new(0),
        }
    }
}

impl Announcer {
    fn sender(&self, what: Written) -> &watch::Sender<u64> {
        match what {
            Written::Runs => &self.runs,
            Written::Claims => &self.claims,
            Written::Outbox => &self.outbox,
            Written::Settings => &self.settings,
        }
    }
}

/// A write in progress; announced when dropped, after the write or its
/// failure, so a reader woken by it reads what the write left.
pub(crate) struct CountedWrite<'a>(&'a watch::Sender<u64>);

impl Drop for CountedWrite<'_> {
    fn drop(&mut self) {
        // `send_modify` bumps the value even with no receiver left.
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Store {
    /// A receiver that changes after each write of this kind this process
    /// makes (through any clone of this store). Its value is the count of
    /// such writes so far.
    pub fn subscribe(&self, what: Written) -> watch::Receiver<u64> {
        self.written.sender(what).subscribe()
    }

    /// How many writes of this kind this process made so far.
    pub fn written(&self, what: Written) -> u64 {
        *self.written.sender(what).borrow()
    }

    /// Announces a write of this kind when the guard goes.
    pub(crate) fn writing(&self, what: Written) -> CountedWrite<'_> {
        CountedWrite(self.written.sender(what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_write_wakes_its_kind_only() {
        let store = Store::connect("sqlite::memory:").await.unwrap();
        let mut runs = store.subscribe(Written::Runs);
        let mut claims = store.subscribe(Written::Claims);
        runs.borrow_and_update();
        claims.borrow_and_update();
        drop(store.writing(Written::Runs));
        assert!(runs.has_changed().unwrap(), "a runs write is announced");
        assert!(!claims.has_changed().unwrap(), "not as a claims write");
        assert_eq!(*runs.borrow_and_update(), 1);
        assert_eq!(store.written(Written::Runs), 1);
        // A clone announces to the same receivers.
        let clone = store.clone();
        drop(clone.writing(Written::Runs));
        tokio::time::timeout(std::time::Duration::from_secs(1), runs.changed())
            .await
            .expect("woken")
            .unwrap();
        assert_eq!(*runs.borrow(), 2);
    }
}
