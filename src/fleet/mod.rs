//! One lab across machines (issue 29), this node's part: it records itself
//! in the database and beats every [`BEAT_MS`] (more often under a short
//! down bound), saying where other nodes reach it, its version and what it
//! has to run agents with. A node whose beat is older than the bound
//! (`lab serve --node-down-after`, [`crate::domain::DOWN_AFTER_MS`] by
//! default) is `down`: after each beat this node makes that node's live
//! runs `lost` (`node down`) and takes its AFK claims over. `key` is how
//! nodes trust one another, `proxy` how any node serves every run.
//!
//! Host side only: nothing here reads a run's data.

pub mod key;
mod proxy;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

pub use proxy::{Fleet, Misplaced, Place, Start, StartElsewhere, Unanswered};

use crate::afk::Scheduler;
use crate::domain::{BEAT_MS, Capacity, NODE_DOWN, Node, NodeState};
use crate::provider::ProviderId;
use crate::run::Runner;
use crate::store::{StoreError, now_ms};

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

/// How often this node beats: every [`BEAT_MS`], or a third of the down
/// bound when that is shorter (a live node is never taken for down).
pub fn beat_every(down_after_ms: i64) -> Duration {
    Duration::from_millis(BEAT_MS.min(down_after_ms / 3).max(100) as u64)
}

/// One beat of this node, started at `started` (ms) and reached at `url`:
/// stamped with the database's clock, by which every node reads the beats
/// (nodes whose clocks differ still agree on which is down).
pub async fn beat(runner: &Runner, url: &str, started: i64) -> Result<(), StoreError> {
    let store = runner.store();
    let beat = Node {
        id: runner.node().to_owned(),
        url: url.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        started_at: started,
        last_seen: store.clock_ms().await?,
        draining: false,
        capacity: capacity(runner),
    };
    store.beat_node(&beat).await
}

/// Beats until `stop` says so: once at once, then every [`beat_every`],
/// each beat followed by a look at the nodes that are down. A beat the
/// database refuses is logged and tried at the next.
pub fn spawn_beat(
    runner: Arc<Runner>,
    scheduler: Arc<Scheduler>,
    url: String,
    started: i64,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let every = beat_every(runner.cfg().node_down_after_ms);
    tokio::spawn(async move {
        loop {
            if let Err(e) = beat(&runner, &url, started).await {
                tracing::warn!(error = %e, "could not record this node's beat");
            } else if let Err(e) = notice_down(&runner, &scheduler).await {
                tracing::warn!(error = %e, "could not look at the nodes that are down");
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.changed() => return,
            }
        }
    })
}

/// What the nodes that are down held: their live runs become `lost` with
/// [`NODE_DOWN`], their AFK claims go to this node (or to another that
/// looked first). This node never holds itself down.
pub async fn notice_down(runner: &Runner, scheduler: &Scheduler) -> Result<(), StoreError> {
    let store = runner.store();
    let now = now_ms();
    let down: Vec<Node> = store
        .nodes()
        .await?
        .into_iter()
        .filter(|n| {
            n.id != runner.node()
                && n.state(now, runner.cfg().node_down_after_ms) == NodeState::Down
        })
        .collect();
    if down.is_empty() {
        return Ok(());
    }
    let live = store.live_runs_by_node().await?;
    for node in down {
        if live.iter().any(|(id, n)| *id == node.id && *n > 0) {
            let lost = store.lose_runs_of_node(&node.id, NODE_DOWN).await?;
            if !lost.is_empty() {
                tracing::warn!(node = %node.id, runs = ?lost, "a lab node is down: its live runs are lost");
            }
        }
        scheduler.take_over(&node.id).await?;
    }
    Ok(())
}
