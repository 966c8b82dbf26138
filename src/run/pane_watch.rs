//! The pane processes of this node's live runs, watched by the kernel: a
//! pidfd for each (readable once its process ended), all of them in one
//! epoll set, so that the reconcile loop awaits one descriptor however many
//! runs there are (ADR 30).
//!
//! A pane's process is the exec shim; it ends when its agent does, when its
//! session is killed, and with the tmux server (the pane's terminal hangs
//! up), so every way a run's session can end shows as a pidfd that turned
//! readable. Host side of the trust boundary: a pid is tmux's word about
//! its pane (lab's own tmux server), checked against the process's start
//! time; nothing of a run's is read here.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;

use rustix::event::Timespec;
use rustix::event::epoll::{self, CreateFlags, EventData, EventFlags};

use super::proctree;

/// The most pidfds lab holds: past them, a process is watched by its start
/// time (a read of `/proc` at every pass while there are such), so that
/// runs never take the descriptors lab's requests need.
const MAX_PIDFDS: usize = 4096;

/// A watched pane process: its pidfd (in the epoll set), or its start time
/// where no pidfd could be had.
enum Watch {
    /// Held, not read: closing it takes it out of the epoll set.
    Fd {
        _pidfd: OwnedFd,
    },
    Start(u64),
}

/// The pane processes being watched, by pid, and the epoll set of their
/// pidfds.
pub(super) struct PaneWatch {
    /// `None` where epoll cannot be had: every process is then watched by
    /// its start time.
    epoll: Option<OwnedFd>,
    watched: HashMap<i64, Watch>,
}

impl Default for PaneWatch {
    fn default() -> Self {
        PaneWatch {
            epoll: epoll::create(CreateFlags::CLOEXEC).ok(),
            watched: HashMap::new(),
        }
    }
}

impl PaneWatch {
    /// Watches exactly these pids (the live panes of the last full pass).
    pub(super) fn keep(&mut self, pids: &[i64]) {
        // Dropping a pidfd closes it, which takes it out of the epoll set
        // (no other descriptor shares its open file).
        self.watched.retain(|pid, _| pids.contains(pid));
        for &pid in pids {
            if self.watched.contains_key(&pid) {
                continue;
            }
            let Some(start) = proctree::start_time(pid) else {
                continue;
            };
            let fds = self
                .watched
                .values()
                .filter(|w| matches!(w, Watch::Fd { .. }))
                .count();
            let fd = (fds < MAX_PIDFDS).then(|| self.pidfd(pid)).flatten();
            let watch = match fd {
                // The pid was the same process before and after the open.
                Some(fd) if proctree::start_time(pid) == Some(start) => Watch::Fd { _pidfd: fd },
                _ => Watch::Start(start),
            };
            self.watched.insert(pid, watch);
        }
    }

    /// A pidfd for `pid` in the epoll set, close-on-exec.
    fn pidfd(&self, pid: i64) -> Option<OwnedFd> {
        use rustix::process::{Pid, PidfdFlags, pidfd_open};
        let epoll = self.epoll.as_ref()?;
        let raw = Pid::from_raw(i32::try_from(pid).ok()?)?;
        let fd = pidfd_open(raw, PidfdFlags::empty()).ok()?;
        let data = EventData::new_u64(u64::try_from(pid).ok()?);
        epoll::add(epoll, &fd, data, EventFlags::IN).ok()?;
        Some(fd)
    }

    /// The epoll set's descriptor, for the loop to await (a duplicate:
    /// the loop's registration with the runtime keeps it).
    pub(super) fn descriptor(&self) -> Option<OwnedFd> {
        self.epoll.as_ref()?.try_clone().ok()
    }

    /// Whether a watched process ended: a pidfd is readable, or a process
    /// watched by its start time is gone (or is another one now).
    pub(super) fn any_ended(&self) -> bool {
        let by_start = self.watched.iter().any(|(pid, w)| match w {
            Watch::Start(s) => proctree::start_time(*pid) != Some(*s),
            Watch::Fd { .. } => false,
        });
        if by_start {
            return true;
        }
        let Some(epoll) = &self.epoll else {
            return false;
        };
        let mut events = [MaybeUninit::<epoll::Event>::uninit(); 1];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        epoll::wait(epoll, &mut events, Some(&now)).is_ok_and(|(ready, _)| !ready.is_empty())
    }

    /// Whether some process is watched by its start time, which no event
    /// announces: the loop then looks at every pass.
    pub(super) fn polled(&self) -> bool {
        self.watched.values().any(|w| matches!(w, Watch::Start(_)))
    }

    /// Whether exactly these pids are watched.
    #[cfg(test)]
    fn watches(&self, pids: &[i64]) -> bool {
        self.watched.len() == pids.len() && pids.iter().all(|p| self.watched.contains_key(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that lives until killed, and its pid.
    fn sleeper() -> (std::process::Child, i64) {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = i64::from(child.id());
        (child, pid)
    }

    #[test]
    fn an_ended_process_makes_the_set_readable() {
        let (mut a, pa) = sleeper();
        let (mut b, pb) = sleeper();
        let mut w = PaneWatch::default();
        w.keep(&[pa, pb]);
        assert!(w.watches(&[pa, pb]));
        assert!(
            matches!(w.watched.get(&pa), Some(Watch::Fd { .. })),
            "a pidfd"
        );
        assert!(!w.any_ended() && !w.polled());
        b.kill().unwrap();
        b.wait().unwrap();
        assert!(w.any_ended(), "one of two ended");
        // Dropped from the set, the ended one is no longer seen.
        w.keep(&[pa]);
        assert!(!w.any_ended());
        a.kill().unwrap();
        a.wait().unwrap();
        assert!(w.any_ended());
        w.keep(&[]);
        assert!(!w.any_ended() && w.watched.is_empty());
    }

    #[test]
    fn past_the_pidfds_a_start_time_tells_the_same() {
        let (mut child, pid) = sleeper();
        let mut w = PaneWatch::default();
        w.watched
            .insert(pid, Watch::Start(proctree::start_time(pid).unwrap()));
        assert!(w.polled());
        assert!(!w.any_ended());
        // Another process under the same pid would have another start.
        w.watched.insert(pid, Watch::Start(1));
        assert!(w.any_ended());
        w.watched
            .insert(pid, Watch::Start(proctree::start_time(pid).unwrap()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(w.any_ended());
    }

    #[tokio::test]
    async fn the_loop_is_woken_by_a_process_s_end() {
        let (mut child, pid) = sleeper();
        let mut w = PaneWatch::default();
        w.keep(&[pid]);
        let fd = crate::sys::watch_readable(w.descriptor().unwrap()).unwrap();
        use futures_util::FutureExt;
        assert!(fd.readable().now_or_never().is_none(), "nothing ended yet");
        child.kill().unwrap();
        child.wait().unwrap();
        let woken = tokio::time::timeout(std::time::Duration::from_secs(5), fd.readable()).await;
        assert!(woken.is_ok(), "woken by the end");
        assert!(w.any_ended());
    }
}
