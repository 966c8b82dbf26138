//! Delivering notifications (issue 13 §5, ADR 15): a loop on every node
//! that sends the outbox's due rows (`store/outbox.rs`) to their endpoints,
//! off every run's path.
//!
//! Each endpoint's rows go out one at a time, oldest first. A failed attempt
//! (no answer within [`TIMEOUT`], or an answer other than 2xx) is tried
//! again after `base`, then twice as long each time (with jitter, at most
//! [`MAX_DELAY`]); after [`ATTEMPTS`] attempts lab gives the row up and logs
//! it. A row is sent at least once: a node that dies between the endpoint's
//! answer and recording it sends it again after its lease.
//!
//! Invariant: an endpoint's URL and token never reach a log or a stored
//! error (reqwest's errors are stripped of their URL).

pub mod message;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::store::{Due, Store, Written, now_ms};

/// Most attempts of one notification.
pub const ATTEMPTS: i64 = 8;
/// How long an endpoint has to answer.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The longest wait between two attempts.
pub const MAX_DELAY: Duration = Duration::from_secs(300);
/// How long an attempt holds its row (longer than [`TIMEOUT`]).
const LEASE: Duration = Duration::from_secs(30);
/// How long settled rows are kept.
const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);

pub struct Notifier {
    store: Store,
    http: reqwest::Client,
    lab_url: String,
    /// The first retry's delay, and the shortest time between two reads of
    /// the outbox (at most a second).
    base: Duration,
    reads: AtomicU64,
    attempts: AtomicU64,
    ended: AtomicU64,
}

/// The longest the loop goes without reading the outbox (rows no write of
/// this process announces: another node's).
pub const BACKSTOP: Duration = Duration::from_secs(10);

/// What a read of the outbox leaves to do.
enum Next {
    /// It started attempts: read again at once (the rows after them).
    Again,
    /// Nothing was due: the first pending row comes due then (ms), if any.
    Due(Option<i64>),
    /// The outbox could not be read: again after the shortest gap.
    Failed,
}

/// What the notifier has done since lab started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Reads of the outbox.
    pub reads: u64,
    /// Attempts started (a row leased and sent).
    pub attempts: u64,
    /// Attempts over, their answer recorded (or its recording failed).
    pub ended: u64,
}

impl Notifier {
    pub fn new(store: Store, http: reqwest::Client, lab_url: &str, base: Duration) -> Notifier {
        Notifier {
            store,
            http,
            lab_url: lab_url.trim_end_matches('/').to_owned(),
            base,
            reads: AtomicU64::new(0),
            attempts: AtomicU64::new(0),
            ended: AtomicU64::new(0),
        }
    }

    /// Delivers until `stop` turns true. The loop reads the outbox, then
    /// waits for the first of: a write of this process to runs (whose
    /// trigger queues rows), to the outbox (an attempt's answer, a pull
    /// request's rows) or to AFK claims (an outcome an AFK run's end waits
    /// for); the first pending row's due time; or [`BACKSTOP`]. Two reads
    /// are at least `base` (at most a second) apart, so a burst of writes
    /// costs one read.
    pub fn spawn_loop(
        self: Arc<Self>,
        mut stop: watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        let gap = self.base.min(Duration::from_secs(1));
        tokio::spawn(async move {
            let mut runs = self.store.subscribe(Written::Runs);
            let mut outbox = self.store.subscribe(Written::Outbox);
            let mut claims = self.store.subscribe(Written::Claims);
            let mut pruned = 0;
            while !*stop.borrow() {
                // Seen before the read: a write during it wakes the next.
                runs.borrow_and_update();
                outbox.borrow_and_update();
                claims.borrow_and_update();
                let read_at = Instant::now();
                let next = self.look().await;
                if now_ms() - pruned > 3_600_000 {
                    pruned = now_ms();
                    if let Err(e) = self
                        .store
                        .prune_notifications(pruned - KEEP.as_millis() as i64)
                        .await
                    {
                        tracing::warn!(error = %e, "could not prune the notification outbox");
                    }
                }
                let due = match next {
                    Next::Again => continue,
                    Next::Failed => read_at + gap,
                    Next::Due(at) => {
                        let backstop = read_at + BACKSTOP;
                        match at {
                            None => backstop,
                            Some(at) => {
                                let wait = Duration::from_millis((at - now_ms()).max(0) as u64);
                                backstop.min(Instant::now() + wait).max(read_at + gap)
                            }
                        }
                    }
                };
                tokio::select! {
                    r = stop.changed() => if r.is_err() { break },
                    _ = tokio::time::sleep_until(due) => {}
                    woke = a_write(&mut runs, &mut outbox, &mut claims) => {
                        if !woke {
                            break;
                        }
                        // No sooner than `gap` after the last read.
                        tokio::select! {
                            r = stop.changed() => if r.is_err() { break },
                            _ = tokio::time::sleep_until(read_at + gap) => {}
                        }
                    }
                }
            }
        })
    }

