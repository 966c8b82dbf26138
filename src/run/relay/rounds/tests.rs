//! The relay's rounds with real terminals: an "agent" pty whose output the
//! relay copies, a "pane" pty it copies to, a log file.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Relay;
use crate::run::relay::handoff;

/// A pty pair in raw mode (bytes pass as they are): (master, slave).
fn pty() -> (OwnedFd, OwnedFd) {
    use rustix::pty::{OpenptFlags, grantpt, ioctl_tiocgptpeer, openpt, unlockpt};
    use rustix::termios::{OptionalActions, tcgetattr, tcsetattr};
    let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
    let m = openpt(flags).expect("openpt");
    grantpt(&m).unwrap();
    unlockpt(&m).unwrap();
    let s = ioctl_tiocgptpeer(&m, flags).expect("the pty's other end");
    let mut t = tcgetattr(&s).unwrap();
    t.make_raw();
    tcsetattr(&s, OptionalActions::Now, &t).unwrap();
    (m, s)
}

/// A relay listening in `dir`, on a thread of its own; its socket.
fn relay(dir: &Path) -> PathBuf {
    let path = dir.join("relay.sock");
    let l = UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || Relay::new(l).unwrap().run());
    path
}

/// The pane's end the relay writes to: a description of its own,
/// non-blocking, as a shim opens it.
fn pane_end(slave: &OwnedFd) -> std::fs::File {
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(format!("/proc/self/fd/{}", slave.as_raw_fd()))
        .unwrap()
}

/// `n` bytes no shorter pattern repeats in.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// Reads `n` bytes from a pty's master.
fn read_n(master: &OwnedFd, n: usize) -> Vec<u8> {
    let mut f = std::fs::File::from(master.try_clone().unwrap());
    let mut out = vec![0u8; n];
    f.read_exact(&mut out).unwrap();
    out
}

struct Setup {
    _dir: tempfile::TempDir,
    agent_master: OwnedFd,
    agent_slave: OwnedFd,
    pane_master: OwnedFd,
    _pane_slave: OwnedFd,
    log: PathBuf,
    conn: std::os::unix::net::UnixStream,
}

/// An agent's output handed to a fresh relay.
fn handed() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let socket = relay(dir.path());
    let (agent_master, agent_slave) = pty();
    let (pane_master, pane_slave) = pty();
    let log = dir.path().join("output.log");
    let log_file = std::fs::File::create(&log).unwrap();
    let pane = pane_end(&pane_slave);
    let conn = handoff::hand_over_to(
        &socket,
        [agent_master.as_fd(), pane.as_fd(), log_file.as_fd()],
    )
    .expect("the relay takes the run");
    Setup {
        _dir: dir,
        agent_master,
        agent_slave,
        pane_master,
        _pane_slave: pane_slave,
        log,
        conn,
    }
}

/// Writes `bytes` as the agent would, then closes the agent's terminal.
fn agent_prints(slave: OwnedFd, bytes: Vec<u8>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut f = std::fs::File::from(slave);
        for chunk in bytes.chunks(1000) {
            f.write_all(chunk).unwrap();
        }
    })
}

#[test]
fn every_byte_reaches_the_pane_and_the_log_in_order_then_the_run_is_let_go() {
    let s = handed();
    let want = pattern(1 << 20);
    let writer = agent_prints(s.agent_slave, want.clone());
    let on_pane = read_n(&s.pane_master, want.len());
    writer.join().unwrap();
    assert!(on_pane == want, "the pane got the bytes in order");
    // The agent's terminal closed: the relay lets the run go once all it
    // read is written, and says so by closing the connection.
    handoff::wait_released(s.conn);
    assert!(
        std::fs::read(&s.log).unwrap() == want,
        "the log got every byte"
    );
    drop(s.agent_master);
}

#[test]
fn a_pane_that_is_behind_holds_the_agent_back_and_loses_nothing() {
    let s = handed();
    let want = pattern(4 << 20);
    let writer = agent_prints(s.agent_slave, want.clone());
    // Nobody reads the pane: the relay stops reading the agent, whose
    // writes then wait, as they would on a terminal tmux is slow to read.
    std::thread::sleep(Duration::from_millis(500));
    let logged = std::fs::metadata(&s.log).unwrap().len() as usize;
    assert!(
        logged < want.len(),
        "the relay read on while the pane was behind ({logged} bytes)"
    );
    assert!(!writer.is_finished(), "the agent was not held back");
    let on_pane = read_n(&s.pane_master, want.len());
    writer.join().unwrap();
    assert!(on_pane == want, "the pane got every byte in order");
    handoff::wait_released(s.conn);
    assert!(std::fs::read(&s.log).unwrap() == want, "and so did the log");
}

#[test]
fn a_stranger_is_refused_and_the_relay_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let socket = relay(dir.path());
    let mut stranger = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    stranger.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let mut got = Vec::new();
    stranger
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(stranger.read_to_end(&mut got).unwrap(), 0, "closed");
    // And a shim that comes next is served.
    let (m, sl) = pty();
    let log = std::fs::File::create(dir.path().join("log")).unwrap();
    let pane = pane_end(&sl);
    assert!(handoff::hand_over_to(&socket, [m.as_fd(), pane.as_fd(), log.as_fd()]).is_some());
}

#[test]
fn a_shim_that_gives_up_before_its_go_keeps_its_terminal_to_itself() {
    use std::io::IoSlice;
    use std::mem::MaybeUninit;
    let dir = tempfile::tempdir().unwrap();
    let socket = relay(dir.path());
    let (m, slave) = pty();
    let (_pm, ps) = pty();
    let log = std::fs::File::create(dir.path().join("log")).unwrap();
    let pane = pane_end(&ps);
    let mut conn = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let fds = [m.as_fd(), pane.as_fd(), log.as_fd()];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = rustix::net::SendAncillaryBuffer::new(&mut space);
    assert!(control.push(rustix::net::SendAncillaryMessage::ScmRights(&fds)));
    rustix::net::sendmsg(
        &conn,
        &[IoSlice::new(handoff::HELLO)],
        &mut control,
        rustix::net::SendFlags::empty(),
    )
    .unwrap();
    let mut offer = [0u8; 2];
    conn.read_exact(&mut offer).unwrap();
    assert_eq!(&offer, handoff::OFFER);
    // No go: the shim gave up and copies on its own.
    drop(conn);
    std::thread::sleep(Duration::from_millis(50));
    std::fs::File::from(slave).write_all(b"mine").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(read_n(&m, 4), b"mine", "the relay read nothing");
    assert_eq!(std::fs::metadata(dir.path().join("log")).unwrap().len(), 0);
}

#[test]
fn what_the_agent_printed_last_reaches_the_log_after_its_shim_is_gone() {
    let s = handed();
    let mut agent = std::fs::File::from(s.agent_slave);
    let want = pattern(10_000);
    agent.write_all(&want).unwrap();
    // The shim exits at once (its end of the connection closes) while the
    // agent's terminal is still open: the relay reads on what it holds.
    drop(s.conn);
    let got = wait_for(|| {
        let l = std::fs::read(&s.log).unwrap();
        (l.len() >= want.len()).then_some(l)
    });
    assert!(got == want, "every byte, once, in order");
    drop(agent);
    drop(s.agent_master);
}

/// Waits up to 5 s for `f` to give something.
fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let began = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(began.elapsed() < Duration::from_secs(5), "timed out");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_ping_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let socket = relay(dir.path());
    assert!(handoff::ping(&socket));
}
