//! The one way a test waits for something: look every so often until it is
//! there, and give up after a timeout, naming what it waited for and the
//! last thing it saw.
//!
//! ```text
//! let run = wait::until("run 3 to exit", wait::secs(10), async || {
//!     let r = s.get("/api/v1/runs/3").await.ok();
//!     if r["state"] == "exited" { Ok(r) } else { Err(r) }
//! })
//! .await;
//! ```

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How long to wait, and how often to look (every 50 ms unless told).
#[derive(Clone, Copy, Debug)]
pub struct Patience {
    timeout: Duration,
    every: Duration,
}

/// Waits up to `n` seconds.
pub fn secs(n: u64) -> Patience {
    Duration::from_secs(n).into()
}

/// Waits up to `n` milliseconds.
pub fn millis(n: u64) -> Patience {
    Duration::from_millis(n).into()
}

impl From<Duration> for Patience {
    fn from(timeout: Duration) -> Patience {
        Patience {
            timeout,
            every: Duration::from_millis(50),
        }
    }
}

impl Patience {
    /// Looks every `ms` milliseconds instead.
    pub fn every_ms(self, ms: u64) -> Patience {
        Patience {
            every: Duration::from_millis(ms),
            ..self
        }
    }
}

/// What one look found: the thing waited for, or not yet, with what it saw
/// instead when that is worth telling.
pub trait Look {
    type Found;
    fn found(self) -> Result<Self::Found, Option<String>>;
}

/// `Some(found)`, or `None`: not yet.
impl<T> Look for Option<T> {
    type Found = T;
    fn found(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

/// `Ok(found)`, or `Err(what was seen instead)`.
impl<T, E: Display> Look for Result<T, E> {
    type Found = T;
    fn found(self) -> Result<T, Option<String>> {
        self.map_err(|seen| Some(seen.to_string()))
    }
}

/// `true`: there.
impl Look for bool {
    type Found = ();
    fn found(self) -> Result<(), Option<String>> {
        if self { Ok(()) } else { Err(None) }
    }
}

/// Looks until `look` finds it, for as long as `patience` allows; `Err` holds
/// what the last look saw instead (when it said).
pub async fn within<L: Look>(
    patience: Patience,
    mut look: impl AsyncFnMut() -> L,
) -> Result<L::Found, Option<String>> {
    let deadline = Instant::now() + patience.timeout;
    loop {
        match look().await.found() {
            Ok(found) => return Ok(found),
            Err(seen) if Instant::now() >= deadline => return Err(seen),
            Err(_) => tokio::time::sleep(patience.every).await,
        }
    }
}

/// Looks until `look` finds it, and panics naming `what` (and what the last
/// look saw) when `patience` runs out.
pub async fn until<L: Look>(
    what: impl Display,
    patience: Patience,
    look: impl AsyncFnMut() -> L,
) -> L::Found {
    match within(patience, look).await {
        Ok(found) => found,
        Err(seen) => panic!(
            "gave up after {:?} waiting for {what}{}",
            patience.timeout,
            seen.map(|s| format!("; last seen:\n{s}"))
                .unwrap_or_default()
        ),
    }
}