    /// One read of the outbox: starts what is due; when nothing was, when
    /// the first pending row comes due.
    async fn look(self: &Arc<Self>) -> Next {
        self.reads.fetch_add(1, Ordering::Relaxed);
        match self.pass().await {
            Some(0) => match self.store.next_notification_at().await {
                Ok(at) => Next::Due(at),
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the notification outbox");
                    Next::Failed
                }
            },
            Some(_) => Next::Again,
            None => Next::Failed,
        }
    }

    /// What the notifier has done since lab started.
    pub fn counts(&self) -> Counts {
        Counts {
            reads: self.reads.load(Ordering::Relaxed),
            attempts: self.attempts.load(Ordering::Relaxed),
            ended: self.ended.load(Ordering::Relaxed),
        }
    }

    /// Starts an attempt for each due row this node could lease; how many
    /// (`None` when the outbox could not be read).
    /// Each attempt is a task of its own, so a slow endpoint holds up no
    /// other.
    pub async fn pass(self: &Arc<Self>) -> Option<usize> {
        let now = now_ms();
        let due = match self.store.due_notifications(now).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the notification outbox");
                return None;
            }
        };
        let mut started = 0;
        for d in due {
            let until = now + LEASE.as_millis() as i64;
            match self.store.lease_notification(d.id, now, until).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "could not lease a notification");
                    continue;
                }
            }
            started += 1;
            self.attempts.fetch_add(1, Ordering::Relaxed);
            let me = self.clone();
            tokio::spawn(async move {
                me.attempt(d).await;
                me.ended.fetch_add(1, Ordering::Relaxed);
            });
        }
        Some(started)
    }

    async fn attempt(&self, d: Due) {
        let run_url = format!("{}/runs/{}", self.lab_url, d.run_id);
        let sent = message::request(&self.http, &d, &run_url)
            .timeout(TIMEOUT)
            .send()
            .await;
        let error = match sent {
            Ok(resp) if resp.status().is_success() => None,
            Ok(resp) => Some(format!("the endpoint answered {}", resp.status())),
            Err(e) => Some(e.without_url().to_string()),
        };
        let attempts = d.attempts + 1;
        let done = match &error {
            None => self.store.notification_delivered(d.id).await,
            Some(err) => {
                let retry_at = (attempts < ATTEMPTS)
                    .then(|| now_ms() + delay(self.base, attempts).as_millis() as i64);
                if retry_at.is_none() {
                    tracing::warn!(
                        run = d.run_id,
                        event = %d.event,
                        endpoint = d.endpoint_id,
                        attempts,
                        error = %err,
                        "gave up on a notification"
                    );
                }
                self.store.notification_failed(d.id, err, retry_at).await
            }
        };
        if let Err(e) = done {
            tracing::warn!(error = %e, "could not record a notification attempt");
        }
    }
}

/// A write of this process to runs, the outbox or AFK claims; false when
/// the store is gone (no write will come).
async fn a_write(
    runs: &mut watch::Receiver<u64>,
    outbox: &mut watch::Receiver<u64>,
    claims: &mut watch::Receiver<u64>,
) -> bool {
    tokio::select! {
        r = runs.changed() => r.is_ok(),
        r = outbox.changed() => r.is_ok(),
        r = claims.changed() => r.is_ok(),
    }
}

/// What one endpoint said to a test notification.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct TestSent {
    /// The endpoint's URL, redacted as lab shows it.
    pub url: String,
    /// The HTTP status it answered; `null` when it did not answer.
    pub status: Option<u16>,
    /// Why the test did not go through (no answer, or not a 2xx), else
    /// `null`.
    pub error: Option<String>,
}

impl Notifier {
    /// Sends a test notification to every configured endpoint at once
    /// (each within [`TIMEOUT`]) and says what each answered. Nothing is
    /// queued or retried.
    pub async fn send_test(&self) -> Result<Vec<TestSent>, crate::store::StoreError> {
        let endpoints = self.store.notifications().await?;
        let sends = endpoints.iter().map(|e| async move {
            let sent = message::test_request(&self.http, e, &self.lab_url)
                .timeout(TIMEOUT)
                .send()
                .await;
            let (status, error) = match sent {
                Ok(r) if r.status().is_success() => (Some(r.status().as_u16()), None),
                Ok(r) => (
                    Some(r.status().as_u16()),
                    Some(format!("the endpoint answered {}", r.status())),
                ),
                Err(err) => (None, Some(err.without_url().to_string())),
            };
            TestSent {
                url: e.redacted_url(),
                status,
                error,
            }
        });
        Ok(futures_util::future::join_all(sends).await)
    }
}

/// The wait after the `attempts`-th failed attempt: `base`·2^(attempts−1),
/// at most [`MAX_DELAY`], less up to a quarter at random (so endpoints that
/// failed together are not all retried at once).
pub fn delay(base: Duration, attempts: i64) -> Duration {
    let exp = attempts.clamp(1, 20) as u32 - 1;
    let full = base.saturating_mul(2u32.saturating_pow(exp)).min(MAX_DELAY);
    let jitter = getrandom::u32().unwrap_or(0) % 1000;
    full.saturating_sub(full / 4 * jitter / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_with_jitter_up_to_a_cap() {
        let base = Duration::from_secs(1);
        for (n, full) in [(1, 1), (2, 2), (3, 4), (8, 128), (12, 300)] {
            let d = delay(base, n);
            let full = Duration::from_secs(full);
            assert!(d <= full && d >= full * 3 / 4, "{n}: {d:?}");
        }
    }
}
