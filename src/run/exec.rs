//! The exec shim: `lab __exec <launch file>`, the program every run's pane
//! starts with.
//!
//! tmux limits a client's command line to ~16 KB and reads some arguments as
//! formats or separators. So the agent's argv and environment never travel
//! through tmux: lab writes them to a launch file (mode 0600, in the run's
//! folder), tmux runs the shim with only lab-made arguments, and the shim
//! reads the file, deletes it (it holds the run's token), sets the exact
//! environment, changes into the workspace, and starts the agent.
//!
//! The shim stays as the agent's parent and the pane's process, waits for the
//! agent, and writes how it ended to the run's exit file before it exits with
//! the same status. lab reads the exit status from that file: tmux learns a
//! pane's status from SIGCHLD, and on a loaded machine it was seen to report
//! a pane dead seconds before (or without ever) reporting its status. While
//! it waits, the shim ignores the keyboard's signals (Ctrl-C in an attached
//! session is for the agent, as with a shell's foreground job).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Everything the shim needs to start an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The agent's environment, whole (built by `run::env` from an
    /// allow-list); only the pane's terminal type is added to it.
    pub env: BTreeMap<String, String>,
    /// Folders put in front of `PATH` (where `labctl` lives).
    pub path_prepend: Vec<PathBuf>,
    /// Where the shim writes how the agent ended.
    pub exit_file: PathBuf,
    /// The run's log: the shim pipes its pane into it before anything else
    /// (see [`PaneLog`]).
    pub log: PaneLog,
    /// The relay's socket, when lab has one running: the shim hands it the
    /// agent's output to copy (ADR 22).
    #[serde(default)]
    pub relay: Option<PathBuf>,
    /// The run's control groups, which the agent joins before it starts
    /// (`cgroup.rs`); the shim itself stays out of them.
    #[serde(default)]
    pub cgroups: Vec<PathBuf>,
    /// cgroup v1's memory group of the run, watched for an OOM: the shim
    /// then ends the whole run (v2 does it by itself).
    #[serde(default)]
    pub oom_watch: Option<PathBuf>,
}

/// Where the pane's output goes. The shim attaches the pipe itself, from
/// inside the pane and before the agent exists, so no output is missed and
/// lab's start call stays a bare `new-session`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneLog {
    /// lab's tmux socket.
    pub socket: PathBuf,
    /// The log file (appended to).
    pub file: PathBuf,
}

/// How an agent ended, as the shim saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentExit {
    /// Exit status, when the agent exited.
    pub code: Option<i64>,
    /// The signal that ended it, when one did.
    pub signal: Option<i64>,
    /// Whether the run passed its memory limit and was ended for it.
    #[serde(default)]
    pub oom: bool,
}

impl AgentExit {
    /// Reads an exit file, if the shim wrote one.
    pub fn read(path: &Path) -> Option<AgentExit> {
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    }

    fn write(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec(self).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(&tmp, path)
    }
}

impl Launch {
    /// Writes the launch file, readable by this user only.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        // No fsync: the shim reads the file within milliseconds, and a crash
        // before that fails the run anyway.
        f.write_all(&json)
    }

    /// The environment the agent gets: the one lab built for it, plus the
    /// pane's terminal type. Nothing else of the pane's environment passes
    /// (tmux's `TMUX` and `TMUX_PANE` there point at lab's server).
    pub fn environment(
        &self,
        pane: impl Iterator<Item = (String, String)>,
    ) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = pane
            .filter(|(k, _)| PANE_VARS.contains(&k.as_str()))
            .collect();
        env.extend(self.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        if !self.path_prepend.is_empty() {
            let mut parts: Vec<String> = self
                .path_prepend
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if let Some(old) = env.get("PATH") {
                parts.push(old.clone());
            }
            env.insert("PATH".into(), parts.join(":"));
        }
        env
    }
}

/// What the agent takes from its pane's environment: the terminal tmux
/// draws it in.
const PANE_VARS: &[&str] = &["TERM", "COLORTERM"];

/// The run's log, appended to (never through a link).
fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Records that the agent never started, as the exit status `code`, and
/// returns it for the shim to exit with.
fn failed_to_start(launch: &Launch, code: i64) -> i32 {
    let _ = AgentExit {
        code: Some(code),
        signal: None,
        oom: false,
    }
    .write(&launch.exit_file);
    code as i32
}

