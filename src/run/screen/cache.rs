//! The emulators of runs someone looked at lately: one per run, fed from
//! where it stopped, dropped after [`IDLE`] unseen or when more than
//! [`KEEP`] are kept (the least recently seen first). A run nobody looks at
//! costs nothing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Emulator;

/// How long an emulator nobody asked for is kept.
pub const IDLE: Duration = Duration::from_secs(120);
/// Most emulators kept at once (each holds up to its scrollback).
pub const KEEP: usize = 16;

struct Slot {
    emu: Arc<tokio::sync::Mutex<Emulator>>,
    seen: Instant,
}

pub struct Screens {
    rows: u16,
    cols: u16,
    slots: Mutex<HashMap<i64, Slot>>,
}

impl Screens {
    /// Emulators `rows` × `cols`: the size of lab's panes.
    pub fn new(rows: u16, cols: u16) -> Screens {
        Screens {
            rows,
            cols,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// (rows, cols) of every emulator.
    pub fn size(&self) -> (u16, u16) {
        (self.rows, self.cols)
    }

    /// Emulators kept now.
    pub fn kept(&self) -> usize {
        self.slots.lock().expect("poisoned").len()
    }

    fn slot(&self, run: i64) -> Arc<tokio::sync::Mutex<Emulator>> {
        let now = Instant::now();
        let mut slots = self.slots.lock().expect("poisoned");
        slots.retain(|id, s| *id == run || now.duration_since(s.seen) < IDLE);
        while slots.len() >= KEEP && !slots.contains_key(&run) {
            let oldest = slots.iter().min_by_key(|(_, s)| s.seen).map(|(id, _)| *id);
            match oldest {
                Some(id) => slots.remove(&id),
                None => break,
            };
        }
        let slot = slots.entry(run).or_insert_with(|| Slot {
            emu: Arc::new(tokio::sync::Mutex::new(Emulator::new(self.rows, self.cols))),
            seen: now,
        });
        slot.seen = now;
        slot.emu.clone()
    }

    /// Runs `f` on `run`'s emulator once it has replayed all of `log`, off
    /// the async threads (a first replay of a long log takes a while).
    pub async fn with<R: Send + 'static>(
        &self,
        run: i64,
        log: PathBuf,
        f: impl FnOnce(&mut Emulator) -> R + Send + 'static,
    ) -> std::io::Result<R> {
        let mut emu = self.slot(run).lock_owned().await;
        tokio::task::spawn_blocking(move || {
            emu.catch_up(&log)?;
            Ok(f(&mut emu))
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Forgets a run's emulator (its log was removed).
    pub fn forget(&self, run: i64) {
        self.slots.lock().expect("poisoned").remove(&run);
    }
}
