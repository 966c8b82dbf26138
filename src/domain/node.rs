//! One lab across machines (issue 29): a node as the fleet sees it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::spelled::spelled;

spelled! {
    /// Whether a node works: `up` (it beat lately), `down` (its last beat
    /// is older than [`DOWN_AFTER_MS`]), `draining` (up, and it takes no
    /// new launches).
    pub enum NodeState ("node state") {
        Up = "up",
        Down = "down",
        Draining = "draining",
    }
}

/// How often a node beats.
pub const BEAT_MS: i64 = 5_000;
/// How old a node's last beat may be before it is `down`, unless
/// `lab serve --node-down-after` says otherwise.
pub const DOWN_AFTER_MS: i64 = 30_000;

/// The reason of a run the fleet found `lost` because its node is down
/// (the contract's `node down`). The node, back, takes up a manual run
/// with exactly this reason whose session still lives.
pub const NODE_DOWN: &str =
    "node down: its lab node stopped beating; the run's session and workspace are on that machine";

/// What a node has to run agents with, as it said at its last beat.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Capacity {
    /// CPU cores it may use.
    pub cores: u32,
    /// Memory available to new runs (MiB), as the kernel says.
    pub memory_available_mb: u64,
    /// The provider CLIs it finds (`claude-code`, `codex`).
    pub clis: Vec<String>,
}

/// A node of the fleet, as the database holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    pub url: String,
    pub version: String,
    pub started_at: i64,
    pub last_seen: i64,
    pub draining: bool,
    pub capacity: Capacity,
}

impl Node {
    /// Its state at `now` (ms), `down` once its last beat is older than
    /// `down_after` (ms).
    pub fn state(&self, now: i64, down_after: i64) -> NodeState {
        if now - self.last_seen > down_after {
            NodeState::Down
        } else if self.draining {
            NodeState::Draining
        } else {
            NodeState::Up
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_down_once_its_beat_is_old() {
        let mut n = Node {
            id: "a".into(),
            url: "http://a".into(),
            version: "0".into(),
            started_at: 0,
            last_seen: 1_000,
            draining: false,
            capacity: Capacity::default(),
        };
        assert_eq!(n.state(1_000 + DOWN_AFTER_MS, DOWN_AFTER_MS), NodeState::Up);
        assert_eq!(
            n.state(1_001 + DOWN_AFTER_MS, DOWN_AFTER_MS),
            NodeState::Down
        );
        n.draining = true;
        assert_eq!(n.state(2_000, DOWN_AFTER_MS), NodeState::Draining);
        assert_eq!(
            n.state(1_001 + DOWN_AFTER_MS, DOWN_AFTER_MS),
            NodeState::Down
        );
    }
}
