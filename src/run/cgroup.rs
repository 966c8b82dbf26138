//! Limits on every run (issue 23, ADR 25): a control group per run with
//! its memory cap, its process cap and an equal share of the CPU, and how a
//! run that passed its memory cap is told apart.
//!
//! cgroup v2 where the machine delegates its controllers to lab (lab then
//! keeps its own processes in a leaf `lab-server` beside its runs, as v2
//! wants); cgroup v1's `memory`, `pids` and `cpu` hierarchies otherwise
//! (the hybrid layout of many hosts and of this project's CI machines).
//! Where neither can be used, [`Cgroups::None`] says why (`lab doctor`) and
//! runs go without limits.
//!
//! Host side only: lab writes numbers into files of its own; nothing here
//! reads what a run wrote.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::domain::RunLimits;

/// The CPU weight of each run (v2's default; v1's shares alike): runs share
/// the CPU equally among themselves, however many processes each starts.
const CPU_WEIGHT: u64 = 100;

/// How this node limits runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cgroups {
    /// cgroup v2: runs are children of `base`.
    V2 { base: PathBuf },
    /// cgroup v1: each controller's folder for this node's runs.
    V1 {
        memory: PathBuf,
        pids: Option<PathBuf>,
        cpu: Option<PathBuf>,
    },
    /// No limits can be set here, and why.
    None { why: String },
}

/// One run's groups, made at its launch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunGroups {
    /// The folders whose `cgroup.procs` the agent joins before it starts.
    pub join: Vec<PathBuf>,
    /// cgroup v1's memory folder: the exec shim watches it for an OOM (v2's
    /// `memory.oom.group` ends the whole run by itself).
    pub oom_watch: Option<PathBuf>,
}

impl Cgroups {
    /// Finds what this machine offers lab, for node `node`'s runs.
    pub fn probe(node: &str) -> Cgroups {
        let dir = format!("lab-{}", sanitize(node));
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut why = Vec::new();
        match v2(&own, &mounts, &dir) {
            Ok(c) => return c,
            Err(e) => why.push(format!("cgroup v2: {e}")),
        }
        match v1(&own, &mounts, &dir) {
            Ok(c) => return c,
            Err(e) => why.push(format!("cgroup v1: {e}")),
        }
        Cgroups::None {
            why: why.join("; "),
        }
    }

    /// `v2`, `v1` or `none`, for the status.
    pub fn kind(&self) -> &'static str {
        match self {
            Cgroups::V2 { .. } => "v2",
            Cgroups::V1 { .. } => "v1",
            Cgroups::None { .. } => "none",
        }
    }

    /// The limits a run gets here: none where cgroups cannot be used.
    pub fn applied(&self, wanted: RunLimits) -> RunLimits {
        match self {
            Cgroups::None { .. } => RunLimits::default(),
            Cgroups::V1 { pids: None, .. } => RunLimits {
                pids_max: None,
                ..wanted
            },
            _ => wanted,
        }
    }

    fn run_dirs(&self, run: i64) -> Vec<PathBuf> {
        let name = format!("run-{run}");
        match self {
            Cgroups::V2 { base } => vec![base.join(name)],
            Cgroups::V1 { memory, pids, cpu } => std::iter::once(memory)
                .chain(pids)
                .chain(cpu)
                .map(|d| d.join(&name))
                .collect(),
            Cgroups::None { .. } => Vec::new(),
        }
    }

    /// Makes run `run`'s groups with `limits` (a group left from an earlier
    /// start of the run is used again).
    pub fn create(&self, run: i64, limits: RunLimits) -> std::io::Result<RunGroups> {
        let dirs = self.run_dirs(run);
        for d in &dirs {
            match std::fs::create_dir(d) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        let mb = |m: i64| (m.max(0) as u64) * 1024 * 1024;
        match self {
            Cgroups::V2 { .. } => {
                let d = &dirs[0];
                write(
                    d,
                    "memory.max",
                    &limits
                        .memory_max_mb
                        .map_or("max".into(), |m| mb(m).to_string()),
                )?;
                let _ = write(
                    d,
                    "memory.swap.max",
                    if limits.memory_max_mb.is_some() {
                        "0"
                    } else {
                        "max"
                    },
                );
                write(d, "memory.oom.group", "1")?;
                write(
                    d,
                    "pids.max",
                    &limits.pids_max.map_or("max".into(), |p| p.to_string()),
                )?;
                let _ = write(d, "cpu.weight", &CPU_WEIGHT.to_string());
                Ok(RunGroups {
                    join: dirs,
                    oom_watch: None,
                })
            }
            Cgroups::V1 { pids, cpu, .. } => {
                let mem = &dirs[0];
                let bytes = limits
                    .memory_max_mb
                    .map_or("-1".to_owned(), |m| mb(m).to_string());
                // The combined cap first when lowering (the kernel wants it
                // at least as high as the memory cap), then the memory cap.
                let _ = write(mem, "memory.memsw.limit_in_bytes", "-1");
                write(mem, "memory.limit_in_bytes", &bytes)?;
                let _ = write(mem, "memory.memsw.limit_in_bytes", &bytes);
                let mut i = 1;
                if pids.is_some() {
                    write(
                        &dirs[i],
                        "pids.max",
                        &limits.pids_max.map_or("max".into(), |p| p.to_string()),
                    )?;
                    i += 1;
                }
                if cpu.is_some() {
                    let _ = write(
                        &dirs[i],
                        "cpu.shares",
                        &(CPU_WEIGHT * 1024 / 100).to_string(),
                    );
                }
                Ok(RunGroups {
                    join: dirs.clone(),
                    oom_watch: Some(mem.clone()),
                })
            }
            Cgroups::None { why } => Err(std::io::Error::other(why.clone())),
        }
    }

    /// Whether the kernel killed a process of run `run` for its memory cap.
    pub fn oom_killed(&self, run: i64) -> bool {
        let dirs = self.run_dirs(run);
        let Some(d) = dirs.first() else {
            return false;
        };
        match self {
            Cgroups::V2 { .. } => count(&d.join("memory.events"), "oom_kill") > 0,
            Cgroups::V1 { .. } => count(&d.join("memory.oom_control"), "oom_kill") > 0,
            Cgroups::None { .. } => false,
        }
    }

    /// Removes run `run`'s groups once nothing lives in them (best effort:
    /// a group with a process left is kept, and removed by a later call).
    pub fn release(&self, run: i64) {
        for d in self.run_dirs(run) {
            let _ = std::fs::remove_dir(d);
        }
    }

    /// Removes this node's folders at shutdown, when empty.
    pub fn close(&self) {
        match self {
            Cgroups::V2 { base } => {
                let _ = std::fs::remove_dir(base);
            }
            Cgroups::V1 { memory, pids, cpu } => {
                for d in std::iter::once(memory).chain(pids).chain(cpu) {
                    let _ = std::fs::remove_dir(d);
                }
            }
            Cgroups::None { .. } => {}
        }
    }
}

