//! The sandbox every run's agent starts in (ADR 12): bubblewrap, with the
//! whole machine read-only, lab's data dir and tmux socket hidden, a private
//! `/tmp`, its own process namespace (lab's processes and their
//! environments cannot be seen), no capabilities, and writable only: its
//! workspace, its CLI's own config and credential files, and what the
//! operator adds. The network is shared: the agent reaches the model APIs
//! and lab's API (with its run token only).
//!
//! This module only builds the command line and probes the machine; the
//! exec shim runs it (`bwrap … -- <agent argv>`).

use std::path::{Path, PathBuf};

/// Whether runs can be sandboxed on this node, found at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    /// bubblewrap runs here, at this path.
    Ready(PathBuf),
    /// It cannot be had: why, and what to do about it.
    Missing { why: String, fix: String },
}

impl Availability {
    pub fn bwrap(&self) -> Option<&Path> {
        match self {
            Availability::Ready(p) => Some(p),
            Availability::Missing { .. } => None,
        }
    }
}

/// What the operator and lab say about every run's sandbox.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Paths no run may see: lab's data dir, its tmux socket's folder, the
    /// database's local sockets and files.
    pub hidden: Vec<PathBuf>,
    /// Paths every run may read although they lie in a hidden or private
    /// place (`--sandbox-ro`).
    pub read_only: Vec<PathBuf>,
    /// Paths every run may write (`--sandbox-rw`).
    pub writable: Vec<PathBuf>,
}

/// What every sandbox starts from: the machine read-only, a fresh `/dev`
/// and `/proc`, a private `/tmp`, namespaces of its own for processes, IPC
/// and the host name, no capabilities, and an end with its parent.
const BASE: &[&str] = &[
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
];

/// One run's sandbox.
#[derive(Debug, Clone)]
pub struct RunSandbox<'a> {
    pub policy: &'a Policy,
    pub workspace: &'a Path,
    /// The repo's objects the workspace borrows (a mirror inside the data dir).
    pub objects: Option<&'a Path>,
    /// The CLI's own config and credential files and folders.
    pub cli_state: &'a [PathBuf],
    /// The programs the run needs, readable even where they lie in a hidden
    /// or private place (`/tmp`): the agent's, and the folder of lab's own
    /// binaries (`labctl`, which the agent runs).
    pub programs: &'a [PathBuf],
}

impl RunSandbox<'_> {
    /// bubblewrap's arguments, up to and including the `--` before the
    /// agent's argv. Order matters: later mounts cover earlier ones, so the
    /// hidden places are covered after the operator's paths are bound and
    /// before the run's own are bound back.
    pub fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = BASE.iter().map(|s| (*s).to_owned()).collect();
        let mut bind = |flag: &str, p: &Path| {
            a.push(flag.to_owned());
            a.push(p.to_string_lossy().into_owned());
            if flag != "--tmpfs" {
                a.push(p.to_string_lossy().into_owned());
            }
        };
        for p in real(&self.policy.read_only) {
            bind("--ro-bind", &p);
        }
        for p in real(&self.policy.writable) {
            bind("--bind", &p);
        }
        for p in real(&self.policy.hidden).iter().filter(|p| p.is_dir()) {
            bind("--tmpfs", p);
        }
        if let Some(o) = self.objects {
            for p in real(&[o.to_path_buf()]) {
                bind("--ro-bind", &p);
            }
        }
        for p in real(self.programs) {
            bind("--ro-bind", &p);
        }
        for p in real(self.cli_state) {
            bind("--bind", &p);
        }
        let ws = real(&[self.workspace.to_path_buf()])
            .pop()
            .unwrap_or_else(|| self.workspace.to_path_buf());
        bind("--bind", &ws);
        a.push("--chdir".to_owned());
        a.push(ws.to_string_lossy().into_owned());
        a.push("--".to_owned());
        a
    }
}

/// The paths that exist, each as the real path bubblewrap mounts on (no
/// symbolic link in it: `/var/run` is `/run` on most systems), once.
fn real(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in paths.iter().filter_map(|p| p.canonicalize().ok()) {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The variables a sandboxed run gets so that caches land in its private
/// `/tmp` rather than in the read-only home.
pub const ENV: &[(&str, &str)] = &[
    ("XDG_CACHE_HOME", "/tmp/.cache"),
    ("npm_config_cache", "/tmp/.npm"),
    ("TMPDIR", "/tmp"),
];

/// Finds bubblewrap (`bin`, or `bwrap` on `PATH`) and checks that it can
/// make a sandbox here: a user or mount namespace may be refused by the
/// kernel or a container.
pub async fn probe(bin: Option<&Path>) -> Availability {
    let fix = "install bubblewrap (Debian: apt-get install bubblewrap) and allow user \
               namespaces, or allow unsandboxed runs (labctl settings set --allow-unsandboxed true)"
        .to_owned();
    let path = match bin {
        Some(p) => p.to_path_buf(),
        None => match super::on_path::find("bwrap") {
            Some(p) => p,
            None => {
                return Availability::Missing {
                    why: "bubblewrap (bwrap) is not on lab's PATH".into(),
                    fix,
                };
            }
        },
    };
    let out = tokio::process::Command::new(&path)
        .args(BASE)
        .args(["--", "true"])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(std::time::Duration::from_secs(10), out).await {
        Ok(Ok(o)) if o.status.success() => Availability::Ready(path),
        Ok(Ok(o)) => Availability::Missing {
            why: format!(
                "{} cannot make a sandbox here: {}",
                path.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            fix,
        },
        Ok(Err(e)) => Availability::Missing {
            why: format!("cannot run {}: {e}", path.display()),
            fix,
        },
        Err(_) => Availability::Missing {
            why: format!("{} did not answer within 10 s", path.display()),
            fix,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_places_are_covered_before_the_run_s_own_come_back() {
        let tmp = tempfile::tempdir().unwrap();
        let lab = tmp.path().canonicalize().unwrap().join("lab");
        let ws = lab.join("workspaces/7");
        std::fs::create_dir_all(&ws).unwrap();
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let policy = Policy {
            hidden: vec![lab.clone(), "/no/such/folder".into()],
            read_only: vec!["/no/such/tools".into()],
            writable: vec![],
        };
        let a = RunSandbox {
            policy: &policy,
            workspace: &ws,
            objects: None,
            cli_state: &[],
            programs: &["/bin/sh".into()],
        }
        .args();
        let at = |flag: &str, p: &str| {
            a.windows(2)
                .position(|w| w[0] == flag && w[1] == p)
                .unwrap_or_else(|| panic!("{flag} {p} in {a:?}"))
        };
        assert!(at("--tmpfs", &s(&lab)) > at("--ro-bind", "/"));
        assert!(at("--bind", &s(&ws)) > at("--tmpfs", &s(&lab)));
        assert_eq!(a.last().map(String::as_str), Some("--"));
        assert!(a.contains(&"--unshare-pid".to_owned()));
        assert!(a.windows(2).any(|w| w[0] == "--cap-drop" && w[1] == "ALL"));
        // A path that does not exist is not bound (bwrap would fail).
        assert!(!a.iter().any(|x| x.starts_with("/no/such")), "{a:?}");
    }
}
