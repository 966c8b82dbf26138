//! The one module allowed `unsafe` (the crate root denies it): the few
//! calls into the C library that neither the standard library nor rustix
//! offers safely. Signal dispositions and masks (rustix leaves signal
//! handling to the runtime), and the two things a child does between `fork`
//! and `exec` (`CommandExt::pre_exec` is `unsafe` by nature: only
//! async-signal-safe calls may run there); and handing a descriptor lab owns
//! to the runtime to watch (`AsyncFd::register_with_interest` is `unsafe`:
//! the runtime cannot check that the descriptor stays open).
//!
//! Each function states what it does in safe terms, and each `unsafe` block
//! says why it is sound. Everything else of the kind (terminals, ptys,
//! pidfds, `poll`, `umask`) goes through rustix.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// A signal lab sets a disposition or a mask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Pipe,
    Int,
    Quit,
    Tstp,
    Ttin,
    Ttou,
    Winch,
}

impl Signal {
    fn raw(self) -> libc::c_int {
        match self {
            Signal::Pipe => libc::SIGPIPE,
            Signal::Int => libc::SIGINT,
            Signal::Quit => libc::SIGQUIT,
            Signal::Tstp => libc::SIGTSTP,
            Signal::Ttin => libc::SIGTTIN,
            Signal::Ttou => libc::SIGTTOU,
            Signal::Winch => libc::SIGWINCH,
        }
    }
}

/// The process takes `sig` as if it set nothing: for `SIGPIPE`, a write to
/// a closed pipe ends it quietly, as it does any command line tool.
pub fn default_disposition(sig: Signal) {
    // SAFETY: SIG_DFL is a valid disposition for every signal of `Signal`;
    // no handler code runs and no memory is touched.
    unsafe {
        libc::signal(sig.raw(), libc::SIG_DFL);
    }
}

/// The process ignores `sig` (inherited across `exec` by what it starts
/// afterwards only where the child resets nothing; the exec shim sets it
/// after its agent started).
pub fn ignore(sig: Signal) {
    // SAFETY: SIG_IGN is a valid disposition for every signal of `Signal`;
    // no handler code runs and no memory is touched.
    unsafe {
        libc::signal(sig.raw(), libc::SIG_IGN);
    }
}

/// A set holding only `sig`.
fn set_of(sig: Signal) -> libc::sigset_t {
    // SAFETY: sigset_t is a plain bit set; sigemptyset initialises the
    // zeroed value and sigaddset adds a valid signal to it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig.raw());
        set
    }
}

/// Blocks `sig` in the calling thread and the threads it starts from now;
/// whether it could.
pub fn block_in_thread(sig: Signal) -> bool {
    let set = set_of(sig);
    // SAFETY: a valid set; the old mask is not asked for (null).
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) == 0 }
}

/// Waits until `sig` (blocked in every thread, see [`block_in_thread`]) is
/// delivered; false when the wait failed.
pub fn wait_for(sig: Signal) -> bool {
    let set = set_of(sig);
    let mut got = 0;
    // SAFETY: a valid set and an int for the kernel to write the signal to.
    unsafe { libc::sigwait(&set, &mut got) == 0 }
}

/// Makes the child `cmd` starts lead a session of its own whose
/// controlling terminal is `terminal` (the agent's pty, also its standard
/// streams).
pub fn start_session_on(cmd: &mut Command, terminal: &OwnedFd) {
    let fd = terminal.as_raw_fd();
    // SAFETY: between fork and exec the closure calls only setsid(2) and
    // ioctl(2), both async-signal-safe, and allocates nothing. `fd` is the
    // descriptor the caller keeps open until after the spawn.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::ioctl(fd, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Makes the child `cmd` starts write `0` to each of `files` before it
/// runs anything (a cgroup's `cgroup.procs`: the writer joins the group).
pub fn write_zero_in_child(cmd: &mut Command, files: Vec<OwnedFd>) {
    let fds: Vec<i32> = files.iter().map(AsRawFd::as_raw_fd).collect();
    // SAFETY: between fork and exec the closure only calls write(2) on
    // descriptors opened before the fork (kept open by `files`, moved into
    // the closure, which lives as long as the command), which is
    // async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            let _ = &files;
            for fd in &fds {
                if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Hands `fd` to the tokio runtime, which then says when it is readable
/// (the reconcile loop's epoll set of pidfds, its inotify queue). Must be
/// called inside the runtime.
pub fn watch_readable(fd: OwnedFd) -> std::io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: an `OwnedFd` is an open descriptor that closes only when it is
    // dropped, and the `AsyncFd` owns it from here until the `AsyncFd` is
    // dropped (it deregisters first); `OwnedFd::as_raw_fd` always returns
    // the same number.
    unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
            .map_err(|e| e.into())
    }
}