/// Opens a run's groups' `cgroup.procs` files before the agent starts, for
/// [`join_in_child`].
pub fn open_procs(join: &[PathBuf]) -> std::io::Result<Vec<OwnedFd>> {
    join.iter()
        .map(|d| {
            Ok(std::fs::OpenOptions::new()
                .write(true)
                .open(d.join("cgroup.procs"))?
                .into())
        })
        .collect()
}

/// Makes the process `cmd` starts join the groups whose `cgroup.procs`
/// files are `procs`, between fork and exec (writing `0` moves the writer),
/// so the agent and everything it starts are in them from the first
/// instruction, and the shim that waits for it is not.
pub fn join_in_child(cmd: &mut std::process::Command, procs: Vec<OwnedFd>) {
    crate::sys::write_zero_in_child(cmd, procs);
}

/// In the exec shim, on a thread of its own (cgroup v1): waits for the
/// kernel to report an OOM in the run's memory group (an eventfd registered
/// through `cgroup.event_control`, so an idle run costs no wakeup), and when
/// it killed a process for the run's cap, ends the agent's whole tree (the
/// sandbox ends with its first process) and sets `flag`. v1 kills only one
/// process; the run ends as a whole, as v2's `memory.oom.group` makes it.
pub fn watch_oom(dir: &Path, agent: u32, flag: &std::sync::atomic::AtomicBool) {
    use rustix::event::{EventfdFlags, eventfd};
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let Ok(efd) = eventfd(0, EventfdFlags::CLOEXEC) else {
        return;
    };
    let Ok(ctl) = std::fs::File::open(dir.join("memory.oom_control")) else {
        return;
    };
    let line = format!("{} {}", efd.as_raw_fd(), ctl.as_raw_fd());
    if std::fs::write(dir.join("cgroup.event_control"), line).is_err() {
        return;
    }
    let mut f = std::fs::File::from(efd);
    let mut buf = [0u8; 8];
    loop {
        if f.read_exact(&mut buf).is_err() {
            return;
        }
        // Also signalled when the group goes away: only a kill counts.
        if !dir.exists() {
            return;
        }
        // The event comes as the group meets its cap, just before the
        // kernel picks what to kill.
        for _ in 0..100 {
            if count(&dir.join("memory.oom_control"), "oom_kill") > 0 {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                if let Some(pid) = rustix::process::Pid::from_raw(agent as i32) {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

fn write(dir: &Path, file: &str, value: &str) -> std::io::Result<()> {
    std::fs::write(dir.join(file), value)
}

/// The number after `key` on its line of a flat-keyed file.
fn count(path: &Path, key: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok()).flatten()
        })
        .unwrap_or(0)
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// Where a cgroup filesystem of `fstype` is mounted, with its super
/// options (for v1, the controllers it holds), from `/proc/self/mountinfo`.
fn mounts<'a>(
    mountinfo: &'a str,
    fstype: &'a str,
) -> impl Iterator<Item = (PathBuf, &'a str)> + 'a {
    mountinfo.lines().filter_map(move |l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split(' ');
        if r.next()? != fstype {
            return None;
        }
        let super_opts = r.nth(1).unwrap_or("");
        let point = left.split(' ').nth(4)?;
        Some((PathBuf::from(point), super_opts))
    })
}

fn v2(own: &str, mountinfo: &str, dir: &str) -> Result<Cgroups, String> {
    let path = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("lab is in no v2 group")?;
    let (mount, _) = mounts(mountinfo, "cgroup2")
        .next()
        .ok_or("no cgroup2 filesystem is mounted")?;
    let mut me = mount.join(path.trim_start_matches('/'));
    // A second server in one process (the tests) finds itself in the leaf
    // the first one made.
    if me.file_name().is_some_and(|n| n == "lab-server") {
        me.pop();
    }
    let controllers = std::fs::read_to_string(me.join("cgroup.controllers"))
        .map_err(|e| format!("cannot read {}: {e}", me.display()))?;
    for c in ["memory", "pids"] {
        if !controllers.split_whitespace().any(|x| x == c) {
            return Err(format!(
                "the {c} controller is not delegated to lab's group {} (it has: {})",
                me.display(),
                controllers.trim()
            ));
        }
    }
    let enable = "+memory +pids +cpu";
    let enable_in = |d: &Path| -> Result<(), String> {
        std::fs::write(d.join("cgroup.subtree_control"), enable)
            .or_else(|_| std::fs::write(d.join("cgroup.subtree_control"), "+memory +pids"))
            .map_err(|e| format!("cannot enable controllers in {}: {e}", d.display()))
    };
    if me != mount {
        // A group with controllers for its children holds no process: lab's
        // own go into a leaf beside its runs.
        let leaf = me.join("lab-server");
        mkdir(&leaf)?;
        let procs = std::fs::read_to_string(me.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter(|p| !p.trim().is_empty()) {
            std::fs::write(leaf.join("cgroup.procs"), pid)
                .map_err(|e| format!("cannot move process {pid} into {}: {e}", leaf.display()))?;
        }
    }
    enable_in(&me)?;
    let base = me.join(dir);
    mkdir(&base)?;
    enable_in(&base)?;
    Ok(Cgroups::V2 { base })
}

fn v1(own: &str, mountinfo: &str, dir: &str) -> Result<Cgroups, String> {
    let folder = |controller: &str| -> Option<PathBuf> {
        let path = own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let _ = f.next()?;
            let ctrls = f.next()?;
            let p = f.next()?;
            ctrls.split(',').any(|c| c == controller).then_some(p)
        })?;
        let (mount, _) = mounts(mountinfo, "cgroup")
            .find(|(_, opts)| opts.split(',').any(|o| o == controller))?;
        let base = mount.join(path.trim_start_matches('/')).join(dir);
        mkdir(&base).ok()?;
        Some(base)
    };
    let memory = folder("memory").ok_or("no writable memory hierarchy")?;
    Ok(Cgroups::V1 {
        memory,
        pids: folder("pids"),
        cpu: folder("cpu"),
    })
}

fn mkdir(d: &Path) -> Result<(), String> {
    match std::fs::create_dir(d) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("cannot make {}: {e}", d.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
35 25 0:30 / /sys/fs/cgroup/memory rw,relatime shared:13 - cgroup cgroup rw,memory
36 25 0:31 / /sys/fs/cgroup/pids rw,relatime shared:14 - cgroup cgroup rw,pids
37 25 0:32 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
38 25 0:33 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn mounts_are_read_with_their_controllers() {
        let v1: Vec<(PathBuf, &str)> = mounts(MOUNTINFO, "cgroup").collect();
        assert_eq!(v1.len(), 3);
        assert_eq!(v1[0].0, Path::new("/sys/fs/cgroup/memory"));
        assert_eq!(v1[2].1, "rw,cpu,cpuacct");
        let v2: Vec<(PathBuf, &str)> = mounts(MOUNTINFO, "cgroup2").collect();
        assert_eq!(v2[0].0, Path::new("/sys/fs/cgroup/unified"));
    }

    #[test]
    fn flat_keyed_counts() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("memory.events");
        std::fs::write(&f, "low 0\nhigh 3\nmax 9\noom 2\noom_kill 1\n").unwrap();
        assert_eq!(count(&f, "oom_kill"), 1);
        assert_eq!(count(&f, "oom"), 2);
        assert_eq!(count(&f, "nothing"), 0);
    }

    #[test]
    fn without_cgroups_no_limit_is_applied() {
        let none = Cgroups::None { why: "x".into() };
        let wanted = RunLimits {
            memory_max_mb: Some(64),
            pids_max: Some(100),
        };
        assert_eq!(none.applied(wanted), RunLimits::default());
        assert_eq!(none.kind(), "none");
        assert!(none.create(1, wanted).is_err());
        assert_eq!(sanitize("vm-1/x y"), "vm-1_x_y");
    }
}
