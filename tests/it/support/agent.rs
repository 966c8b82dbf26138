//! The fake agent CLI (fake-agent.sh) and what it records.

use std::path::{Path, PathBuf};

use super::wait;

/// Writes an executable script.
pub fn write_script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Writes the fake agent into `dir`, recording under `dir/records`.
pub fn install(dir: &Path) -> PathBuf {
    let rec = dir.join("records");
    std::fs::create_dir_all(&rec).unwrap();
    let script = include_str!("fake-agent.sh").replace("@@REC@@", &rec.to_string_lossy());
    let path = dir.join("fake-agent");
    write_script(&path, &script);
    path
}

/// Waits (up to 10 s) for the fake agent of run `id` to record `file`.
pub async fn record(dir: &Path, id: i64, file: &str) -> Vec<u8> {
    let path = dir.join("records").join(id.to_string()).join(file);
    let what = format!("the fake agent of run {id} to write {file}");
    wait::until(what, wait::secs(10), async || {
        std::fs::read(&path).ok().filter(|b| !b.is_empty())
    })
    .await
}

/// The fake agent's argv, split at NULs.
pub fn argv(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = bytes.split(|b| *b == 0).map(<[u8]>::to_vec).collect();
    v.pop(); // after the last NUL
    v
}

/// The fake agent's environment, from `env -0`.
pub fn env(bytes: &[u8]) -> Vec<(String, String)> {
    argv(bytes)
        .into_iter()
        .filter_map(|kv| {
            let s = String::from_utf8_lossy(&kv).into_owned();
            let (k, v) = s.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// Runs a tmux command on lab's socket, as a person at a terminal would, and
/// asserts it succeeded; returns what it printed.
pub fn tmux(socket: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tmux {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Kills a tmux server and what runs in it.
pub fn kill_tmux(socket: &Path) {
    if socket.exists() {
        let _ = std::process::Command::new("tmux")
            .arg("-S")
            .arg(socket)
            .arg("kill-server")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

pub fn pid_alive(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s
                .rsplit_once(')')
                .map(|(_, r)| r.trim_start().chars().next())
                .unwrap_or(None);
            !matches!(state, Some('Z') | Some('X'))
        })
        .unwrap_or(false)
}

/// The host's pid of the process under `shim` (a run's pane process) whose
/// pid is `inner` in the run's sandbox: the agent has a process namespace of
/// its own, and `NSpid` in /proc/<pid>/status lists a pid in both.
pub fn host_pid(shim: i64, inner: i64) -> Option<i64> {
    let field = |pid: i64, name: &str| -> Option<Vec<i64>> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find_map(|l| l.strip_prefix(name))?;
        Some(
            line.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect(),
        )
    };
    let pids: Vec<i64> = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    let mut under = vec![shim];
    let mut grew = true;
    while grew {
        grew = false;
        for &p in &pids {
            let parent = field(p, "PPid:").and_then(|v| v.first().copied());
            if !under.contains(&p) && parent.is_some_and(|pp| under.contains(&pp)) {
                under.push(p);
                grew = true;
            }
        }
    }
    under
        .into_iter()
        .skip(1)
        .find(|&p| field(p, "NSpid:").is_some_and(|ns| ns.last() == Some(&inner)))
}
