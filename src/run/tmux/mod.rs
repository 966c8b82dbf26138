//! lab's own tmux server: one socket in the data dir, sessions made only by
//! lab, commands built with `tmux_interface` and run without a shell.
//!
//! What tmux does to arguments, and what this module does about it:
//! - a final `;` separates commands and `-s`, `-c`, `-F` and `pipe-pane`'s
//!   command are read as formats: every argument is escaped (`args.rs`);
//! - dead panes are kept (`remain-on-exit`, set server-wide) until lab has
//!   read their exit status;
//! - `-t name` matches by prefix: targets are always `=name` (`=name:` for a
//!   window or pane);
//! - a client command line may not exceed ~16 KB: the agent's own argv never
//!   reaches tmux. The pane runs `lab __exec <launch file>`, which reads the
//!   argv and environment from a file and execs the agent (see `exec.rs`).
//!
//! Invariant: this is the only module that runs tmux.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

mod args;
mod input;
pub use input::INPUT_PIECE;

pub use args::MAX_SOCKET_PATH;
use args::{arg, fmt_arg, shell_quote, socket_path};

use tmux_interface::{
    CapturePane, KillSession, ListPanes, NewSession, PipePane, SetOption, Tmux as TmuxCmd,
    TmuxCommand, TmuxCommands,
};

#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    #[error("cannot run tmux: {0} (is tmux installed?)")]
    Spawn(std::io::Error),
    #[error("tmux {what} failed: {message}")]
    Failed { what: &'static str, message: String },
    #[error("{0}")]
    Setup(String),
}

impl TmuxError {
    /// Whether tmux said the target session (or its whole server) is not
    /// there: a run whose session ended. tmux's words are read here only.
    pub fn session_gone(&self) -> bool {
        matches!(self, TmuxError::Failed { message, .. }
            if message.contains("can't find") || message.contains("no server") || no_server(message))
    }
}

/// One pane of lab's server (lab makes one pane per session).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pane {
    pub session: String,
    pub pid: i64,
    pub dead: bool,
    /// Rows of the pane's screen.
    pub height: usize,
    /// Exit status when the process exited normally.
    pub status: Option<i64>,
    /// The signal that ended the process, when one did.
    pub signal: Option<i64>,
}

/// What the pane runs: program and arguments, all made by lab.
pub struct SpawnArgs<'a> {
    pub session: &'a str,
    pub cwd: &'a Path,
    pub argv: &'a [String],
}

pub struct Tmux {
    socket: PathBuf,
    conf: PathBuf,
    /// The tmux program, by its full path when it is on `PATH` (see
    /// `run::on_path`: a client started by name costs a fork of lab).
    bin: PathBuf,
    calls: AtomicU64,
}

/// The size of every pane lab makes: what a run's screen is replayed at.
pub const PANE_ROWS: u16 = 50;
pub const PANE_COLS: u16 = 200;

const PANE_FORMAT: &str = "#{session_name}\t#{pane_pid}\t#{pane_dead}\t#{pane_height}\t#{pane_dead_status}\t#{pane_dead_signal}";

/// The only variables a tmux client of lab's keeps: what tmux needs to find
/// its programs and draw (the locale decides how it reads UTF-8).
const CLIENT_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
];

/// Clears a tmux client's environment down to [`CLIENT_ENV`].
pub fn scrub_env(c: &mut std::process::Command) {
    c.env_clear();
    for name in CLIENT_ENV {
        if let Some(v) = std::env::var_os(name) {
            c.env(name, v);
        }
    }
}

/// Most screens one capture call reads (the client's command line is
/// limited to ~16 KB; each capture is about 35 bytes of it).
pub const MAX_CAPTURES: usize = 300;

