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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// A pty pair made for one agent.
pub struct Pty {
    master: OwnedFd,
    slave: OwnedFd,
}

fn last_error<T>() -> std::io::Result<T> {
    Err(std::io::Error::last_os_error())
}

fn size_of(fd: RawFd) -> Option<libc::winsize> {
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes a winsize into the pointer given.
    (unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0).then_some(ws)
}

fn set_size(fd: RawFd, ws: &libc::winsize) {
    // SAFETY: TIOCSWINSZ reads a winsize from the pointer given.
    unsafe { libc::ioctl(fd, libc::TIOCSWINSZ, ws) };
}

impl Pty {
    /// A new pair, the size of the terminal `outer`.
    pub fn open(outer: RawFd) -> std::io::Result<Pty> {
        let (mut m, mut s) = (-1, -1);
        let ws = size_of(outer);
        let wsp = ws
            .as_ref()
            .map_or(std::ptr::null(), |w| w as *const libc::winsize);
        // SAFETY: openpty writes two descriptors; the name and termios
        // pointers may be null, the size is read when given.
        let r = unsafe {
            libc::openpty(
                &mut m,
                &mut s,
                std::ptr::null_mut(),
                std::ptr::null(),
                wsp as *mut libc::winsize,
            )
        };
        if r != 0 {
            return last_error();
        }
        // SAFETY: both descriptors were just opened and are owned here.
        let (master, slave) = unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) };
        for fd in [&master, &slave] {
            // SAFETY: setting FD_CLOEXEC on an open descriptor.
            unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        Ok(Pty { master, slave })
    }

    /// Starts `cmd` with the pair's other end as its terminal: its standard
    /// streams, and its controlling terminal in a session of its own.
    pub fn spawn(&self, cmd: &mut Command) -> std::io::Result<Child> {
        let slave = self.slave.as_raw_fd();
        let io = || -> std::io::Result<Stdio> { Ok(Stdio::from(self.slave.try_clone()?)) };
        cmd.stdin(io()?).stdout(io()?).stderr(io()?);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() < 0 {
                    return last_error();
                }
                if libc::ioctl(slave, libc::TIOCSCTTY, 0) < 0 {
                    return last_error();
                }
                Ok(())
            });
        }
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
        outer: RawFd,
        child: &mut Child,
        log: File,
        relay: Option<&std::path::Path>,
    ) -> std::io::Result<ExitStatus> {
        let Pty { master, slave } = self;
        // Only the agent keeps the other end: its exit (and its children's)
        // ends the output.
        drop(slave);
        let raw = Raw::set(outer);
        let m = master.as_raw_fd();
        if let Some(ws) = size_of(outer) {
            set_size(m, &ws);
        }
        // Blocked here, and in the threads started below (they inherit the
        // mask), so that only the size thread takes it. The agent was
        // started before and keeps its own mask.
        let winch = block(libc::SIGWINCH);
        let handed = relay.and_then(|socket| {
            use std::os::fd::AsFd;
            crate::run::relay::handoff::hand_over(socket, master.as_fd(), log.as_fd())
        });
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let small = || std::thread::Builder::new().stack_size(STACK);
        small().spawn(move || {
            if let Some(conn) = handed {
                crate::run::relay::handoff::wait_released(conn);
            }
            copy_out(m, log);
            let _ = done_tx.send(());
        })?;
        small().spawn(move || copy_in(outer, m))?;
        if winch {
            small().spawn(move || follow_size(outer, m))?;
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
        // `master` stays open until the process exits: the output thread
        // may still be reading it.
        std::mem::forget(master);
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
fn copy_out(m: RawFd, mut log: File) {
    let mut buf = vec![0u8; 64 * 1024];
    while let Some(bytes) = read(m, &mut buf) {
        if bytes.is_empty() {
            break;
        }
        write_all(libc::STDOUT_FILENO, bytes);
        let _ = log.write_all(bytes);
    }
}

/// What is typed in the pane, to the agent's terminal. Ends when the pane's
/// terminal is gone (the agent's goes with it when this process ends: the
/// kernel hangs it up).
fn copy_in(outer: RawFd, m: RawFd) {
    let mut buf = vec![0u8; 4096];
    while let Some(bytes) = read(outer, &mut buf) {
        if bytes.is_empty() {
            break;
        }
        write_all(m, bytes);
    }
}

/// Blocks `SIGWINCH` in this thread and the threads it starts from now:
/// a helper thread of the shim must never take the pane's resize from the
/// thread that waits for it.
pub(super) fn block_winch() {
    block(libc::SIGWINCH);
}

/// Blocks `sig` in this thread (and the threads it starts); whether it is.
fn block(sig: libc::c_int) -> bool {
    // SAFETY: a zeroed sigset_t is initialised by sigemptyset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) == 0
    }
}

/// Gives the agent's terminal the pane's size each time the pane's changes
/// (tmux's resize sends `SIGWINCH` to the pane's foreground process group,
/// this shim).
fn follow_size(outer: RawFd, m: RawFd) {
    // SAFETY: as in `block`; sigwait only reads the set.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGWINCH);
    }
    let mut last = size_of(outer);
    loop {
        let mut sig = 0;
        // SAFETY: a valid set and an int to write the signal into.
        if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
            return;
        }
        let now = size_of(outer);
        if let Some(ws) =
            now.filter(|w| last.is_none_or(|s| s.ws_row != w.ws_row || s.ws_col != w.ws_col))
        {
            set_size(m, &ws);
            last = now;
        }
    }
}

/// Reads once; `None` on an error (EIO at a closed terminal).
fn read(fd: RawFd, buf: &mut [u8]) -> Option<&[u8]> {
    loop {
        // SAFETY: reading into a buffer of the given length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Some(&buf[..n as usize]);
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return None;
        }
    }
}

fn write_all(fd: RawFd, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: writing from a buffer of the given length.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// The pane's terminal in raw mode while the agent runs; restored after.
struct Raw {
    fd: RawFd,
    saved: Option<libc::termios>,
}

impl Raw {
    fn set(fd: RawFd) -> Raw {
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: tcgetattr fills the termios given; cfmakeraw edits it.
        let saved = (unsafe { libc::tcgetattr(fd, &mut t) } == 0).then_some(t);
        if let Some(mut raw) = saved {
            unsafe {
                libc::cfmakeraw(&mut raw);
                libc::tcsetattr(fd, libc::TCSANOW, &raw);
            }
        }
        Raw { fd, saved }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        if let Some(t) = &self.saved {
            // SAFETY: restoring attributes read from the same descriptor.
            unsafe { libc::tcsetattr(self.fd, libc::TCSANOW, t) };
        }
    }
}