/// The shim's body. Returns only on failure, with the exit code to use.
pub fn exec_main(launch_file: &Path) -> i32 {
    let launch: Launch = match std::fs::read(launch_file)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "lab: cannot read the launch file {}: {e}",
                launch_file.display()
            );
            return 126;
        }
    };
    let _ = std::fs::remove_file(launch_file);
    // The log first, so that every later failure is in it. The agent gets a
    // terminal of its own, whose output this process copies to the pane and
    // to the log (`pty.rs`); where that cannot be made, the pane is piped
    // into the log by tmux (`pipe-pane`) and the agent gets the pane's.
    let relay = open_log(&launch.log.file)
        .ok()
        .and_then(|log| Some((log, super::pty::Pty::open(rustix::stdio::stdin()).ok()?)));
    let mut log = relay.as_ref().and_then(|(l, _)| l.try_clone().ok());
    let mut fail = |msg: String, code: i64| {
        eprintln!("{msg}");
        if let Some(l) = log.as_mut() {
            let _ = writeln!(l, "{msg}\r");
        }
        failed_to_start(&launch, code)
    };
    if relay.is_none() {
        let pane = std::env::var("TMUX_PANE").unwrap_or_default();
        if let Err(e) = super::tmux::attach_log(&launch.log.socket, &pane, &launch.log.file) {
            return fail(
                format!("lab: cannot send this pane's output to the run's log: {e}"),
                126,
            );
        }
    }
    if let Err(e) = std::env::set_current_dir(&launch.cwd) {
        return fail(
            format!(
                "lab: cannot enter the workspace {}: {e}",
                launch.cwd.display()
            ),
            126,
        );
    }
    let env = launch.environment(std::env::vars());
    let mut cmd = std::process::Command::new(&launch.program);
    cmd.args(&launch.args).env_clear().envs(&env);
    if !launch.cgroups.is_empty() {
        match super::cgroup::open_procs(&launch.cgroups) {
            Ok(procs) => super::cgroup::join_in_child(&mut cmd, procs),
            Err(e) => {
                return fail(
                    format!("lab: cannot put the agent in the run's control group: {e}"),
                    126,
                );
            }
        }
    }
    let spawned = match &relay {
        Some((_, pty)) => pty.spawn(&mut cmd),
        None => cmd.spawn(),
    };
    // The command keeps the copies of the agent's terminal it gave the
    // child: without them, the terminal closes when the agent (and every
    // child of it) has, and the last output is read to its end at once.
    drop(cmd);
    let mut child = match spawned {
        Ok(c) => c,
        Err(err) => {
            let code = if err.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return fail(
                format!("lab: cannot start {}: {err}", launch.program.display()),
                code,
            );
        }
    };
    ignore_job_control();
    let oom = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let Some(dir) = launch.oom_watch.clone() {
        // The watcher must not take the pane's SIGWINCH (`pty.rs`).
        super::pty::block_winch();
        let (flag, pid) = (oom.clone(), child.id());
        let _ = std::thread::Builder::new()
            .name("oom-watch".into())
            .spawn(move || super::cgroup::watch_oom(&dir, pid, &flag));
    }
    let waited = match relay {
        Some((log, pty)) => pty.relay(
            rustix::stdio::stdin(),
            &mut child,
            log,
            launch.relay.as_deref(),
        ),
        None => loop {
            match child.wait() {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        },
    };
    let status = match waited {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lab: lost the agent: {e}");
            return 125;
        }
    };
    use std::os::unix::process::ExitStatusExt;
    let exit = AgentExit {
        code: status.code().map(i64::from),
        signal: status.signal().map(i64::from),
        oom: oom.load(std::sync::atomic::Ordering::SeqCst),
    };
    if let Err(e) = exit.write(&launch.exit_file) {
        eprintln!(
            "lab: cannot record the agent's exit in {}: {e}",
            launch.exit_file.display()
        );
    }
    match (exit.code, exit.signal) {
        (Some(c), _) => c as i32,
        (None, Some(sig)) => 128 + sig as i32,
        (None, None) => 125,
    }
}

/// The shim waits like a shell waits for its foreground job: the keyboard's
/// signals are for the agent. Ignored only after the agent started, so the
/// agent keeps the default handling. SIGHUP is not ignored: when the terminal
/// goes (the session or the tmux server is killed), the shim ends and the
/// kernel hangs up the agent with it.
pub(super) fn ignore_job_control() {
    use crate::sys::{Signal, ignore};
    for sig in [
        Signal::Int,
        Signal::Quit,
        Signal::Tstp,
        Signal::Ttin,
        Signal::Ttou,
    ] {
        ignore(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_is_lab_s_plus_the_terminal() {
        let l = Launch {
            program: "/bin/true".into(),
            args: vec![],
            cwd: "/".into(),
            env: [
                ("LAB_RUN_ID".to_owned(), "7".to_owned()),
                ("PATH".to_owned(), "/usr/bin".to_owned()),
                ("HOME".to_owned(), "/home/agent".to_owned()),
            ]
            .into(),
            path_prepend: vec!["/opt/lab/bin".into()],
            exit_file: "/x/exit.json".into(),
            log: PaneLog {
                socket: "/x/tmux.sock".into(),
                file: "/x/output.log".into(),
            },
            relay: None,
            cgroups: Vec::new(),
            oom_watch: None,
        };
        let env = l.environment(
            [
                ("PATH".to_owned(), "/pane/bin".to_owned()),
                ("TERM".to_owned(), "tmux-256color".to_owned()),
                ("TMUX".to_owned(), "/x/tmux.sock,1,0".to_owned()),
                ("TMUX_PANE".to_owned(), "%3".to_owned()),
                ("HOME".to_owned(), "/root".to_owned()),
                (
                    "LAB_DATABASE_URL".to_owned(),
                    "postgres://secret".to_owned(),
                ),
            ]
            .into_iter(),
        );
        assert_eq!(env["PATH"], "/opt/lab/bin:/usr/bin");
        assert_eq!(env["LAB_RUN_ID"], "7");
        assert_eq!(env["HOME"], "/home/agent");
        assert_eq!(env["TERM"], "tmux-256color");
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(names, ["HOME", "LAB_RUN_ID", "PATH", "TERM"]);
    }
}
