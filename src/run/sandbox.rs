//! The sandbox every run's agent starts in (ADR 12, ADR 24): bubblewrap,
//! with a view that is deny-by-default. A run sees the system's folders
//! read-only (files other users may not read masked, lab's own `passwd` and
//! `group`), the CLI's resolved install, the repo's object store read-only
//! wherever the repo lives, a home of its own, its workspace read-write, and
//! what the operator adds; nothing else of the host. It runs as an
//! unprivileged user of its own user namespace ([`AGENT_UID`]), in its own
//! process, IPC and host-name namespaces, with no capabilities and a
//! private, size-capped `/tmp`. The network is shared for agents (the model
//! APIs, and lab's API with the run's token only) and cut for lab's own work
//! over a run's data (a jail: `git.rs`).
//!
//! This module only builds command lines and probes the machine; the exec
//! shim, `check.rs`, `cli_check.rs` and `git.rs` run them.

use std::path::{Path, PathBuf};

/// The user id (and group id) agents have inside their sandbox: not root,
/// whatever user lab runs as. Outside, the user namespace maps it to lab's
/// own user, so the files a run writes stay lab's.
pub const AGENT_UID: u32 = 1000;

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

/// The system folders a sandbox sees, read-only, and what of them it does
/// not: found once at start-up by [`System::probe`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct System {
    /// Folders bound read-only at their own path.
    pub dirs: Vec<PathBuf>,
    /// Top-level links re-made as they are (`/bin` → `usr/bin`).
    pub links: Vec<(PathBuf, PathBuf)>,
    /// Files other users may not read (`/etc/shadow`, host keys, private
    /// TLS keys): each covered by an empty file.
    pub masked_files: Vec<PathBuf>,
    /// Folders other users may not enter: each covered by an empty tmpfs.
    pub masked_dirs: Vec<PathBuf>,
    /// What a link in `/etc` points to outside the folders above
    /// (`resolv.conf` → `/run/…`), bound read-only so the link resolves.
    pub link_targets: Vec<PathBuf>,
}

/// The folders of the system a run sees. `/etc` is walked for what to mask.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// How deep the walk of `/etc` goes.
const MASK_DEPTH: usize = 8;

impl System {
    /// Reads this machine's system folders. Follows no link while walking.
    pub fn probe() -> System {
        let mut s = System::default();
        for d in SYSTEM_DIRS {
            let p = Path::new(d);
            let Ok(meta) = p.symlink_metadata() else {
                continue;
            };
            if meta.file_type().is_symlink() {
                if let Ok(t) = std::fs::read_link(p) {
                    s.links.push((t, p.to_path_buf()));
                }
            } else if meta.is_dir() {
                s.dirs.push(p.to_path_buf());
            }
        }
        s.walk(Path::new("/etc"), 0);
        if let Ok(entries) = std::fs::read_dir("/etc") {
            for e in entries.flatten() {
                let p = e.path();
                if e.file_type().is_ok_and(|t| t.is_symlink())
                    && let Ok(target) = p.canonicalize()
                    && !s.covers(&target)
                    && !target.starts_with("/proc")
                    && !target.starts_with("/dev")
                    && !s.link_targets.contains(&target)
                {
                    s.link_targets.push(target);
                }
            }
        }
        s
    }

    fn walk(&mut self, dir: &Path, depth: usize) {
        use std::os::unix::fs::PermissionsExt;
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let Ok(meta) = e.path().symlink_metadata() else {
                continue;
            };
            let mode = meta.permissions().mode();
            if meta.is_dir() {
                if mode & 0o001 == 0 {
                    self.masked_dirs.push(e.path());
                } else if depth < MASK_DEPTH {
                    self.walk(&e.path(), depth + 1);
                }
            } else if meta.is_file() && mode & 0o004 == 0 {
                self.masked_files.push(e.path());
            }
        }
    }

    /// Whether a path lies in the folders this view binds.
    fn covers(&self, p: &Path) -> bool {
        self.dirs.iter().any(|d| p.starts_with(d))
    }
}

