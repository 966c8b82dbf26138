//! The agent's own terminal. The exec shim runs the agent on a pty pair of
//! its own and copies what the agent prints both to the pane (its standard
//! output) and to the run's log, and what is typed in the pane to the agent.
//! So the tmux server writes no pipe per run (`pipe-pane` cost it more than
//! drawing the panes, at a hundred busy runs; ADR 16).
//!
//! The pane's terminal is put in raw mode: keys pass as bytes, and the
//! agent's own terminal makes of them what a terminal does (Ctrl-C is its
//! SIGINT). Its size follows the pane's.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How often, at most, the relay looks at the pane's size and whether the
/// agent exited while its terminal stays open (a child of its holds it):
/// an idle run's shim wakes only this often.
const LOOK_MS: i32 = 1000;

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
    pub fn relay(
        self,
        outer: RawFd,
        child: &mut Child,
        mut log: File,
    ) -> std::io::Result<ExitStatus> {
        let Pty { master, slave } = self;
        // Only the agent keeps the other end: its exit (and its children's)
        // ends the output.
        drop(slave);
        let raw = Raw::set(outer);
        let m = master.as_raw_fd();
        let mut buf = vec![0u8; 64 * 1024];
        let mut size = size_of(outer);
        let mut looked = Instant::now();
        let mut outer_open = true;
        let status = loop {
            let mut fds = [
                libc::pollfd {
                    fd: m,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: if outer_open { outer } else { -1 },
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfd entries.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, LOOK_MS) };
            if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return last_error();
            }
            let mut agent_gone = false;
            if fds[0].revents != 0 {
                match read(m, &mut buf) {
                    Some(bytes) if !bytes.is_empty() => {
                        // One write each, unbuffered: the pane and the log
                        // see the bytes at once.
                        write_all(libc::STDOUT_FILENO, bytes);
                        let _ = log.write_all(bytes);
                    }
                    // EIO: every holder of the agent's terminal closed it.
                    _ => agent_gone = true,
                }
            }
            if fds[1].revents != 0 {
                match read(outer, &mut buf) {
                    Some(bytes) if !bytes.is_empty() => {
                        write_all(m, bytes);
                    }
                    // The pane's terminal is gone: the agent's goes with it
                    // when this process ends (the kernel hangs it up).
                    _ => outer_open = false,
                }
            }
            if agent_gone || looked.elapsed() >= Duration::from_millis(LOOK_MS as u64) || n == 0 {
                looked = Instant::now();
                let now = size_of(outer);
                if let Some(ws) = now
                    .filter(|w| size.is_none_or(|s| s.ws_row != w.ws_row || s.ws_col != w.ws_col))
                {
                    set_size(m, &ws);
                    size = now;
                }
                if let Some(status) = child.try_wait()? {
                    break status;
                }
                if agent_gone {
                    // Output ended but the agent lives on (it closed its
                    // terminal): wait for it.
                    break child.wait()?;
                }
            }
        };
        // What the agent printed last, still in its terminal.
        // SAFETY: making an open descriptor non-blocking.
        unsafe {
            let fl = libc::fcntl(m, libc::F_GETFL);
            libc::fcntl(m, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        while let Some(bytes) = read(m, &mut buf) {
            if bytes.is_empty() {
                break;
            }
            write_all(libc::STDOUT_FILENO, bytes);
            let _ = log.write_all(bytes);
        }
        drop(raw);
        Ok(status)
    }
}

/// Reads once; `None` on an error (EIO at a closed terminal, EAGAIN).
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
