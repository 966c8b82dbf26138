//! A run's processes, and ending them.
//!
//! tmux's `kill-session` only closes the pane's terminal: a process that
//! ignores SIGHUP, or a child in its own process group, survives it. So lab
//! ends a run by signalling its processes itself. Which processes are the
//! run's must never be guessed from a pid alone, since pids are reused (a
//! run's dead pid may belong to another program a second later):
//!
//! - the root (the pane's process) counts only while its start time is the
//!   one lab recorded when it started the run;
//! - every descendant of a live root counts;
//! - any process whose environment carries the run's mark (`LAB_RUN_ID` and
//!   `LAB_NODE`, set by lab for the run) counts: that finds children that
//!   were re-parented or started a session of their own.
//!
//! Invariant: this is the only module that signals processes.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process};

use crate::domain::Run;

/// A process as `/proc/<pid>/stat` shows it.
#[derive(Debug, Clone, Copy)]
struct Proc {
    pid: i32,
    ppid: i32,
    /// Clock ticks after boot when the process started.
    start: u64,
}

/// Reads `/proc/<pid>/stat`; `None` for a process that is gone or a zombie.
/// Fields after the command name (which may hold spaces and parentheses):
/// state is the 1st, ppid the 2nd, starttime the 20th.
fn read_proc(pid: i32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split(' ').collect();
    if matches!(f.first(), Some(&"Z") | Some(&"X") | None) {
        return None;
    }
    Some(Proc {
        pid,
        ppid: f.get(1)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

fn all_procs() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read_proc)
        .collect()
}

/// When a live process started (clock ticks after boot): with its pid, what
/// identifies it.
pub fn start_time(pid: i64) -> Option<u64> {
    read_proc(i32::try_from(pid).ok()?).map(|p| p.start)
}

/// Whether a process is alive (not a zombie).
pub fn alive(pid: i64) -> bool {
    start_time(pid).is_some()
}

/// What identifies a run's processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMark {
    /// The pane's process and its start time, as recorded at launch.
    pub root: Option<(i64, u64)>,
    pub run_id: i64,
    pub node: String,
}

impl RunMark {
    /// What identifies `run`'s processes.
    pub fn of(run: &Run) -> RunMark {
        RunMark {
            root: run
                .pid
                .zip(run.pid_start.and_then(|s| u64::try_from(s).ok())),
            run_id: run.id,
            node: run.node.clone(),
        }
    }

    /// The environment entries lab sets in every run, that mark its processes.
    pub fn env(&self) -> [(String, String); 2] {
        [
            ("LAB_RUN_ID".to_owned(), self.run_id.to_string()),
            ("LAB_NODE".to_owned(), self.node.clone()),
        ]
    }

    fn carried_by(&self, pid: i32) -> bool {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            return false;
        };
        let [(k1, v1), (k2, v2)] = self.env();
        let (a, b) = (format!("{k1}={v1}"), format!("{k2}={v2}"));
        let mut found = (false, false);
        for entry in environ.split(|c| *c == 0) {
            found.0 |= entry == a.as_bytes();
            found.1 |= entry == b.as_bytes();
        }
        found == (true, true)
    }
}

/// The live processes of a run.
pub fn members(mark: &RunMark) -> Vec<i32> {
    let procs = all_procs();
    let me = std::process::id().cast_signed();
    let mut out: HashSet<i32> = HashSet::new();
    if let Some((pid, start)) = mark.root
        && let Ok(pid) = i32::try_from(pid)
        && pid > 1
        && procs.iter().any(|p| p.pid == pid && p.start == start)
    {
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for p in &procs {
            children.entry(p.ppid).or_default().push(p.pid);
        }
        let mut stack = vec![pid];
        out.insert(pid);
        while let Some(p) = stack.pop() {
            for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
                if out.insert(c) {
                    stack.push(c);
                }
            }
        }
    }
    for p in &procs {
        if p.pid > 1 && !out.contains(&p.pid) && mark.carried_by(p.pid) {
            out.insert(p.pid);
        }
    }
    out.remove(&me);
    let mut v: Vec<i32> = out.into_iter().collect();
    v.sort_unstable();
    v
}

fn signal(pids: &[i32], sig: Signal) {
    for &p in pids {
        if let Some(pid) = Pid::from_raw(p) {
            let _ = kill_process(pid, sig);
        }
    }
}

/// Ends a run's processes: SIGTERM to each, then SIGKILL to whatever is
/// still alive after `grace`. Returns how many processes it signalled.
pub async fn kill_run(mark: &RunMark, grace: Duration) -> usize {
    let first = members(mark);
    if first.is_empty() {
        return 0;
    }
    signal(&first, Signal::TERM);
    // A program stopped by job control needs a CONT to act on TERM.
    signal(&first, Signal::CONT);
    let started: HashMap<i32, u64> = first
        .iter()
        .filter_map(|&p| Some((p, read_proc(p)?.start)))
        .collect();
    // Still the same process (not a reused pid)?
    let same = |p: &i32| read_proc(*p).is_some_and(|q| started.get(p) == Some(&q.start));
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        let mut left: Vec<i32> = first.iter().copied().filter(same).collect();
        let late: Vec<i32> = members(mark)
            .into_iter()
            .filter(|p| !first.contains(p))
            .collect();
        if left.is_empty() && late.is_empty() {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            left.extend(late);
            signal(&left, Signal::KILL);
            // SIGKILL cannot be caught, but dying takes a moment.
            for _ in 0..40 {
                if left.iter().all(|&p| read_proc(p).is_none()) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    first.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(run_id: i64, root: Option<(i64, u64)>) -> RunMark {
        RunMark {
            root,
            run_id,
            node: format!("test-{}", std::process::id()),
        }
    }

    async fn wait_members(m: &RunMark, n: usize) -> Vec<i32> {
        let mut pids = Vec::new();
        for _ in 0..100 {
            pids = members(m);
            if pids.len() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        pids
    }

    #[tokio::test]
    async fn kills_the_tree_children_that_ignore_signals_and_marked_orphans() {
        let m = mark(1, None);
        // A root with a child that ignores HUP and TERM, and an orphan that
        // left the tree (setsid, then its parent exits) but carries the mark.
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "sh -c 'trap \"\" HUP TERM; sleep 300' & setsid sh -c 'sleep 300' & sleep 300",
            ])
            .envs(m.env())
            .spawn()
            .unwrap();
        let root = i64::from(child.id());
        let m = mark(1, Some((root, start_time(root).unwrap())));
        let pids = wait_members(&m, 5).await;
        assert!(pids.len() >= 5, "{pids:?}");
        let n = kill_run(&m, Duration::from_millis(300)).await;
        assert!(n >= 5);
        let _ = child.wait();
        for p in pids {
            assert!(!alive(i64::from(p)), "{p} survived");
        }
    }

    #[tokio::test]
    async fn a_reused_pid_is_not_the_run() {
        // Our own process is alive, but with another start time it is not
        // the run's root: nothing of it may be signalled.
        let me = i64::from(std::process::id());
        let wrong = start_time(me).unwrap() + 1;
        let m = mark(2, Some((me, wrong)));
        assert!(members(&m).is_empty());
        assert_eq!(kill_run(&m, Duration::ZERO).await, 0);
    }
}