/// Files lab makes once for every sandbox (in `<data-dir>/sandbox`): an
/// account database that names only the agent's user, and an empty file to
/// mask others with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxFiles {
    pub passwd: PathBuf,
    pub group: PathBuf,
    pub empty: PathBuf,
}

impl SandboxFiles {
    /// Writes them under `dir` (made if missing).
    pub fn write(dir: &Path) -> std::io::Result<SandboxFiles> {
        super::launch::create_private_dir(dir)?;
        let f = SandboxFiles {
            passwd: dir.join("passwd"),
            group: dir.join("group"),
            empty: dir.join("empty"),
        };
        let u = AGENT_UID;
        std::fs::write(
            &f.passwd,
            format!(
                "root:x:0:0:root:/root:/bin/sh\nagent:x:{u}:{u}:lab agent:/tmp:/bin/sh\n\
                 nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            ),
        )?;
        std::fs::write(
            &f.group,
            format!("root:x:0:\nagent:x:{u}:\nnogroup:x:65534:\n"),
        )?;
        std::fs::write(&f.empty, "")?;
        // Lab's files (0600 like every file of its data dir): the agent's
        // user is lab's own user outside, through the namespace's mapping.
        Ok(f)
    }
}

/// What the operator and lab say about every run's sandbox.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Paths no run may see even where an operator's path covers them:
    /// lab's data dir, its tmux socket's folder, the database's local
    /// sockets and files.
    pub hidden: Vec<PathBuf>,
    /// Paths every run may read (`--sandbox-ro`).
    pub read_only: Vec<PathBuf>,
    /// Paths every run may write (`--sandbox-rw`).
    pub writable: Vec<PathBuf>,
    /// The system folders, probed at start-up.
    pub system: System,
    /// lab's account files and empty file (none: the host's `passwd` shows).
    pub files: Option<SandboxFiles>,
    /// Whether runs get a user namespace of their own (probed: a kernel
    /// may refuse them).
    pub userns: bool,
    /// The size of a run's private `/tmp`, in bytes.
    pub tmp_bytes: Option<u64>,
    /// The operator's homes (the one lab seeds runs from, and lab's own):
    /// a CLI's install that is or holds one is never bound (`install_of`).
    pub homes: Vec<PathBuf>,
}

impl Policy {
    /// The view of this machine's system and nothing of the operator's:
    /// what a CLI check gets outside a running lab (the contract tests).
    pub fn system_only() -> Policy {
        Policy {
            system: System::probe(),
            userns: true,
            tmp_bytes: Some(TMP_BYTES),
            ..Policy::default()
        }
    }
}

/// The size of a run's private `/tmp` unless the operator says otherwise:
/// it is memory, charged to the run's memory limit.
pub const TMP_BYTES: u64 = 1024 * 1024 * 1024;

/// One sandbox: a run's agent, its check command, a CLI check, or lab's own
/// git over the run's data (a jail).
#[derive(Debug, Clone)]
pub struct RunSandbox<'a> {
    pub policy: &'a Policy,
    pub workspace: &'a Path,
    /// Whether the workspace is writable (the agent's and its check's) or
    /// not (lab's git over it).
    pub workspace_writable: bool,
    /// Read-only paths the run needs wherever they lie: the repo's object
    /// store and hooks, the CLI's install, lab's binaries.
    pub read_only: &'a [PathBuf],
    /// Files bound read-only over a place in the run's own folders: the
    /// operator's credentials, as (source, destination).
    pub read_only_files: &'a [(PathBuf, PathBuf)],
    /// Writable folders of the run's own beside its workspace: its home.
    pub writable: &'a [PathBuf],
    /// Whether the network is shared (an agent's) or cut (a jail).
    pub network: bool,
    /// Whether the operator's `--sandbox-ro` and `--sandbox-rw` paths are
    /// in the view (an agent's and its check's; not a jail's).
    pub operator_paths: bool,
}

