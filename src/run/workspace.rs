//! Workspaces: the clone each run works in, on a branch of its own, and the
//! mirrors lab keeps of repos given by URL.
//!
//! A workspace is a shared clone of the registered repo (or its mirror),
//! made by hand (`git init`, `objects/info/alternates`, the repo's hooks,
//! one checkout; `git clone --shared` paid a transport process more): it
//! borrows the repo's objects read-only and has refs of its own,
//! so nothing a run does to its refs (`git update-ref`, a rewritten branch)
//! reaches the registered repo or another run (ADR 12). lab fetches the
//! run's branch back into the repo itself ([`Workspaces::collect`]) when the
//! run opens its pull request and before its workspace is removed.
//!
//! Invariant: this is the only module that runs git.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::repo::{Repo, RepoSource};
use crate::validate::FieldError;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WorkspaceError(pub String);

/// Checks that a repo's source can be used: a local path must hold a git
/// repository (a work tree or a bare one). A URL is checked when lab first
/// fetches it.
pub fn check_source(source: &RepoSource) -> Result<(), FieldError> {
    let RepoSource::Path(p) = source else {
        return Ok(());
    };
    let path = Path::new(p);
    if !path.is_dir() {
        return Err(
            FieldError::new("path", "no such directory on the lab server").with_value(p.clone()),
        );
    }
    let work_tree = path.join(".git").exists();
    let bare = path.join("HEAD").is_file() && path.join("objects").is_dir();
    if !work_tree && !bare {
        return Err(
            FieldError::new("path", "is not a git repository (no .git inside)")
                .with_value(p.clone()),
        );
    }
    Ok(())
}

/// A run's workspace, once made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    pub path: PathBuf,
    pub branch: String,
}

pub struct Workspaces {
    root: PathBuf,
    mirrors: PathBuf,
    /// git operations on one repo are serialised: fetching a branch back and
    /// mirror fetches are not safe to run side by side.
    locks: Mutex<HashMap<i64, Arc<tokio::sync::Mutex<()>>>>,
}

const FETCH_TIMEOUT: Duration = Duration::from_secs(300);
pub(super) const LOCAL_TIMEOUT: Duration = Duration::from_secs(60);

impl Workspaces {
    pub fn new(data_dir: &Path) -> Workspaces {
        Workspaces {
            root: data_dir.join("workspaces"),
            mirrors: data_dir.join("mirrors"),
            locks: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn lock(&self, repo_id: i64) -> Arc<tokio::sync::Mutex<()>> {
        self.locks
            .lock()
            .expect("workspace lock map poisoned")
            .entry(repo_id)
            .or_default()
            .clone()
    }

    /// The folder workspaces are made in.
    pub(super) fn root_dir(&self) -> &Path {
        &self.root
    }

    /// The path a run's workspace gets.
    pub fn path_for(&self, run_id: i64) -> PathBuf {
        self.root.join(run_id.to_string())
    }

    /// The repository workspaces of `repo` are cloned from (and borrow
    /// their objects from).
    pub fn git_dir(&self, repo: &Repo) -> PathBuf {
        match &repo.source {
            RepoSource::Path(p) => PathBuf::from(p),
            RepoSource::Url(_) => self.mirrors.join(format!("{}.git", repo.id)),
        }
    }

    /// Makes run `run_id`'s workspace on branch `branch`, from the repo's
    /// default branch (for a URL repo, after fetching its mirror): a shared
    /// clone whose hooks are the repo's, which knows the default branch too,
    /// checked out once.
    pub async fn create(
        &self,
        repo: &Repo,
        run_id: i64,
        branch: &str,
    ) -> Result<Workspace, WorkspaceError> {
        let lock = self.lock(repo.id);
        let _guard = lock.lock().await;
        let git_dir = self.git_dir(repo);
        if let RepoSource::Url(url) = &repo.source {
            self.refresh_mirror(url, &git_dir).await?;
        }
        std::fs::create_dir_all(&self.root)
            .map_err(|e| WorkspaceError(format!("cannot create {}: {e}", self.root.display())))?;
        let path = self.path_for(run_id);
        let start = format!("refs/heads/{}^{{commit}}", repo.default_branch);
        let sha = git_out(
            &git_dir,
            &["rev-parse", "--verify", "--quiet", &start],
            LOCAL_TIMEOUT,
        )
        .await
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            WorkspaceError(format!(
                "the repo has no branch '{}' to start from (set its default_branch)",
                repo.default_branch
            ))
        })?;
        let path_s = path.to_string_lossy().into_owned();
        git(
            &self.root,
            &["init", "--quiet", "--template=", "--", &path_s],
            LOCAL_TIMEOUT,
        )
        .await?;
        borrow_objects(&path, &git_dir, &sha, &repo.default_branch)
            .map_err(|e| WorkspaceError(format!("cannot set up {}: {e}", path.display())))?;
        git(
            &path,
            &["checkout", "--quiet", "--force", "-b", branch, &sha],
            LOCAL_TIMEOUT,
        )
        .await?;
        Ok(Workspace {
            path,
            branch: branch.to_owned(),
        })
    }