impl Tmux {
    /// Prepares lab's tmux server for this data dir: the socket path (a short
    /// fallback under the runtime or temp dir when the data dir's is too long
    /// for a Unix socket) and the config file the server starts with.
    pub fn new(data_dir: &Path, unset_env: &[String]) -> Result<Tmux, TmuxError> {
        let socket = socket_path(data_dir)?;
        let conf = data_dir.join("tmux.conf");
        let mut text = String::from(
            "# Written by lab at start-up; read when lab starts its tmux server.\n\
             set-option -g remain-on-exit on\n\
             set-option -g automatic-rename off\n\
             set-option -g history-limit 50000\n\
             set-option -g status-right 'lab run #S'\n",
        );
        for var in unset_env {
            text.push_str(&format!("set-environment -g -u {var}\n"));
        }
        std::fs::write(&conf, text)
            .map_err(|e| TmuxError::Setup(format!("cannot write {}: {e}", conf.display())))?;
        Ok(Tmux {
            socket,
            conf,
            bin: crate::run::on_path::find("tmux").unwrap_or_else(|| PathBuf::from("tmux")),
            calls: AtomicU64::new(0),
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// tmux client processes started so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// What a person types to attach to a session.
    pub fn attach_command(&self, session: &str) -> String {
        format!(
            "tmux -S {} attach-session -t ={session}",
            shell_quote(&self.socket.to_string_lossy())
        )
    }

    fn base(&self) -> TmuxCmd<'static> {
        TmuxCmd::new()
            .socket_path(arg(&self.socket.to_string_lossy()))
            .file(arg(&self.conf.to_string_lossy()))
    }

    async fn run(
        &self,
        what: &'static str,
        cmd: TmuxCommand<'static>,
    ) -> Result<String, TmuxError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let mut c = tokio::process::Command::new(&self.bin);
        c.args(cmd.to_command().get_args());
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // The client that starts lab's tmux server gives it its environment,
        // which every pane then inherits and `show-environment -g` shows: so
        // no client of lab's carries lab's own (database URL, forge tokens;
        // `TMUX` when lab itself runs inside tmux would confuse the client).
        scrub_env(c.as_std_mut());
        let out = c.output().await.map_err(TmuxError::Spawn)?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        Err(TmuxError::Failed {
            what,
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }

    /// Makes a server that is already running keep dead panes and leave
    /// window names alone (a server lab starts reads the same from its
    /// config). Call once at start-up, so that starting a run needs no
    /// per-session option.
    ///
    /// `automatic-rename` is off because it costs: tmux looks up each busy
    /// pane's foreground process in `/proc` twice a second to name its
    /// window, about a quarter of what a server with a hundred busy panes
    /// spends (ADR 16). lab names its sessions itself.
    pub async fn prepare(&self) -> Result<(), TmuxError> {
        let mut cmds = TmuxCommands::new();
        for (option, value) in [("remain-on-exit", "on"), ("automatic-rename", "off")] {
            cmds = cmds.add_command(
                SetOption::new()
                    .global()
                    .option(option)
                    .value(value)
                    .build(),
            );
        }
        match self.run("set-option", chain(self.base(), cmds)).await {
            Ok(_) => Ok(()),
            Err(TmuxError::Failed { message, .. }) if no_server(&message) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Starts a detached session running `argv`, in one tmux call. Returns
    /// the pane's process id. The pane's output reaches the run's log through
    /// [`attach_log`], which the exec shim calls before it starts the agent.
    pub async fn spawn(&self, a: SpawnArgs<'_>) -> Result<i64, TmuxError> {
        let mut new = NewSession::new()
            .detached()
            .print()
            .format("#{pane_pid}")
            .session_name(fmt_arg(a.session))
            .start_directory(fmt_arg(&a.cwd.to_string_lossy()))
            .width(usize::from(PANE_COLS))
            .height(usize::from(PANE_ROWS))
            .build();
        // `--` then at least two arguments: tmux execs them directly, no shell.
        new.push_param("--");
        for part in a.argv {
            new.push_param(arg(part));
        }
        let out = self
            .run("new-session", self.base().command(new).build())
            .await?;
        out.trim().parse().map_err(|_| TmuxError::Failed {
            what: "new-session",
            message: format!("unexpected output {out:?}"),
        })
    }

    /// Every pane on lab's server but the relay's, in one tmux call. No
    /// server means no panes.
    pub async fn panes(&self) -> Result<Vec<Pane>, TmuxError> {
        let mut tries = 0;
        loop {
            let cmd = self
                .base()
                .command(ListPanes::new().all().format(PANE_FORMAT).build())
                .build();
            match self.run("list-panes", cmd).await {
                Ok(out) => {
                    return Ok(out
                        .lines()
                        .filter_map(parse_pane)
                        .filter(|p| p.session != crate::run::relay::SESSION)
                        .collect());
                }
                Err(TmuxError::Failed { message, .. }) if no_server(&message) => {
                    return Ok(Vec::new());
                }
                Err(TmuxError::Failed { message, .. }) if transient(&message) && tries < 3 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The visible screens of these panes, in one tmux call (at most
    /// [`MAX_CAPTURES`] panes). `capture-pane -p` prints exactly one line per
    /// row, so the output splits by the heights the pass just read; when the
    /// total does not match (a pane was resized meanwhile), nothing is
    /// returned and the next pass asks again.
    pub async fn screens(&self, panes: &[&Pane]) -> Result<Vec<(String, String)>, TmuxError> {
        let panes = &panes[..panes.len().min(MAX_CAPTURES)];
        if panes.is_empty() {
            return Ok(Vec::new());
        }
        let mut cmds = TmuxCommands::new();
        for p in panes {
            cmds = cmds.add_command(
                CapturePane::new()
                    .stdout()
                    .target_pane(format!("={}:", p.session))
                    .build(),
            );
        }
        let out = match self.run("capture-pane", chain(self.base(), cmds)).await {
            Ok(out) => out,
            // A session that went meanwhile stops the batch: next pass.
            Err(TmuxError::Failed { message, .. }) if message.contains("can't find") => {
                return Ok(Vec::new());
            }
            Err(e) => return Err(e),
        };
        let lines: Vec<&str> = out.lines().collect();
        if lines.len() != panes.iter().map(|p| p.height).sum::<usize>() {
            return Ok(Vec::new());
        }
        let mut at = 0;
        Ok(panes
            .iter()
            .map(|p| {
                let screen = lines[at..at + p.height].join("\n");
                at += p.height;
                (p.session.clone(), screen)
            })
            .collect())
    }

    /// The last line the relay's pane shows, if its session is there (a
    /// relay that ended said why on it).
    pub async fn relay_last_words(&self) -> Option<String> {
        let target = format!("={}:", crate::run::relay::SESSION);
        let cmd = CapturePane::new().stdout().target_pane(target).build();
        let out = self
            .run("capture-pane", self.base().command(cmd).build())
            .await
            .ok()?;
        out.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(str::to_owned)
    }

    /// Kills sessions, as few tmux calls as the command-length limit allows.
    /// Sessions that are already gone are not an error.
    pub async fn kill_sessions(&self, sessions: &[String]) -> Result<(), TmuxError> {
        let mut batch = TmuxCommands::new();
        let mut size = 0;
        let mut pending = 0;
        for s in sessions {
            let kill = KillSession::new().target_session(format!("={s}")).build();
            size += s.len() + 20;
            batch = batch.add_command(kill);
            pending += 1;
            if size > 12_000 {
                self.kill_batch(std::mem::take(&mut batch), sessions)
                    .await?;
                size = 0;
                pending = 0;
            }
        }
        if pending > 0 {
            self.kill_batch(batch, sessions).await?;
        }
        Ok(())
    }

    async fn kill_batch(
        &self,
        batch: TmuxCommands<'static>,
        all: &[String],
    ) -> Result<(), TmuxError> {
        match self.run("kill-session", chain(self.base(), batch)).await {
            Ok(_) => Ok(()),
            Err(TmuxError::Failed { message, .. }) if no_server(&message) => Ok(()),
            // One missing session stops the rest of a batch: kill one by one.
            Err(TmuxError::Failed { message, .. }) if message.contains("can't find session") => {
                for s in all {
                    let cmd = self
                        .base()
                        .command(KillSession::new().target_session(format!("={s}")).build())
                        .build();
                    match self.run("kill-session", cmd).await {
                        Ok(_) => {}
                        Err(TmuxError::Failed { message, .. })
                            if message.contains("can't find session") || no_server(&message) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// `tmux -V`.
    pub async fn version(&self) -> Result<String, TmuxError> {
        let out = self.run("-V", TmuxCmd::new().version().build()).await?;
        Ok(out.trim().to_owned())
    }
}

/// Joins commands with tmux's `;` separator into one client call.
fn chain(base: TmuxCmd<'static>, mut cmds: TmuxCommands<'static>) -> TmuxCommand<'static> {
    cmds.separator(";");
    base.commands(cmds).build()
}

/// The server is not there, or has no sessions: no panes.
fn no_server(message: &str) -> bool {
    message.contains("no server running")
        || message.contains("no current target")
        || (message.contains("error connecting to") && message.contains("No such file"))
}

/// The server went away while answering (it exits with its last session):
/// asking again gets a clear answer.
fn transient(message: &str) -> bool {
    message.contains("server exited unexpectedly") || message.contains("lost server")
}

fn parse_pane(line: &str) -> Option<Pane> {
    let mut f = line.split('\t');
    let session = f.next()?.to_owned();
    let pid = f.next()?.parse().ok()?;
    let dead = f.next()? == "1";
    let height = f.next()?.parse().ok()?;
    let num = |s: Option<&str>| s.and_then(|s| s.parse().ok());
    Some(Pane {
        session,
        pid,
        dead,
        height,
        status: num(f.next()),
        signal: num(f.next()),
    })
}

/// Appends everything `pane` prints from now on to `log` (`pipe-pane`; the
/// command runs under `sh` in the tmux server). Blocking: the exec shim calls
/// it from inside the pane before it starts the agent, so lab's own start
/// call is a bare `new-session` and no output is printed before the pipe.
pub fn attach_log(socket: &Path, pane: &str, log: &Path) -> Result<(), TmuxError> {
    if !pane.starts_with('%') {
        return Err(TmuxError::Setup(format!(
            "not inside a tmux pane (TMUX_PANE is {pane:?})"
        )));
    }
    let pipe_cmd = format!("exec cat >> {}", shell_quote(&log.to_string_lossy()));
    let cmd = TmuxCmd::new()
        .socket_path(arg(&socket.to_string_lossy()))
        .command(
            PipePane::new()
                .target_pane(arg(pane))
                .shell_command(fmt_arg(&pipe_cmd))
                .build(),
        )
        .build();
    let mut c = cmd.to_command();
    c.stdin(Stdio::null());
    scrub_env(&mut c);
    let out = c.output().map_err(TmuxError::Spawn)?;
    if out.status.success() {
        return Ok(());
    }
    Err(TmuxError::Failed {
        what: "pipe-pane",
        message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_attached_only_from_inside_a_pane() {
        let e = attach_log(Path::new("/nonexistent/sock"), "", Path::new("/tmp/x.log"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not inside a tmux pane"), "{e}");
        let e = attach_log(
            Path::new("/nonexistent/sock"),
            "%1",
            Path::new("/tmp/x.log"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("pipe-pane failed"), "{e}");
    }

    #[test]
    fn the_client_is_started_by_its_full_path() {
        let dir = tempfile::tempdir().unwrap();
        let t = Tmux::new(dir.path(), &[]).unwrap();
        assert!(t.bin.is_absolute(), "{}", t.bin.display());
        assert!(t.bin.ends_with("tmux"), "{}", t.bin.display());
    }

    #[test]
    fn panes_parse() {
        assert_eq!(
            parse_pane("lab-1-x\t42\t1\t50\t3\t"),
            Some(Pane {
                session: "lab-1-x".into(),
                pid: 42,
                dead: true,
                height: 50,
                status: Some(3),
                signal: None
            })
        );
        assert_eq!(
            parse_pane("lab-2-x\t43\t0\t50\t\t"),
            Some(Pane {
                session: "lab-2-x".into(),
                pid: 43,
                dead: false,
                height: 50,
                status: None,
                signal: None
            })
        );
        assert_eq!(parse_pane("garbage"), None);
    }
}
