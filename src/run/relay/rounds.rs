//! The relay's loop: one `epoll` for the listener, every run's connection,
//! agent terminal and (while it is behind) pane; rounds at least
//! [`ROUND`](super::ROUND) apart.
//!
//! A round reads what each ready agent printed (one read of up to 64 KiB),
//! appends it to the run's log, then writes it to the pane. A pane that
//! cannot take it all (tmux is behind) keeps the rest, and its agent is not
//! read again until the pane took it: the agent waits, as it would on a
//! terminal tmux is slow to read.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Instant;

use rustix::buffer::spare_capacity;
use rustix::event::epoll::{self, CreateFlags, Event, EventData, EventFlags};
use rustix::io::Errno;

use super::handoff::{self, GO, Greeting, OFFER, PONG, Refused};

/// The most a run's agent terminal is read for the log after its shim is
/// gone (a child of the agent may print on for ever).
const DRAIN_MAX: usize = 4 << 20;

/// What a token names: the listener, or a slot's connection, agent or pane.
const LISTENER: u64 = u64::MAX;
const CONN: u64 = 0;
const AGENT: u64 = 1;
const PANE: u64 = 2;

fn token(slot: usize, what: u64) -> EventData {
    EventData::new_u64(((slot as u64) << 2) | what)
}

/// One run the relay copies for.
struct Run {
    conn: UnixStream,
    master: OwnedFd,
    /// `None` once the pane's terminal is gone: the log still gets all.
    pane: Option<OwnedFd>,
    log: File,
    /// Output the pane has not taken yet.
    behind: Vec<u8>,
}

enum Slot {
    /// A connection whose first message has not arrived.
    Greeting(UnixStream),
    /// A hand-over offered, the shim's go not yet here.
    Offered(UnixStream, Box<handoff::Handed>),
    Run(Box<Run>),
}

pub struct Relay {
    ep: OwnedFd,
    listener: UnixListener,
    slots: Vec<Option<Slot>>,
    /// Slots free for reuse; those freed in a round join after it, so an
    /// event of the round never reaches a newcomer.
    free: Vec<usize>,
    freed: Vec<usize>,
    buf: Vec<u8>,
    /// A descriptor kept free: out of descriptors, the relay closes it to
    /// accept (and refuse) a waiting connection, which would otherwise keep
    /// the listener ready for ever.
    spare: Option<File>,
}

impl Relay {
    pub fn new(listener: UnixListener) -> std::io::Result<Relay> {
        listener.set_nonblocking(true)?;
        let ep = epoll::create(CreateFlags::CLOEXEC)?;
        epoll::add(&ep, &listener, EventData::new_u64(LISTENER), EventFlags::IN)?;
        Ok(Relay {
            ep,
            listener,
            slots: Vec::new(),
            free: Vec::new(),
            freed: Vec::new(),
            buf: vec![0u8; 64 * 1024],
            spare: File::open("/dev/null").ok(),
        })
    }

    /// Runs rounds until `epoll` itself fails.
    pub fn run(&mut self) -> std::io::Result<()> {
        let mut events: Vec<Event> = Vec::with_capacity(256);
        let mut last: Option<Instant> = None;
        loop {
            if let Some(wait) =
                last.and_then(|t| (t + super::ROUND).checked_duration_since(Instant::now()))
            {
                std::thread::sleep(wait);
            }
            events.clear();
            match epoll::wait(&self.ep, spare_capacity(&mut events), None) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            last = Some(Instant::now());
            for ev in &events {
                let t = ev.data.u64();
                if t == LISTENER {
                    self.accept();
                    continue;
                }
                let slot = (t >> 2) as usize;
                match t & 3 {
                    CONN => self.on_conn(slot),
                    AGENT => self.on_agent(slot),
                    _ => self.on_pane(slot),
                }
            }
            self.free.append(&mut self.freed);
        }
    }