    /// Fetches a run's branch from its workspace into the registered repo
    /// (or its mirror), where pull requests and people find it. Only that
    /// branch: whatever else the run did to its own refs stays in its clone.
    pub async fn collect(
        &self,
        repo: &Repo,
        workspace: &Path,
        branch: &str,
    ) -> Result<(), WorkspaceError> {
        if !workspace.join(".git").is_dir() {
            // A worktree of an older lab shares its refs already; or gone.
            return Ok(());
        }
        let lock = self.lock(repo.id);
        let _guard = lock.lock().await;
        let refspec = format!("+refs/heads/{branch}:refs/heads/{branch}");
        let ws = workspace.to_string_lossy().into_owned();
        git(
            &self.git_dir(repo),
            &["fetch", "--quiet", "--no-tags", "--", &ws, &refspec],
            LOCAL_TIMEOUT,
        )
        .await
    }

    /// The commit a branch of the registered repo (or its mirror) points
    /// at, after [`collect`](Self::collect) brought it in.
    pub async fn branch_head(&self, repo: &Repo, branch: &str) -> Option<String> {
        let r = format!("refs/heads/{branch}");
        git_out(
            &self.git_dir(repo),
            &["rev-parse", "--verify", "--quiet", &r],
            LOCAL_TIMEOUT,
        )
        .await
        .ok()
        .filter(|s| !s.is_empty())
    }

    async fn refresh_mirror(&self, url: &str, mirror: &Path) -> Result<(), WorkspaceError> {
        if mirror.join("HEAD").is_file() {
            return git(
                mirror,
                &["fetch", "--prune", "--quiet", "origin"],
                FETCH_TIMEOUT,
            )
            .await;
        }
        std::fs::create_dir_all(&self.mirrors).map_err(|e| {
            WorkspaceError(format!("cannot create {}: {e}", self.mirrors.display()))
        })?;
        let m = mirror.to_string_lossy().into_owned();
        git(
            &self.mirrors,
            &["clone", "--mirror", "--quiet", "--", url, &m],
            FETCH_TIMEOUT,
        )
        .await
    }

    /// Removes a run's workspace after fetching its branch back into the
    /// repo (the branch stays: it may hold the agent's work). Works when the
    /// repo is gone from lab or from disk, and for the worktrees older labs
    /// made.
    pub async fn remove(
        &self,
        repo: Option<&Repo>,
        path: &Path,
        branch: Option<&str>,
    ) -> Result<(), WorkspaceError> {
        if let Some(repo) = repo.filter(|r| self.git_dir(r).exists()) {
            if path.join(".git").is_file() {
                return self.remove_worktree(repo, path).await;
            }
            if let Some(branch) = branch
                && !self.merged_already(repo, path, branch).await
                && let Err(e) = self.collect(repo, path, branch).await
            {
                tracing::warn!(path = %path.display(), error = %e, "could not keep a run's branch");
            }
        }
        match std::fs::remove_dir_all(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(WorkspaceError(format!(
                "cannot remove {}: {e}",
                path.display()
            ))),
        }
    }

