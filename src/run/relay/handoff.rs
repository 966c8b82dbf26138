//! How a shim hands its agent's output to the relay, both sides of the
//! socket. One connection per run:
//!
//! 1. the shim sends [`HELLO`] with three descriptors: the agent's terminal
//!    (its pty master), a description of the pane's terminal of the relay's
//!    own (non-blocking), and the run's log;
//! 2. the relay answers [`TAKEN`] once it copies that run's output;
//! 3. the relay closes the connection when the agent's terminal closed and
//!    everything read from it is written, or when it ends for any reason.
//!    The shim then copies on its own (nothing is left to read, or the relay
//!    died and it takes over).
//!
//! The shim never writes after its hello; its end closing tells the relay
//! the run is gone.

use std::io::{IoSlice, IoSliceMut, Read};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, recvmsg, sendmsg,
};

/// The first message of a connection: names the protocol and its version.
pub const HELLO: &[u8] = b"lab-relay 1\n";

/// The relay's answer once it took the run over.
pub const TAKEN: &[u8] = b"ok";

/// The descriptors a hello carries, in order.
pub struct Handed {
    /// The agent's terminal: the relay reads the agent's output from it.
    pub master: OwnedFd,
    /// The pane's terminal, opened for the relay alone (non-blocking).
    pub pane: OwnedFd,
    /// The run's log, appended to.
    pub log: OwnedFd,
}

/// The shim's side: connects to the relay at `socket` and hands it the
/// agent's output (`master`, `log`; the pane is the shim's standard
/// output). Returns the connection once the relay took the run; `None` when
/// there is no relay or it refused, and the shim copies on its own.
pub fn hand_over(socket: &Path, master: BorrowedFd<'_>, log: BorrowedFd<'_>) -> Option<UnixStream> {
    // A description of the pane's terminal of the relay's own: its
    // non-blocking flag must not reach the shim's standard streams.
    let pane = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open("/proc/self/fd/1")
        .ok()?;
    hand_over_to(socket, [master, pane.as_fd(), log])
}

/// How long a shim waits for the relay's answer. A relay that does not
/// answer in this time is taken for a stuck one: the shim copies on its
/// own (and a relay that answers later finds the connection closed, and
/// lets the run go).
const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// [`hand_over`] with the three descriptors given: the agent's terminal,
/// the pane (non-blocking) and the log.
pub fn hand_over_to(socket: &Path, fds: [BorrowedFd<'_>; 3]) -> Option<UnixStream> {
    let mut conn = UnixStream::connect(socket).ok()?;
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return None;
    }
    let sent = sendmsg(
        &conn,
        &[IoSlice::new(HELLO)],
        &mut control,
        SendFlags::empty(),
    )
    .ok()?;
    if sent != HELLO.len() {
        return None;
    }
    // The relay answers within one of its rounds; a relay that cannot
    // (gone, full) closes the connection instead.
    conn.set_read_timeout(Some(ANSWER_WAIT)).ok()?;
    let mut answer = [0u8; TAKEN.len()];
    conn.read_exact(&mut answer).ok()?;
    conn.set_read_timeout(None).ok()?;
    (answer == TAKEN).then_some(conn)
}

/// The shim's side, after [`hand_over`]: blocks until the relay lets go of
/// the run (it closed the connection).
pub fn wait_released(mut conn: UnixStream) {
    let mut b = [0u8; 64];
    loop {
        match conn.read(&mut b) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Why a connection's first message is not a hand-over.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not yet arrived: read again when the connection is readable.
    NotYet,
    /// Anything else: the connection is closed.
    Bad(&'static str),
}

/// The relay's side: reads a connection's hello and its descriptors. The
/// connection must come from a process of this user.
pub fn receive(conn: &UnixStream) -> Result<Handed, Refused> {
    let me = rustix::process::getuid();
    match rustix::net::sockopt::socket_peercred(conn) {
        Ok(cred) if cred.uid == me => {}
        _ => return Err(Refused::Bad("a peer of another user")),
    }
    let mut buf = [0u8; 64];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = match recvmsg(
        conn,
        &mut [IoSliceMut::new(&mut buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
    ) {
        Ok(m) => m,
        Err(rustix::io::Errno::AGAIN) => return Err(Refused::NotYet),
        Err(_) => return Err(Refused::Bad("the hello could not be read")),
    };
    // Every descriptor that came is owned here, and closed unless used.
    let mut fds: Vec<OwnedFd> = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = msg {
            fds.extend(rights);
        }
    }
    if got.bytes == 0 {
        return Err(Refused::Bad("closed before its hello"));
    }
    if &buf[..got.bytes] != HELLO {
        return Err(Refused::Bad("not a lab relay hello"));
    }
    let [master, pane, log]: [OwnedFd; 3] = fds
        .try_into()
        .map_err(|_| Refused::Bad("a hello needs exactly three descriptors"))?;
    Ok(Handed { master, pane, log })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn a_hello_without_three_descriptors_is_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        let f = std::fs::File::open("/dev/null").unwrap();
        let one = [f.as_fd()];
        assert!(control.push(SendAncillaryMessage::ScmRights(&one)));
        sendmsg(&a, &[IoSlice::new(HELLO)], &mut control, SendFlags::empty()).unwrap();
        assert!(matches!(receive(&b), Err(Refused::Bad(_))));
    }

    #[test]
    fn nothing_sent_yet_is_not_yet() {
        let (_a, b) = UnixStream::pair().unwrap();
        assert!(matches!(receive(&b), Err(Refused::NotYet)));
    }

    #[test]
    fn another_greeting_is_refused() {
        let (mut a, b) = UnixStream::pair().unwrap();
        std::io::Write::write_all(&mut a, b"GET / HTTP/1.1\r\n").unwrap();
        assert!(matches!(receive(&b), Err(Refused::Bad(_))));
    }

    #[test]
    fn no_relay_means_no_hand_over() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::open("/dev/null").unwrap();
        assert!(hand_over(&dir.path().join("none.sock"), f.as_fd(), f.as_fd()).is_none());
        // A socket nobody answers on: refused at connect.
        let path = dir.path().join("gone.sock");
        drop(UnixListener::bind(&path).unwrap());
        assert!(hand_over(&path, f.as_fd(), f.as_fd()).is_none());
    }
}
