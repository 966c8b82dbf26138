//! Real git repositories for tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs git in `dir` (failing the test if git fails); what it printed,
/// trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Commits everything in `dir`.
pub fn commit_all(dir: &Path, message: &str) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
}

/// A repository with one commit on `main`, in `dir/name`.
pub fn init_repo(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(&path).unwrap();
    git(&path, &["init", "-q", "-b", "main"]);
    std::fs::write(path.join("README.md"), format!("# {name}\n")).unwrap();
    git(&path, &["add", "."]);
    git(&path, &["commit", "-q", "-m", "first"]);
    path
}

/// Commits a change in a run's workspace, as its agent would (a pull
/// request needs a commit of its own).
pub fn commit_in_run(run: &serde_json::Value) {
    let ws = Path::new(run["workspace"].as_str().expect("the run has a workspace"));
    std::fs::write(ws.join("agent-work.txt"), "the agent's work\n").unwrap();
    commit_all(ws, "the agent's work");
}