impl RunSandbox<'_> {
    /// bubblewrap's arguments, up to and including the `--` before the
    /// command. Order matters: later mounts cover earlier ones, so the
    /// hidden places are covered after the system and the operator's paths
    /// are bound, and before the run's own are bound back.
    pub fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = Vec::with_capacity(96);
        let mut push = |items: &[&str]| a.extend(items.iter().map(|s| (*s).to_owned()));
        if self.policy.userns {
            let uid = AGENT_UID.to_string();
            push(&["--unshare-user", "--uid", &uid, "--gid", &uid]);
        }
        push(&[
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--die-with-parent",
            "--cap-drop",
            "ALL",
        ]);
        if !self.network {
            push(&["--unshare-net"]);
        }
        let sys = &self.policy.system;
        for d in &sys.dirs {
            bind(&mut a, "--ro-bind", d, d);
        }
        for (target, link) in &sys.links {
            a.push("--symlink".into());
            a.push(lossy(target));
            a.push(lossy(link));
        }
        for t in &sys.link_targets {
            bind(&mut a, "--ro-bind", t, t);
        }
        if let Some(f) = &self.policy.files {
            for m in sys.masked_files.iter().filter(|m| m.exists()) {
                bind(&mut a, "--ro-bind", &f.empty, m);
            }
            bind(&mut a, "--ro-bind", &f.passwd, Path::new("/etc/passwd"));
            bind(&mut a, "--ro-bind", &f.group, Path::new("/etc/group"));
        }
        for m in &sys.masked_dirs {
            a.push("--tmpfs".into());
            a.push(lossy(m));
        }
        a.extend(["--dev", "/dev", "--proc", "/proc"].map(str::to_owned));
        if let Some(n) = self.policy.tmp_bytes {
            a.push("--size".into());
            a.push(n.to_string());
        }
        a.extend(["--tmpfs", "/tmp"].map(str::to_owned));
        // What the run needs read-only (its CLI's install, the repo's
        // objects, lab's binaries) first, then the operator's paths, which
        // win over it; then the hidden places over all of them, and back
        // what the run needs from inside those (a mirror's objects in the
        // data dir), its own folders last.
        let hidden: Vec<PathBuf> = real(&self.policy.hidden)
            .into_iter()
            .filter(|p| p.is_dir())
            .collect();
        let (inside, outside): (Vec<PathBuf>, Vec<PathBuf>) = real(self.read_only)
            .into_iter()
            .partition(|p| hidden.iter().any(|h| p.starts_with(h)));
        for p in &outside {
            bind(&mut a, "--ro-bind", p, p);
        }
        if self.operator_paths {
            for p in real(&self.policy.read_only) {
                bind(&mut a, "--ro-bind", &p, &p);
            }
            for p in real(&self.policy.writable) {
                bind(&mut a, "--bind", &p, &p);
            }
        }
        for p in &hidden {
            a.push("--tmpfs".into());
            a.push(lossy(p));
        }
        for p in &inside {
            bind(&mut a, "--ro-bind", p, p);
        }
        for p in real(self.writable) {
            bind(&mut a, "--bind", &p, &p);
        }
        for (src, dest) in self.read_only_files {
            if let Ok(src) = src.canonicalize() {
                bind(&mut a, "--ro-bind", &src, dest);
            }
        }
        let ws = real(&[self.workspace.to_path_buf()])
            .pop()
            .unwrap_or_else(|| self.workspace.to_path_buf());
        let flag = if self.workspace_writable {
            "--bind"
        } else {
            "--ro-bind"
        };
        bind(&mut a, flag, &ws, &ws);
        a.push("--chdir".to_owned());
        a.push(lossy(&ws));
        a.push("--".to_owned());
        a
    }
}

