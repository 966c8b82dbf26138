//! The AFK loop and what wakes it. It waits, never polling a counter, for
//! the first of:
//!
//! - the next tick (`afk.tick_seconds` after the last);
//! - a settings write of this process (`Written::Settings`): a changed
//!   `tick_seconds` moves the next tick at once, and resuming the paused
//!   scheduler ticks at once;
//! - a claims write (a claim taken, its pull request opened, its checks
//!   noted), and while this node has live AFK runs, a runs write (a run
//!   ended, its agent's state or usage changed): a settle, no sooner than
//!   [`WRITE_GAP`] after the last, so a burst of writes settles once;
//! - the pace the last settle found (`ticks::Pace`): every second while a
//!   claim is followed (its follow-up tasks write nothing that could wake
//!   the loop), the first live run's time limit, and at most
//!   [`QUIET_SETTLE`] apart otherwise (other nodes' writes, a claim written
//!   by hand, another node's change of the settings).
//!
//! **Invariant:** the receivers are marked seen before each settle reads, so
//! a write during a settle wakes the next one; nothing that lands between
//! two settles is lost.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::ticks::Pace;
use super::{QUIET_SETTLE, Scheduler};
use crate::store::{Written, now_ms};

/// How often a followed claim is settled, and how soon after the last
/// settle a write makes the next.
pub const WRITE_GAP: Duration = Duration::from_secs(1);

/// What the loop knows of the settings.
struct Schedule {
    every: Duration,
    paused: bool,
}

/// Why the loop woke.
enum Wake {
    Stop,
    Tick,
    Settings,
    Written,
    Settle,
}

impl Scheduler {
    /// The time between two ticks, as the settings say (a cached read).
    async fn tick_every(&self) -> Duration {
        let secs = self
            .runner
            .store()
            .settings()
            .await
            .map(|s| s.afk.tick_seconds)
            .unwrap_or(30);
        Duration::from_secs(secs.max(1) as u64)
    }

    async fn schedule(&self) -> Schedule {
        Schedule {
            every: self.tick_every().await,
            paused: self.runner.store().afk_paused().await.unwrap_or(false),
        }
    }

    /// Runs the scheduler until `shutdown`: a tick every `tick_seconds`,
    /// settles between them as their events come (see the module's doc).
    pub fn spawn_loop(
        self: Arc<Self>,
        mut shutdown: watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let store = self.runner.store().clone();
            let mut settings = store.subscribe(Written::Settings);
            let mut runs = store.subscribe(Written::Runs);
            let mut claims = store.subscribe(Written::Claims);
            settings.borrow_and_update();
            let mut schedule = self.schedule().await;
            let mut last_tick = Instant::now();
            let mut last_settle = Instant::now();
            // A write seen since the last settle: the next one is due. The
            // first comes a second after the start (live runs re-adopted).
            let mut written = true;
            loop {
                let pace = self.ticks.pace();
                let settle_at = if written {
                    last_settle + WRITE_GAP
                } else {
                    settle_due(pace, last_settle)
                };
                let wake = tokio::select! {
                    r = shutdown.changed() => {
                        if r.is_err() || *shutdown.borrow() { Wake::Stop } else { continue }
                    }
                    _ = tokio::time::sleep_until(last_tick + schedule.every) => Wake::Tick,
                    r = settings.changed() => match r {
                        Ok(()) => Wake::Settings,
                        Err(_) => Wake::Stop,
                    },
                    _ = a_write(&mut claims, &mut runs, pace != Pace::Quiet), if !written => Wake::Written,
                    _ = tokio::time::sleep_until(settle_at) => Wake::Settle,
                };
                match wake {
                    Wake::Stop => break,
                    Wake::Written => {
                        written = true;
                        continue;
                    }
                    Wake::Settings => {
                        settings.borrow_and_update();
                        let was_paused = schedule.paused;
                        schedule = self.schedule().await;
                        let resumed = was_paused && !schedule.paused;
                        if !resumed {
                            // A changed tick: the next comes at its new time
                            // (at once when that has passed).
                            continue;
                        }
                        // Resumed: the next tick is now.
                    }
                    Wake::Tick | Wake::Settle => {}
                }
                claims.borrow_and_update();
                runs.borrow_and_update();
                written = false;
                if matches!(wake, Wake::Settle) {
                    self.settle_now().await;
                } else {
                    last_tick = Instant::now();
                    let r = self.tick().await;
                    for e in r.errors {
                        tracing::warn!(error = %e, "AFK tick");
                    }
                }
                last_settle = Instant::now();
                // Another node's change of `tick_seconds` shows here.
                schedule.every = self.tick_every().await;
            }
        })
    }
}

/// When the next settle is due at `pace`, without a write.
fn settle_due(pace: Pace, last: Instant) -> Instant {
    let backstop = last + QUIET_SETTLE;
    match pace {
        Pace::Follow => last + WRITE_GAP,
        Pace::Quiet | Pace::Watch { until_ms: None } => backstop,
        Pace::Watch { until_ms: Some(at) } => {
            // Never sooner than a second after the last (a run lab could
            // not end at its limit is tried again, not at once forever).
            let wait = Duration::from_millis((at - now_ms()).max(0) as u64);
            backstop.min((Instant::now() + wait).max(last + WRITE_GAP))
        }
    }
}

/// A claims write, or (`runs_too`) a runs write, of this process. A closed
/// channel (the store gone) never wakes.
async fn a_write(
    claims: &mut watch::Receiver<u64>,
    runs: &mut watch::Receiver<u64>,
    runs_too: bool,
) {
    let woke = tokio::select! {
        r = claims.changed() => r.is_ok(),
        r = runs.changed(), if runs_too => r.is_ok(),
    };
    if !woke {
        std::future::pending::<()>().await;
    }
}
