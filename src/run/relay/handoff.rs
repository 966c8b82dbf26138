//! How a shim hands its agent's output to the relay, both sides of the
//! socket. One connection per run:
//!
//! 1. the shim sends [`HELLO`] with three descriptors: the agent's terminal
//!    (its pty master), a description of the pane's terminal of the relay's
//!    own (non-blocking), and the run's log;
//! 2. the relay checks them and answers [`OFFER`];
//! 3. the shim answers [`GO`]: from then on the relay copies, and the shim
//!    does not. A shim that gave up waiting closes instead, and the relay
//!    never reads (so two never read one terminal);
//! 4. the relay closes the connection when the agent's terminal closed and
//!    everything read from it is written, or when it ends for any reason.
//!    The shim then copies on its own (nothing is left to read, or the relay
//!    died and it takes over).
//!
//! After its go the shim never writes; its end closing (the shim exited)
//! tells the relay the run is gone.
//!
//! lab asks whether a relay answers with [`PING`] (no descriptors); the
//! relay answers [`PONG`]. A relay of another version answers neither.

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType, recvmsg, sendmsg,
};

/// The first message of a hand-over: names the protocol and its version.
pub const HELLO: &[u8] = b"lab-relay 2\n";

/// lab's question whether a relay of this version answers.
pub const PING: &[u8] = b"lab-relay 2 ping\n";

/// The relay's answer to [`PING`].
pub const PONG: &[u8] = b"pong";

/// The relay's answer to a hello whose descriptors it takes.
pub const OFFER: &[u8] = b"ok";

/// The shim's answer to [`OFFER`]: the relay copies from now on.
pub const GO: &[u8] = b"g";

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

/// How long a shim waits for the relay's offer, and lab for its pong. A
/// relay that does not answer in this time is taken for a stuck one: the
/// shim copies on its own, lab replaces the relay.
pub const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// [`hand_over`] with the three descriptors given: the agent's terminal,
/// the pane (non-blocking) and the log.
pub fn hand_over_to(socket: &Path, fds: [BorrowedFd<'_>; 3]) -> Option<UnixStream> {
    let mut conn = connect(socket)?;
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
    // A relay that cannot take the run (gone, full, a bad descriptor)
    // closes the connection instead of offering.
    let mut answer = [0u8; OFFER.len()];
    conn.read_exact(&mut answer).ok()?;
    if answer != OFFER {
        return None;
    }
    conn.write_all(GO).ok()?;
    conn.set_read_timeout(None).ok()?;
    Some(conn)
}

/// lab's side: whether a relay of this version answers at `socket`.
pub fn ping(socket: &Path) -> bool {
    let Some(mut conn) = connect(socket) else {
        return false;
    };
    let mut answer = [0u8; PONG.len()];
    conn.write_all(PING).is_ok() && conn.read_exact(&mut answer).is_ok() && answer == PONG
}

/// A connection to the relay, or `None` at once when there is none or its
/// backlog is full (never a wait on a relay that does not accept). Reads
/// time out after [`ANSWER_WAIT`].
fn connect(socket: &Path) -> Option<UnixStream> {
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )
    .ok()?;
    // A Unix socket connects at once or not at all (EAGAIN: backlog full).
    rustix::net::connect(&fd, &SocketAddrUnix::new(socket).ok()?).ok()?;
    let conn = UnixStream::from(fd);
    conn.set_nonblocking(false).ok()?;
    conn.set_read_timeout(Some(ANSWER_WAIT)).ok()?;
    conn.set_write_timeout(Some(ANSWER_WAIT)).ok()?;
    Some(conn)
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

/// What a connection's first message was.
pub enum Greeting {
    /// A shim's hello: the descriptors it handed, checked.
    Hand(Handed),
    /// lab asking whether the relay answers.
    Ping,
}

/// Why a connection's first message is not a greeting.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not yet arrived: read again when the connection is readable.
    NotYet,
    /// Anything else: the connection is closed.
    Bad(&'static str),
}

/// The relay's side: reads a connection's first message and its
/// descriptors. The connection must come from a process of this user, and
/// the descriptors must be what a shim sends: a terminal, a non-blocking
/// pane, a regular file (anything else could stall every run's copying).
pub fn receive(conn: &UnixStream) -> Result<Greeting, Refused> {
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
    let said = &buf[..got.bytes];
    if said == PING && fds.is_empty() {
        return Ok(Greeting::Ping);
    }
    if said != HELLO {
        return Err(Refused::Bad("not a lab relay hello of this version"));
    }
    let [master, pane, log]: [OwnedFd; 3] = fds
        .try_into()
        .map_err(|_| Refused::Bad("a hello needs exactly three descriptors"))?;
    if !is_terminal(&master) || !is_terminal(&pane) {
        return Err(Refused::Bad("the agent's and the pane's must be terminals"));
    }
    let nonblocking =
        rustix::fs::fcntl_getfl(&pane).is_ok_and(|f| f.contains(rustix::fs::OFlags::NONBLOCK));
    if !nonblocking {
        return Err(Refused::Bad("the pane's terminal must be non-blocking"));
    }
    let regular = rustix::fs::fstat(&log)
        .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_file());
    if !regular {
        return Err(Refused::Bad("the log must be a regular file"));
    }
    Ok(Greeting::Hand(Handed { master, pane, log }))
}

fn is_terminal(fd: &OwnedFd) -> bool {
    rustix::termios::isatty(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn send(a: &UnixStream, what: &[u8], fds: &[BorrowedFd<'_>]) {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        assert!(control.push(SendAncillaryMessage::ScmRights(fds)));
        sendmsg(a, &[IoSlice::new(what)], &mut control, SendFlags::empty()).unwrap();
    }

    #[test]
    fn a_hello_without_three_descriptors_is_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        let f = std::fs::File::open("/dev/null").unwrap();
        send(&a, HELLO, &[f.as_fd()]);
        assert!(matches!(receive(&b), Err(Refused::Bad(_))));
    }

    #[test]
    fn descriptors_that_could_stall_the_relay_are_refused() {
        // Three descriptors, but no terminal among them.
        let (a, b) = UnixStream::pair().unwrap();
        let f = std::fs::File::open("/dev/null").unwrap();
        send(&a, HELLO, &[f.as_fd(), f.as_fd(), f.as_fd()]);
        assert_eq!(
            receive(&b).err(),
            Some(Refused::Bad("the agent's and the pane's must be terminals"))
        );
    }

    #[test]
    fn nothing_sent_yet_is_not_yet() {
        let (_a, b) = UnixStream::pair().unwrap();
        assert!(matches!(receive(&b), Err(Refused::NotYet)));
    }

    #[test]
    fn another_greeting_is_refused_and_a_ping_is_one() {
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        assert!(matches!(receive(&b), Err(Refused::Bad(_))));
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(b"lab-relay 1\n").unwrap();
        assert!(
            matches!(receive(&b), Err(Refused::Bad(_))),
            "an old version"
        );
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(PING).unwrap();
        assert!(matches!(receive(&b), Ok(Greeting::Ping)));
    }

    #[test]
    fn no_relay_means_no_hand_over_and_no_pong() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::open("/dev/null").unwrap();
        let none = dir.path().join("none.sock");
        assert!(hand_over(&none, f.as_fd(), f.as_fd()).is_none());
        assert!(!ping(&none));
        // A socket nobody answers on: refused at connect.
        let path = dir.path().join("gone.sock");
        drop(UnixListener::bind(&path).unwrap());
        assert!(hand_over(&path, f.as_fd(), f.as_fd()).is_none());
        assert!(!ping(&path));
    }
}