    /// Removes a worktree an older lab made.
    async fn remove_worktree(&self, repo: &Repo, path: &Path) -> Result<(), WorkspaceError> {
        let lock = self.lock(repo.id);
        let _guard = lock.lock().await;
        let git_dir = self.git_dir(repo);
        let p = path.to_string_lossy().into_owned();
        if git(
            &git_dir,
            &["worktree", "remove", "--force", "--force", &p],
            LOCAL_TIMEOUT,
        )
        .await
        .is_err()
        {
            let _ = std::fs::remove_dir_all(path);
            let _ = git(&git_dir, &["worktree", "prune"], LOCAL_TIMEOUT).await;
        }
        Ok(())
    }
}

/// The git folder of a repository: a work tree's `.git`, or a bare one.
pub(super) fn git_folder(git_dir: &Path) -> PathBuf {
    let dot_git = git_dir.join(".git");
    if dot_git.is_dir() {
        dot_git
    } else {
        git_dir.to_path_buf()
    }
}

/// Makes a fresh repository at `ws` borrow the objects of `git_dir`
/// (`objects/info/alternates`, read-only), run its hooks (`core.hooksPath`),
/// and know its default branch at `sha`. This is what `git clone --shared`
/// does, without a transport process: it was the step's largest fixed cost.
fn borrow_objects(
    ws: &Path,
    git_dir: &Path,
    sha: &str,
    default_branch: &str,
) -> std::io::Result<()> {
    let src = git_folder(git_dir);
    let dot_git = ws.join(".git");
    let info = dot_git.join("objects/info");
    std::fs::create_dir_all(&info)?;
    std::fs::write(
        info.join("alternates"),
        format!("{}\n", src.join("objects").display()),
    )?;
    let quoted = src
        .join("hooks")
        .to_string_lossy()
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    let mut config = std::fs::OpenOptions::new()
        .append(true)
        .open(dot_git.join("config"))?;
    use std::io::Write;
    writeln!(config, "[core]\n\thooksPath = \"{quoted}\"")?;
    let branch = dot_git.join("refs/heads").join(default_branch);
    if let Some(dir) = branch.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(branch, format!("{sha}\n"))
}

impl Workspaces {
    /// Pushes a run's branch to `remote`. `auth` is an HTTP header for the
    /// forge (passed to git through its environment, never on its command
    /// line and never into the workspace's config).
    pub async fn push_branch(
        &self,
        repo: &Repo,
        branch: &str,
        remote: &str,
        auth: Option<&str>,
    ) -> Result<(), WorkspaceError> {
        let lock = self.lock(repo.id);
        let _guard = lock.lock().await;
        let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
        let env: Vec<(&str, &str)> = match auth {
            Some(h) => vec![
                ("GIT_CONFIG_COUNT", "1"),
                ("GIT_CONFIG_KEY_0", "http.extraHeader"),
                ("GIT_CONFIG_VALUE_0", h),
            ],
            None => Vec::new(),
        };
        git_env(
            &self.git_dir(repo),
            &["push", "--quiet", "--", remote, &refspec],
            FETCH_TIMEOUT,
            &env,
        )
        .await
        .map(|_| ())
        .map_err(|e| WorkspaceError(e.0.replace(remote, "<the forge>")))
    }
}

/// Runs git in `dir`, never asking for credentials on a terminal.
async fn git(dir: &Path, args: &[&str], timeout: Duration) -> Result<(), WorkspaceError> {
    git_env(dir, args, timeout, &[]).await.map(|_| ())
}

/// Runs git in `dir` and returns what it printed, trimmed.
async fn git_out(dir: &Path, args: &[&str], timeout: Duration) -> Result<String, WorkspaceError> {
    git_env(dir, args, timeout, &[]).await
}

pub(super) async fn git_env(
    dir: &Path,
    args: &[&str],
    timeout: Duration,
    env: &[(&str, &str)],
) -> Result<String, WorkspaceError> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.envs(env.iter().copied());
    cmd.arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "/bin/false")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(timeout, cmd.output())
        .await
        .map_err(|_| {
            WorkspaceError(format!(
                "git {} took longer than {} s",
                args[0],
                timeout.as_secs()
            ))
        })?
        .map_err(|e| WorkspaceError(format!("cannot run git: {e}")))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned());
    }
    Err(WorkspaceError(format!(
        "git {} failed: {}",
        args[0],
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}
