//! The agent's own terminal. The exec shim runs the agent on a pty pair of
//! its own; what the agent prints goes both to the pane (the shim's standard
//! output) and to the run's log, copied by the relay (`relay/`, ADR 22) or,
//! where there is none, by the shim itself; what is typed in the pane the
//! shim copies to the agent. So the tmux server writes no pipe per run
//! (`pipe-pane` cost it more than drawing the panes, at a hundred busy runs;
//! ADR 16).
//!
//! The pane's terminal is put in raw mode: keys pass as bytes, and the
//! agent's own terminal makes of them what a terminal does (Ctrl-C is its
//! SIGINT). Its size follows the pane's.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rustix::pty::{OpenptFlags, grantpt, ioctl_tiocgptpeer, openpt, unlockpt};
use rustix::termios::{
    OptionalActions, Termios, Winsize, tcgetattr, tcgetwinsize, tcsetattr, tcsetwinsize,
};

use crate::sys::{self, Signal};

/// A pty pair made for one agent.
pub struct Pty {
    master: OwnedFd,
    slave: OwnedFd,
}

fn size_of(fd: BorrowedFd<'_>) -> Option<Winsize> {
    tcgetwinsize(fd).ok()
}

impl Pty {
    /// A new pair, the size of the terminal `outer`; both ends
    /// close-on-exec (the child gets its end as its standard streams).
    pub fn open(outer: BorrowedFd<'_>) -> std::io::Result<Pty> {
        let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
        let master = openpt(flags)?;
        grantpt(&master)?;
        unlockpt(&master)?;
        let slave = ioctl_tiocgptpeer(&master, flags)?;
        if let Some(ws) = size_of(outer) {
            tcsetwinsize(&slave, ws)?;
        }
        Ok(Pty { master, slave })
    }

    /// Starts `cmd` with the pair's other end as its terminal: its standard
    /// streams, and its controlling terminal in a session of its own.
    pub fn spawn(&self, cmd: &mut Command) -> std::io::Result<Child> {
        let io = || -> std::io::Result<Stdio> { Ok(Stdio::from(self.slave.try_clone()?)) };
        cmd.stdin(io()?).stdout(io()?).stderr(io()?);
        sys::start_session_on(cmd, &self.slave);
        cmd.spawn()
    }

