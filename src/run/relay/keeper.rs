//! lab's side of the relay: where it listens, whether it runs, and starting
//! it in lab's tmux server when it does not.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::SESSION;
use crate::run::tmux::{SpawnArgs, Tmux};

/// How long a relay just started may take to listen before the run goes on
/// without it (its shim copies on its own).
const START_WAIT: Duration = Duration::from_secs(2);

/// After a relay failed to start, how long launches go without one before
/// lab tries again (so that each launch does not wait [`START_WAIT`]).
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// How long a relay's answer stands: a launch within it does not ask again
/// while that relay (its socket, by inode) still holds the lock. A ping
/// waits for one of the relay's rounds, which cost a start 6 to 12 ms
/// (issue 40 §11); a relay stuck since its last answer costs a run's shim
/// its 5 s wait, then the shim copies on its own and the next launch after
/// the answer's time asks again.
const ANSWER_STANDS: Duration = Duration::from_secs(10);

/// A socket file's inode and change time.
type SocketId = (u64, i64, i64);

pub struct Keeper {
    socket: PathBuf,
    lock: PathBuf,
    exe: PathBuf,
    /// Off (`--no-relay`): no relay is started and every shim copies its own.
    enabled: bool,
    /// One start at a time: two launches that both found no relay must not
    /// kill each other's new one.
    starting: tokio::sync::Mutex<()>,
    /// When a relay last failed to start.
    gave_up: std::sync::Mutex<Option<Instant>>,
    /// Relays started so far.
    starts: std::sync::atomic::AtomicU64,
    /// When a relay last answered a ping, and its socket's identity.
    answered: std::sync::Mutex<Option<(Instant, SocketId)>>,
}

/// The lock file, opened (made 0600 if it is not there).
pub fn open_lock(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

impl Keeper {
    /// The relay of the tmux server at `tmux_socket`: its files sit beside
    /// that socket (hidden from every run, like it), and it runs `exe`.
    pub fn new(tmux_socket: &Path, exe: &Path, enabled: bool) -> Keeper {
        Keeper {
            enabled,
            socket: tmux_socket.with_extension("relay"),
            lock: tmux_socket.with_extension("relay-lock"),
            exe: exe.to_path_buf(),
            starting: tokio::sync::Mutex::new(()),
            gave_up: std::sync::Mutex::new(None),
            starts: std::sync::atomic::AtomicU64::new(0),
            answered: std::sync::Mutex::new(None),
        }
    }

    /// Whether runs hand their output to a relay (not `--no-relay`).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Where the relay listens.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Whether a relay holds the lock (it takes it before it listens, and
    /// keeps it until it ends).
    pub fn running(&self) -> bool {
        let Ok(f) = open_lock(&self.lock) else {
            return false;
        };
        match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            // Free: nobody runs. Closing the file lets go again.
            Ok(()) => false,
            Err(_) => true,
        }
    }

    /// Whether a relay of this version answers on the socket (a blocking
    /// question of at most [`handoff::ANSWER_WAIT`], asked off the runtime).
    async fn answers(&self) -> bool {
        if !self.running() {
            return false;
        }
        let socket = self.socket.clone();
        let answered = tokio::task::spawn_blocking(move || super::handoff::ping(&socket))
            .await
            .unwrap_or(false);
        *self.answered.lock().expect("poisoned") = answered
            .then(|| Some((Instant::now(), self.socket_id()?)))
            .flatten();
        answered
    }

    /// The relay socket's identity: a new relay binds a new socket (its
    /// inode may be the old one's, freed a moment before; its change time
    /// is not).
    fn socket_id(&self) -> Option<SocketId> {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(&self.socket)
            .ok()
            .map(|m| (m.ino(), m.ctime(), m.ctime_nsec()))
    }

    /// The relay's socket once a relay of this version answers there,
    /// starting one if none does (and replacing one that holds the lock
    /// but does not answer: stuck, or of another version); `None` when none
    /// could be started (runs copy on their own; lab tries again a minute
    /// later).
    pub async fn ensure(&self, tmux: &Tmux) -> Option<PathBuf> {
        if !self.enabled || self.socket.as_os_str().len() > super::super::tmux::MAX_SOCKET_PATH {
            return None;
        }
        let starts = self.starts.load(std::sync::atomic::Ordering::SeqCst);
        let answered = *self.answered.lock().expect("poisoned");
        let recent = answered
            .is_some_and(|(t, ino)| t.elapsed() < ANSWER_STANDS && self.socket_id() == Some(ino));
        if (recent && self.running()) || self.answers().await {
            return Some(self.socket.clone());
        }
        let _one = self.starting.lock().await;
        // Another launch started one while this one waited: ask it.
        if self.starts.load(std::sync::atomic::Ordering::SeqCst) != starts && self.answers().await {
            return Some(self.socket.clone());
        }
        if self
            .gave_up
            .lock()
            .expect("poisoned")
            .is_some_and(|t| t.elapsed() < RETRY_AFTER)
        {
            return None;
        }
        if self.running() {
            tracing::warn!(
                socket = %self.socket.display(),
                "the output relay does not answer; replacing it (its runs copy their own output)"
            );
            let _ = tmux.kill_sessions(&[SESSION.to_owned()]).await;
            let began = Instant::now();
            while self.running() && began.elapsed() < START_WAIT {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        self.start(tmux).await;
        let began = Instant::now();
        while began.elapsed() < START_WAIT {
            if self.answers().await {
                *self.gave_up.lock().expect("poisoned") = None;
                self.starts
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                return Some(self.socket.clone());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tracing::warn!(
            socket = %self.socket.display(),
            "the output relay did not start; runs copy their own output"
        );
        *self.gave_up.lock().expect("poisoned") = Some(Instant::now());
        None
    }

    async fn start(&self, tmux: &Tmux) {
        // A relay that ended leaves its pane (remain-on-exit): say why it
        // ended, and make room for the new one.
        if let Some(last) = tmux.relay_last_words().await {
            tracing::warn!(said = %last, "the output relay had ended; starting a new one");
        }
        let _ = tmux.kill_sessions(&[SESSION.to_owned()]).await;
        let argv = [
            self.exe.to_string_lossy().into_owned(),
            "__relay".to_owned(),
            self.socket.to_string_lossy().into_owned(),
            self.lock.to_string_lossy().into_owned(),
        ];
        let cwd = self.socket.parent().unwrap_or(Path::new("/"));
        if let Err(e) = tmux
            .spawn(SpawnArgs {
                session: SESSION,
                cwd,
                argv: &argv,
            })
            .await
        {
            tracing::warn!(error = %e, "cannot start the output relay");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_means_running() {
        let dir = tempfile::tempdir().unwrap();
        let k = Keeper::new(&dir.path().join("tmux.sock"), Path::new("/bin/true"), true);
        assert_eq!(k.socket(), dir.path().join("tmux.relay"));
        assert!(!k.running(), "nobody holds the lock");
        assert!(!k.running(), "asking does not keep it");
        let held = open_lock(&dir.path().join("tmux.relay-lock")).unwrap();
        rustix::fs::flock(&held, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
        assert!(k.running());
        drop(held);
        assert!(!k.running());
    }
}
