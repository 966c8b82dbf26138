//! Waits on the counters `GET /api/v1/status` shows, for a server in the
//! test or a `lab serve` process alike: what a check that something did
//! *not* happen waits for instead of a quiet window (a stalled loop fails
//! it instead of passing it).

use serde_json::Value;

use super::api::Api;
use super::wait;

/// A counter of `/status`, by its path of keys.
fn count(status: &Value, path: &[&str]) -> u64 {
    path.iter()
        .fold(status, |v, k| &v[*k])
        .as_u64()
        .unwrap_or_else(|| panic!("/status has no counter {path:?}: {status}"))
}

impl Api {
    /// Waits until the counter at `path` of `/status` moved `n` past where
    /// it is now.
    pub async fn after_status_count(&self, path: &[&str], n: u64) {
        let from = count(&self.get("/api/v1/status").await.ok(), path);
        wait::until(
            format_args!("{n} more of {path:?} (from {from})"),
            wait::secs(30).every_ms(50),
            async || {
                let st = self.get("/api/v1/status").await.ok();
                let now = count(&st, path);
                if now >= from + n {
                    Ok(())
                } else {
                    Err(format!("{path:?} at {now}"))
                }
            },
        )
        .await;
    }

    /// Waits until this node's AFK loop finished `n` more ticks.
    pub async fn after_afk_ticks(&self, n: u64) {
        self.after_status_count(&["afk_ticks"], n).await;
    }

    /// Waits until the notification outbox is settled: no row pending (on
    /// any node), every attempt this node started ended. Nothing more is
    /// sent after it unless something new is queued.
    pub async fn outbox_settled(&self) {
        wait::until(
            "the notification outbox to settle",
            wait::secs(30).every_ms(50),
            async || {
                let st = self.get("/api/v1/status").await.ok();
                let n = &st["notifications"];
                let settled = n["pending"] == 0 && n["attempts"] == n["attempts_ended"];
                if settled { Ok(()) } else { Err(n.clone()) }
            },
        )
        .await;
    }
}