fn lossy(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn bind(a: &mut Vec<String>, flag: &str, src: &Path, dest: &Path) {
    a.push(flag.to_owned());
    a.push(lossy(src));
    a.push(lossy(dest));
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

/// Where a CLI is installed, as a sandbox must see it to start it: the real
/// path of its program (links followed, so a link in a hidden folder does
/// not matter) and what to bind of it (issue 40 §10): the whole
/// `node_modules` of an npm install (a CLI there loads its own packages and
/// its platform's binary from beside it), the version folder of a native
/// installer's (`…/versions/<version>`), else the program alone, never its
/// neighbours (a CLI in `~/bin` beside the operator's other tools, a
/// wrapper in the home itself).
///
/// Refused, with why: a folder to bind that is or holds the operator's home
/// or one of the places no run may see (lab's data dir, the database's),
/// and a program inside one of those places.
pub fn install_of(program: &Path, policy: &Policy) -> Result<(PathBuf, PathBuf), String> {
    let path = program
        .canonicalize()
        .map_err(|e| format!("cannot find the CLI {}: {e}", program.display()))?;
    let npm = path
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last();
    let version = path.ancestors().find(|a| {
        a.parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n == "versions")
    });
    let bound = npm.or(version).unwrap_or(&path).to_path_buf();
    let hidden = real(&policy.hidden);
    let homes = real(&policy.homes);
    for place in hidden.iter().chain(&homes) {
        if place.starts_with(&bound) {
            return Err(format!(
                "the CLI {} is installed in {}, which holds {}: lab binds a CLI's install into \
                 every run, and never that; install the CLI in a folder of its own (npm, or \
                 its installer) or point lab at its program",
                program.display(),
                bound.display(),
                place.display()
            ));
        }
    }
    if let Some(place) = hidden.iter().find(|h| bound.starts_with(h)) {
        return Err(format!(
            "the CLI {} lies in {}, which no run may see: install it elsewhere",
            program.display(),
            place.display()
        ));
    }
    Ok((path, bound))
}

/// The variables a sandboxed run gets so that caches land in its private
/// `/tmp` rather than in its home.
pub const ENV: &[(&str, &str)] = &[
    ("XDG_CACHE_HOME", "/tmp/.cache"),
    ("npm_config_cache", "/tmp/.npm"),
    ("TMPDIR", "/tmp"),
];

/// Finds bubblewrap (`bin`, or `bwrap` on `PATH`) and checks that it can
/// make a sandbox here, with a user namespace of its own when the kernel
/// allows one (else without: the agent then has lab's user id). Returns
/// whether user namespaces work.
pub async fn probe(bin: Option<&Path>) -> (Availability, bool) {
    let fix = "install bubblewrap (Debian: apt-get install bubblewrap) and allow user \
               namespaces, or allow unsandboxed runs (labctl settings set --allow-unsandboxed true)"
        .to_owned();
    let path = match bin {
        Some(p) => p.to_path_buf(),
        None => match super::on_path::find("bwrap") {
            Some(p) => p,
            None => {
                return (
                    Availability::Missing {
                        why: "bubblewrap (bwrap) is not on lab's PATH".into(),
                        fix,
                    },
                    false,
                );
            }
        },
    };
    let policy = Policy {
        system: System {
            dirs: ["/usr", "/etc"].map(PathBuf::from).to_vec(),
            links: SYSTEM_DIRS[1..7]
                .iter()
                .filter_map(|d| Some((std::fs::read_link(d).ok()?, PathBuf::from(d))))
                .collect(),
            ..System::default()
        },
        ..Policy::default()
    };
    let try_with = |userns: bool| {
        let policy = Policy {
            userns,
            ..policy.clone()
        };
        let args = RunSandbox {
            policy: &policy,
            workspace: Path::new("/"),
            workspace_writable: false,
            read_only: &[],
            read_only_files: &[],
            writable: &[],
            network: true,
            operator_paths: true,
        }
        .args();
        let out = tokio::process::Command::new(&path)
            .args(args)
            .args(["/bin/sh", "-c", "true"])
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        tokio::time::timeout(std::time::Duration::from_secs(10), out)
    };
    if let Ok(Ok(o)) = try_with(true).await
        && o.status.success()
    {
        return (Availability::Ready(path), true);
    }
    let a = match try_with(false).await {
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
    };
    (a, false)
}

#[cfg(test)]
mod tests;