    /// Copies between the pane (`outer` in, standard output out) and the
    /// agent until the agent exits; its output also goes to `log`. Returns
    /// how it ended.
    ///
    /// The agent's output is handed to the relay listening at `relay` when
    /// there is one; when it lets go (the agent's terminal closed, or the
    /// relay ended), this shim copies what is left itself.
    ///
    /// Each direction is a thread blocked in `read` (no `poll`: at a hundred
    /// busy runs, polling both terminals before every read cost the shims
    /// more than the copying itself; ADR 16), and the pane's size follows
    /// through `SIGWINCH`, which a third thread waits for. This thread waits
    /// for the agent. A run doing nothing costs no wakeup at all.
    pub fn relay(
        self,
        outer: BorrowedFd<'static>,
        child: &mut Child,
        log: File,
        relay: Option<&std::path::Path>,
    ) -> std::io::Result<ExitStatus> {
        let Pty { master, slave } = self;
        // Only the agent keeps the other end: its exit (and its children's)
        // ends the output.
        drop(slave);
        let raw = Raw::set(outer);
        if let Some(ws) = size_of(outer) {
            let _ = tcsetwinsize(&master, ws);
        }
        // Blocked here, and in the threads started below (they inherit the
        // mask), so that only the size thread takes it. The agent was
        // started before and keeps its own mask.
        let winch = sys::block_in_thread(Signal::Winch);
        let handed = relay.and_then(|socket| {
            crate::run::relay::handoff::hand_over(socket, master.as_fd(), log.as_fd())
        });
        // The threads share the agent's terminal; it stays open until the
        // last of them ends (the output thread may read on after this
        // returns, until the process exits).
        let master = Arc::new(master);
        let (m_out, m_in) = (master.clone(), master.clone());
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let small = || std::thread::Builder::new().stack_size(STACK);
        small().spawn(move || {
            if let Some(conn) = handed {
                crate::run::relay::handoff::wait_released(conn);
            }
            copy_out(&m_out, log);
            let _ = done_tx.send(());
        })?;
        small().spawn(move || copy_in(outer, &m_in))?;
        if winch {
            small().spawn(move || follow_size(outer, &master))?;
        }
        let status = loop {
            match child.wait() {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        // What the agent printed last is read on until its terminal closes;
        // a child of the agent that keeps it open does not hold the run.
        let _ = done_rx.recv_timeout(DRAIN);
        drop(raw);
        Ok(status)
    }
}

/// Stack of each relay thread (they hold a pointer and a heap buffer).
const STACK: usize = 64 * 1024;

/// How long the agent's last output may take to arrive after it exited.
const DRAIN: Duration = Duration::from_millis(500);

/// The agent's output to the pane and the log, one write each, unbuffered:
/// both see the bytes at once. Ends when every holder of the agent's
/// terminal closed it (EIO).
fn copy_out(m: &OwnedFd, mut log: File) {
    let mut buf = vec![0u8; 64 * 1024];
    while let Some(bytes) = read(m.as_fd(), &mut buf) {
        if bytes.is_empty() {
            break;
        }
        write_all(rustix::stdio::stdout(), bytes);
        let _ = log.write_all(bytes);
    }
}

/// What is typed in the pane, to the agent's terminal. Ends when the pane's
/// terminal is gone (the agent's goes with it when this process ends: the
/// kernel hangs it up).
fn copy_in(outer: BorrowedFd<'_>, m: &OwnedFd) {
    let mut buf = vec![0u8; 4096];
    while let Some(bytes) = read(outer, &mut buf) {
        if bytes.is_empty() {
            break;
        }
        write_all(m.as_fd(), bytes);
    }
}

/// Blocks `SIGWINCH` in this thread and the threads it starts from now:
/// a helper thread of the shim must never take the pane's resize from the
/// thread that waits for it.
pub(super) fn block_winch() {
    sys::block_in_thread(Signal::Winch);
}

/// Gives the agent's terminal the pane's size each time the pane's changes
/// (tmux's resize sends `SIGWINCH` to the pane's foreground process group,
/// this shim).
fn follow_size(outer: BorrowedFd<'_>, m: &OwnedFd) {
    let mut last = size_of(outer);
    while sys::wait_for(Signal::Winch) {
        let now = size_of(outer);
        if let Some(ws) =
            now.filter(|w| last.is_none_or(|s| s.ws_row != w.ws_row || s.ws_col != w.ws_col))
        {
            let _ = tcsetwinsize(m, ws);
            last = now;
        }
    }
}

/// Reads once; `None` on an error (EIO at a closed terminal).
fn read<'b>(fd: BorrowedFd<'_>, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    loop {
        match rustix::io::read(fd, &mut *buf) {
            Ok(n) => return Some(&buf[..n]),
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return None,
        }
    }
}

fn write_all(fd: BorrowedFd<'_>, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return,
        }
    }
}

/// The pane's terminal in raw mode while the agent runs; restored after.
struct Raw {
    fd: BorrowedFd<'static>,
    saved: Option<Termios>,
}

impl Raw {
    fn set(fd: BorrowedFd<'static>) -> Raw {
        let saved = tcgetattr(fd).ok();
        if let Some(mut raw) = saved.clone() {
            raw.make_raw();
            let _ = tcsetattr(fd, OptionalActions::Now, &raw);
        }
        Raw { fd, saved }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        if let Some(t) = &self.saved {
            let _ = tcsetattr(self.fd, OptionalActions::Now, t);
        }
    }
}
