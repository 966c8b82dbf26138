//! What a run's workspace takes on disk, shown beside its limits.
//!
//! Host side, over the agent's files: a walk by `lstat` that follows no
//! link and opens no file, bounded in entries, cached for a while per run
//! (the run page and `GET /runs/{id}` ask; lists show what is cached).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most entries one walk visits; a larger workspace shows at least the
/// size counted so far.
const MAX_ENTRIES: u64 = 500_000;
/// How long a measure stands.
const FRESH: Duration = Duration::from_secs(30);

/// Bytes on disk of everything under `dir`, links not followed.
pub fn usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0u64;
    let mut seen = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return total;
            }
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            total = total.saturating_add(m.blocks().saturating_mul(512));
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    total
}

/// Measures per run, kept [`FRESH`].
#[derive(Default)]
pub struct DiskUse(Mutex<HashMap<i64, (Instant, u64)>>);

impl DiskUse {
    /// The last measure of run `id`'s workspace, if fresh.
    pub fn cached(&self, id: i64) -> Option<u64> {
        let m = self.0.lock().expect("poisoned");
        m.get(&id)
            .filter(|(at, _)| at.elapsed() < FRESH)
            .map(|(_, b)| *b)
    }

    /// Run `id`'s workspace's use, measured when the last measure is stale.
    pub async fn of(&self, id: i64, dir: &Path) -> Option<u64> {
        if let Some(b) = self.cached(id) {
            return Some(b);
        }
        if !dir.is_dir() {
            return None;
        }
        let d = dir.to_path_buf();
        let bytes = tokio::task::spawn_blocking(move || usage(&d)).await.ok()?;
        let mut m = self.0.lock().expect("poisoned");
        m.retain(|_, (at, _)| at.elapsed() < FRESH);
        m.insert(id, (Instant::now(), bytes));
        Some(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_counted_as_a_link_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("a")).unwrap();
        std::fs::write(ws.join("a/f"), vec![1u8; 64 * 1024]).unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![1u8; 4 << 20]).unwrap();
        std::os::unix::fs::symlink(&big, ws.join("link")).unwrap();
        std::os::unix::fs::symlink(dir.path(), ws.join("up")).unwrap();
        let n = usage(&ws);
        assert!(n >= 64 * 1024, "{n}");
        assert!(n < 1 << 20, "a link was followed: {n}");
    }
}
