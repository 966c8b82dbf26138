//! A run's process tree, and ending it.
//!
//! tmux's `kill-session` only closes the pane's terminal: a process that
//! ignores SIGHUP, or a child in its own process group, survives it. So lab
//! ends a run by signalling every process of the tree itself: the pane's
//! process, its descendants, and anything still in its session (children
//! that were re-parented after their parent exited).
//!
//! Invariant: this is the only module that signals processes.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process};

#[derive(Debug, Clone, Copy)]
struct Proc {
    pid: i32,
    ppid: i32,
    sid: i32,
}

/// Reads `/proc/<pid>/stat`: the fields after the command name (which may
/// hold spaces and parentheses) are state, ppid, pgrp, session.
fn read_proc(pid: i32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut f = rest.split(' ');
    let state = f.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    let ppid = f.next()?.parse().ok()?;
    let _pgrp: i32 = f.next()?.parse().ok()?;
    let sid = f.next()?.parse().ok()?;
    Some(Proc { pid, ppid, sid })
}

fn all_procs() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read_proc)
        .collect()
}

/// The live processes of the tree rooted at `root`: the root, its
/// descendants, and every process in the session the root leads.
pub fn tree(root: i64) -> Vec<i32> {
    let Ok(root) = i32::try_from(root) else {
        return Vec::new();
    };
    if root <= 1 {
        return Vec::new();
    }
    let procs = all_procs();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for p in &procs {
        children.entry(p.ppid).or_default().push(p.pid);
    }
    // Start from the root (when alive) and everything in its session, then
    // take every descendant of those.
    let mut stack: Vec<i32> = procs
        .iter()
        .filter(|p| p.pid == root || p.sid == root)
        .map(|p| p.pid)
        .collect();
    let mut out: HashSet<i32> = stack.iter().copied().collect();
    while let Some(p) = stack.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            if out.insert(c) {
                stack.push(c);
            }
        }
    }
    out.remove(&std::process::id().cast_signed());
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

/// Ends the tree rooted at `root`: SIGTERM to every process, then SIGKILL to
/// whatever is still alive after `grace`. Returns how many processes it
/// signalled.
pub async fn kill_tree(root: i64, grace: Duration) -> usize {
    let first = tree(root);
    if first.is_empty() {
        return 0;
    }
    signal(&first, Signal::TERM);
    // A terminal program stopped by a job-control signal needs a CONT to see TERM.
    signal(&first, Signal::CONT);
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        let left: Vec<i32> = first
            .iter()
            .copied()
            .filter(|&p| read_proc(p).is_some())
            .collect();
        let late = tree(root);
        if left.is_empty() && late.is_empty() {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let mut all: Vec<i32> = left;
            all.extend(late);
            signal(&all, Signal::KILL);
            // SIGKILL cannot be caught, but dying takes a moment.
            for _ in 0..40 {
                if all.iter().all(|&p| read_proc(p).is_none()) {
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

/// Whether a process is alive (not a zombie).
pub fn alive(pid: i64) -> bool {
    i32::try_from(pid).ok().and_then(read_proc).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn kills_a_tree_that_ignores_hangup_and_leaves_its_group() {
        // A session leader with a child that ignores HUP and TERM, in its own
        // process group.
        let mut child = std::process::Command::new("setsid")
            .args([
                "sh",
                "-c",
                "sh -c 'trap \"\" HUP TERM; sleep 300' & sleep 300",
            ])
            .spawn()
            .unwrap();
        let root = i64::from(child.id());
        let mut pids = Vec::new();
        for _ in 0..50 {
            pids = tree(root);
            if pids.len() >= 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(pids.len() >= 3, "{pids:?}");
        let n = kill_tree(root, Duration::from_millis(300)).await;
        assert!(n >= 3);
        let _ = child.wait();
        for p in pids {
            assert!(!alive(i64::from(p)), "{p} survived");
        }
    }
}
