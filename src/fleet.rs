//! One lab across machines (issue 29), this node's part: it records itself
//! in the database and beats every [`BEAT_MS`], saying where other nodes
//! reach it, its version and what it has to run agents with. A node whose
//! beat is older than [`DOWN_AFTER_MS`] is `down` to every node.
//!
//! Host side only: nothing here reads a run's data.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::domain::{BEAT_MS, Capacity, Node};
use crate::provider::ProviderId;
use crate::run::Runner;
use crate::store::now_ms;

/// What this node has now: its cores, the memory the kernel says is
/// available, the provider CLIs it finds.
pub fn capacity(runner: &Runner) -> Capacity {
    Capacity {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        memory_available_mb: crate::afk::admission::available_mb().unwrap_or(0).max(0) as u64,
        clis: ProviderId::all()
            .filter(|id| runner.binary_for(*id).is_ok())
            .map(|id| id.as_str().to_owned())
            .collect(),
    }
}

/// Beats until `stop` says so: once at once, then every [`BEAT_MS`]. A
/// beat the database refuses is logged and tried at the next.
pub fn spawn_beat(
    runner: Arc<Runner>,
    url: String,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let started = now_ms();
    tokio::spawn(async move {
        loop {
            let beat = Node {
                id: runner.node().to_owned(),
                url: url.clone(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                started_at: started,
                last_seen: now_ms(),
                draining: false,
                capacity: capacity(&runner),
            };
            if let Err(e) = runner.store().beat_node(&beat).await {
                tracing::warn!(error = %e, "could not record this node's beat");
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(BEAT_MS as u64)) => {}
                _ = stop.changed() => return,
            }
        }
    })
}
