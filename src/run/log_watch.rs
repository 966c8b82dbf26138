//! Which runs' logs were written since the screen check last sized them,
//! from one inotify descriptor, so that a pass over a hundred quiet runs
//! reads one empty queue instead of a hundred file sizes.
//!
//! Each log gets a one-shot `IN_MODIFY` watch when its size is read (the
//! watch first, then the size: a write in between shows as both). The
//! kernel queues one event at the log's next write and drops the watch, so
//! a busy log costs one event and one new watch per pass, not one per
//! write, and a quiet one costs nothing until it is written again. A log
//! without a watch (none could be added: no inotify, the user's watch limit,
//! no file yet; or the queue overflowed) is sized at every pass, as before.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

/// The logs being watched.
pub(super) struct LogWatch {
    fd: Option<OwnedFd>,
    /// Runs whose log has a watch that has not fired, by run: its watch.
    armed: HashMap<i64, i32>,
    /// The other way round.
    by_wd: HashMap<i32, i64>,
}

impl Default for LogWatch {
    fn default() -> Self {
        LogWatch {
            fd: inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok(),
            armed: HashMap::new(),
            by_wd: HashMap::new(),
        }
    }
}

impl LogWatch {
    /// Takes in what the kernel queued: the runs whose log was written lose
    /// their watch (and are sized at their next look).
    pub fn drain(&mut self) {
        let Some(fd) = &self.fd else { return };
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(fd, &mut buf);
        loop {
            let event = match reader.next() {
                Ok(e) => e,
                Err(Errno::INTR) => continue,
                // WOULDBLOCK: the queue is empty; anything else, the next
                // pass tries again (and sizes what it cannot trust).
                Err(_) => return,
            };
            let (wd, flags) = (event.wd(), event.events());
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                // Events were lost: trust no watch.
                self.armed.clear();
                continue;
            }
            let run = if flags.contains(ReadFlags::IGNORED) {
                // The watch is gone (it fired, the file went, or it was
                // removed): its number may be given to another.
                self.by_wd.remove(&wd)
            } else {
                self.by_wd.get(&wd).copied()
            };
            if let Some(run) = run
                && self.armed.get(&run) == Some(&wd)
            {
                self.armed.remove(&run);
            }
        }
    }

    /// The inotify descriptor (a duplicate), readable while events are
    /// queued: what the reconcile loop awaits.
    pub fn descriptor(&self) -> Option<OwnedFd> {
        self.fd.as_ref()?.try_clone().ok()
    }

    /// Whether `run`'s log was not written since its size was last read
    /// (after a [`drain`](Self::drain)).
    pub fn unchanged(&self, run: i64) -> bool {
        self.armed.contains_key(&run)
    }

    /// Watches `run`'s log for its next write; call before reading its
    /// size. Without a watch the run is sized at every look.
    pub fn arm(&mut self, run: i64, log: &Path) {
        let Some(fd) = &self.fd else { return };
        let flags = WatchFlags::MODIFY | WatchFlags::ONESHOT;
        if let Ok(wd) = inotify::add_watch(fd, log, flags) {
            self.armed.insert(run, wd);
            self.by_wd.insert(wd, run);
        }
    }

    /// Stops watching the logs of runs `keep` says no to.
    pub fn retain(&mut self, keep: impl Fn(i64) -> bool) {
        let gone: Vec<(i64, i32)> = self
            .armed
            .iter()
            .filter(|(run, _)| !keep(**run))
            .map(|(r, w)| (*r, *w))
            .collect();
        for (run, wd) in gone {
            self.armed.remove(&run);
            if let Some(fd) = &self.fd {
                // The kernel answers with IN_IGNORED, which forgets `wd`.
                let _ = inotify::remove_watch(fd, wd);
            }
        }
    }

    /// How many logs have a watch that has not fired.
    #[cfg(test)]
    fn armed(&self) -> usize {
        self.armed.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_write_after_arming_shows_once_and_a_quiet_log_stays_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.log"), dir.path().join("b.log"));
        std::fs::write(&a, b"x").unwrap();
        std::fs::write(&b, b"y").unwrap();
        let mut w = LogWatch::default();
        assert!(!w.unchanged(1), "never sized: not known unchanged");
        w.arm(1, &a);
        w.arm(2, &b);
        w.drain();
        assert!(w.unchanged(1) && w.unchanged(2));
        let mut f = std::fs::OpenOptions::new().append(true).open(&a).unwrap();
        f.write_all(b"more").unwrap();
        f.write_all(b"and more").unwrap();
        w.drain();
        assert!(!w.unchanged(1), "written after its watch");
        assert!(w.unchanged(2), "not written");
        // Armed again, it stays unchanged until the next write.
        w.arm(1, &a);
        w.drain();
        assert!(w.unchanged(1));
        f.write_all(b"!").unwrap();
        w.drain();
        assert!(!w.unchanged(1));
    }

    #[test]
    fn a_missing_log_or_a_forgotten_run_is_not_known_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.log");
        let mut w = LogWatch::default();
        w.arm(1, &dir.path().join("none.log"));
        assert!(!w.unchanged(1), "nothing to watch");
        std::fs::write(&a, b"x").unwrap();
        w.arm(2, &a);
        w.retain(|run| run != 2);
        w.drain();
        assert!(!w.unchanged(2));
        assert_eq!(w.armed(), 0);
        // The removed watch's IN_IGNORED was taken in; a new one works.
        w.arm(2, &a);
        std::fs::write(&a, b"y").unwrap();
        w.drain();
        assert!(!w.unchanged(2));
    }

    #[test]
    fn a_log_replaced_under_its_path_is_sized_again() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.log");
        std::fs::write(&a, b"x").unwrap();
        let mut w = LogWatch::default();
        w.arm(1, &a);
        std::fs::remove_file(&a).unwrap();
        w.drain();
        assert!(!w.unchanged(1), "its file went");
    }
}