    fn accept(&mut self) {
        loop {
            let conn = match self.listener.accept() {
                Ok((c, _)) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    // Out of descriptors: refuse the one waiting (its shim
                    // copies on its own), with the spare's place.
                    self.spare = None;
                    drop(self.listener.accept());
                    self.spare = File::open("/dev/null").ok();
                    continue;
                }
                // WouldBlock: none left.
                Err(_) => return,
            };
            if conn.set_nonblocking(true).is_err() {
                continue;
            }
            let slot = self.free.pop().unwrap_or_else(|| {
                self.slots.push(None);
                self.slots.len() - 1
            });
            if epoll::add(
                &self.ep,
                &conn,
                token(slot, CONN),
                EventFlags::IN | EventFlags::RDHUP,
            )
            .is_err()
            {
                self.free.push(slot);
                continue;
            }
            self.slots[slot] = Some(Slot::Greeting(conn));
        }
    }

    fn on_conn(&mut self, slot: usize) {
        match self.slots[slot].take() {
            Some(Slot::Greeting(mut conn)) => match handoff::receive(&conn) {
                // Two bytes into an empty socket: they go at once. A peer
                // that is gone makes the next event end it.
                Ok(Greeting::Hand(h)) if conn.write_all(OFFER).is_ok() => {
                    self.slots[slot] = Some(Slot::Offered(conn, Box::new(h)));
                }
                Ok(Greeting::Ping) => {
                    let _ = conn.write_all(PONG);
                    self.drop_conn(slot, &conn);
                }
                Err(Refused::NotYet) => self.slots[slot] = Some(Slot::Greeting(conn)),
                // Refused (said nothing: the relay's pane is no log, and a
                // stranger could fill it) or not answerable.
                Ok(Greeting::Hand(_)) | Err(Refused::Bad(_)) => self.drop_conn(slot, &conn),
            },
            Some(Slot::Offered(mut conn, h)) => {
                let mut b = [0u8; 1];
                match std::io::Read::read(&mut conn, &mut b) {
                    Ok(1) if b == GO => self.take(slot, conn, *h),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        self.slots[slot] = Some(Slot::Offered(conn, h));
                    }
                    // Gone, or it gave up waiting: it copies on its own, and
                    // the descriptors close here unread.
                    _ => self.drop_conn(slot, &conn),
                }
            }
            // After its go a shim never writes: this is its end. The agent's
            // terminal is the relay's alone now.
            Some(Slot::Run(run)) => self.drain_and_close(slot, run),
            None => {}
        }
    }

    fn drop_conn(&mut self, slot: usize, conn: &UnixStream) {
        let _ = epoll::delete(&self.ep, conn);
        self.freed.push(slot);
    }

    /// Copies a run's output from now on.
    fn take(&mut self, slot: usize, conn: UnixStream, h: handoff::Handed) {
        if epoll::add(&self.ep, &h.master, token(slot, AGENT), EventFlags::IN).is_err() {
            // Closing the connection tells the shim to copy on its own.
            return self.drop_conn(slot, &conn);
        }
        self.slots[slot] = Some(Slot::Run(Box::new(Run {
            conn,
            master: h.master,
            pane: Some(h.pane),
            log: File::from(h.log),
            behind: Vec::new(),
        })));
    }

    fn on_agent(&mut self, slot: usize) {
        let Some(Slot::Run(mut run)) = self.slots[slot].take() else {
            return;
        };
        // One read: the agent's terminal is shared with the shim, so it
        // stays blocking (the shim copies with blocking reads when it takes
        // the run back), and epoll said this read has something.
        match rustix::io::read(&run.master, &mut self.buf) {
            Ok(0) => return self.close(slot, run),
            Ok(n) => {
                let bytes = &self.buf[..n];
                // The log first: it gets every byte even if the pane is
                // behind or gone. A full disk loses output, as the shim's
                // own copy would.
                let _ = run.log.write_all(bytes);
                if let Some(pane) = &run.pane {
                    match write_some(pane, bytes) {
                        Ok(w) if w == n => {}
                        Ok(w) => {
                            run.behind.extend_from_slice(&bytes[w..]);
                            if !self.fall_behind(slot, &run) {
                                // Cannot wait for the pane: the shim takes
                                // the run back (its writes block instead).
                                return self.close(slot, run);
                            }
                        }
                        Err(_) => run.pane = None,
                    }
                }
            }
            Err(Errno::INTR | Errno::AGAIN) => {}
            // EIO: every holder of the agent's terminal closed it, and all
            // it printed was read.
            Err(_) => return self.close(slot, run),
        }
        self.slots[slot] = Some(Slot::Run(run));
    }

    /// The pane did not take all: wait for it, and read the agent no more
    /// until it did. False when the pane cannot be waited for.
    fn fall_behind(&self, slot: usize, run: &Run) -> bool {
        let _ = epoll::delete(&self.ep, &run.master);
        run.pane.as_ref().is_some_and(|pane| {
            epoll::add(&self.ep, pane, token(slot, PANE), EventFlags::OUT).is_ok()
        })
    }

    fn on_pane(&mut self, slot: usize) {
        let Some(Slot::Run(mut run)) = self.slots[slot].take() else {
            return;
        };
        let caught_up = match &run.pane {
            Some(pane) => match write_some(pane, &run.behind) {
                Ok(w) => {
                    run.behind.drain(..w);
                    run.behind.is_empty()
                }
                Err(_) => true,
            },
            None => true,
        };
        if caught_up {
            if let Some(pane) = &run.pane {
                let _ = epoll::delete(&self.ep, pane);
            }
            if !run.behind.is_empty() {
                // The pane went: what it missed is in the log.
                run.behind.clear();
                run.pane = None;
            }
            if epoll::add(&self.ep, &run.master, token(slot, AGENT), EventFlags::IN).is_err() {
                return self.close(slot, run);
            }
        }
        self.slots[slot] = Some(Slot::Run(run));
    }

    /// The shim is gone: what the agent's terminal still holds goes to the
    /// log (the pane went with the shim), then the run is let go.
    fn drain_and_close(&mut self, slot: usize, run: Box<Run>) {
        let _ = epoll::delete(&self.ep, &run.master);
        let mut log = &run.log;
        let mut left = DRAIN_MAX;
        if rustix::fs::fcntl_setfl(&run.master, rustix::fs::OFlags::NONBLOCK).is_ok() {
            while left > 0 {
                match rustix::io::read(&run.master, &mut self.buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let _ = log.write_all(&self.buf[..n]);
                        left = left.saturating_sub(n);
                    }
                    Err(Errno::INTR) => {}
                    Err(_) => break,
                }
            }
        }
        self.close(slot, run);
    }

    /// Lets go of a run: its connection closes, which tells the shim.
    fn close(&mut self, slot: usize, run: Box<Run>) {
        // The agent's terminal is shared with the shim: closing this copy
        // would leave it registered, so it is taken out first.
        let _ = epoll::delete(&self.ep, &run.master);
        let _ = epoll::delete(&self.ep, &run.conn);
        if let Some(p) = &run.pane {
            let _ = epoll::delete(&self.ep, p);
        }
        drop(run);
        self.freed.push(slot);
    }
}

/// One write; a pane that would block took nothing.
fn write_some(fd: impl AsFd, bytes: &[u8]) -> Result<usize, Errno> {
    loop {
        match rustix::io::write(&fd, bytes) {
            Ok(n) => return Ok(n),
            Err(Errno::AGAIN) => return Ok(0),
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests;
