//! The relay: `lab __relay <socket> <lock>`, one process beside the runs of a
//! lab node, in its own session of lab's tmux server (`lab-relay`). Every
//! exec shim hands it its agent's output (`handoff.rs`); the relay copies
//! each run's output to its pane and its log, as the shim would, but for all
//! runs at once and in rounds at least [`ROUND`] apart.
//!
//! Why (ADR 22): a shim copying its own agent's output wakes once for every
//! chunk the agent prints, and a hundred busy agents print a thousand
//! chunks a second; those wakeups were most of what lab cost beside bare
//! tmux. The relay wakes at most once a round for all of them, and the tmux
//! server, which now receives the panes' output in batches, wakes less too.
//! A round begins at once after a quiet spell, so a lone keystroke's echo is
//! not delayed; only output that follows within [`ROUND`] waits for the
//! next round.
//!
//! The relay survives lab's restarts (it lives in lab's tmux server, as the
//! runs do). If it ends, each shim takes its run back and copies on its own
//! (`handoff::wait_released`), and lab starts a new relay for the runs that
//! start after (`keeper.rs`), as it does for a relay that holds its lock but
//! does not answer. What the relay reads it appends to the log in the same
//! round (the pane may get it later, when tmux is behind); a relay killed
//! between a read and its write loses that read, and a pane that was behind
//! misses what it had not taken (the log has it).
//!
//! Invariant: the relay copies bytes and never reads them: nothing an agent
//! prints changes what the relay does.

pub mod handoff;
pub mod keeper;
mod rounds;

use std::path::Path;
use std::time::Duration;

/// The relay's tmux session. Not a run's name (`run::session_run_id` reads
/// no id from it); `Tmux::panes` leaves it out.
pub const SESSION: &str = "lab-relay";

/// The least time between the starts of two rounds.
pub const ROUND: Duration = Duration::from_millis(4);

/// The relay's body: listens on `socket` while it holds `lock` (`flock`;
/// lab starts a relay when the lock is free). Returns the process's exit
/// code when it ends.
pub fn main(socket: &Path, lock: &Path) -> i32 {
    let held = match keeper::open_lock(lock) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("lab relay: cannot open {}: {e}", lock.display());
            return 1;
        }
    };
    // lab asks whether a relay runs by taking the lock for an instant: a
    // few tries tell that from a relay that holds it.
    let mut tries = 0;
    while rustix::fs::flock(&held, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        tries += 1;
        if tries == 50 {
            eprintln!("lab relay: another relay holds {}", lock.display());
            return 0;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    raise_open_files();
    keep_to_itself();
    let path = socket;
    let _ = std::fs::remove_file(path);
    let listener = match std::os::unix::net::UnixListener::bind(path) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("lab relay: cannot listen on {}: {e}", path.display());
            return 1;
        }
    };
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    match rounds::Relay::new(listener).and_then(|mut r| r.run()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("lab relay: {e}");
            1
        }
    }
    // `held` keeps the lock until the process ends.
}

/// The relay's pane is a terminal a person may attach to: nothing typed
/// there may stop, interrupt or pause the relay (raw mode: no signals from
/// keys, no XON/XOFF; the job-control signals ignored).
fn keep_to_itself() {
    // The same signals the exec shim ignores while its agent runs.
    super::exec::ignore_job_control();
    use rustix::termios::{OptionalActions, tcgetattr, tcsetattr};
    let stdin = rustix::stdio::stdin();
    if let Ok(mut t) = tcgetattr(stdin) {
        t.make_raw();
        let _ = tcsetattr(stdin, OptionalActions::Now, &t);
    }
}

/// Four descriptors a run: as many as the hard limit lets this process open.
fn raise_open_files() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut l = getrlimit(Resource::Nofile);
    if l.current < l.maximum {
        l.current = l.maximum;
        let _ = setrlimit(Resource::Nofile, l);
    }
}
