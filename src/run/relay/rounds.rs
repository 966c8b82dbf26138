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

use super::handoff::{self, Refused, TAKEN};

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
    /// A connection whose hello has not arrived.
    Greeting(UnixStream),
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
                // WouldBlock: none left; anything else (out of descriptors):
                // the shim finds no relay and copies on its own.
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
            Some(Slot::Greeting(conn)) => match handoff::receive(&conn) {
                Ok(h) => self.take(slot, conn, h),
                Err(Refused::NotYet) => self.slots[slot] = Some(Slot::Greeting(conn)),
                Err(Refused::Bad(why)) => {
                    eprintln!("lab relay: a connection refused: {why}");
                    let _ = epoll::delete(&self.ep, &conn);
                    self.freed.push(slot);
                }
            },
            // A run's shim never writes after its hello: this is its end.
            Some(Slot::Run(run)) => self.close(slot, run),
            None => {}
        }
    }

    /// Takes over a run's output, and says so.
    fn take(&mut self, slot: usize, mut conn: UnixStream, h: handoff::Handed) {
        let ok = epoll::add(&self.ep, &h.master, token(slot, AGENT), EventFlags::IN).is_ok();
        // The shim waits for the answer; one that gave up meanwhile closed
        // its end, and the next round ends the run here.
        if !ok || conn.write_all(TAKEN).is_err() {
            let _ = epoll::delete(&self.ep, &h.master);
            let _ = epoll::delete(&self.ep, &conn);
            self.freed.push(slot);
            return;
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
                            self.fall_behind(slot, &run);
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
    /// until it did.
    fn fall_behind(&self, slot: usize, run: &Run) {
        let _ = epoll::delete(&self.ep, &run.master);
        if let Some(pane) = &run.pane {
            let _ = epoll::add(&self.ep, pane, token(slot, PANE), EventFlags::OUT);
        }
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
