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
//! Which side of the trust boundary (ADR 24): making a workspace is host
//! side (the agent has not run yet: the folder is lab's). Anything done to a
//! workspace after its agent started reads the agent's data: its git runs
//! in the run's jail (`git.rs`), and lab touches its internals here only
//! through descriptors that follow no link ([`tend_internals`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::git::{FETCH_TIMEOUT, Git, Jail, git_program};
use crate::repo::{Repo, RepoSource};
use crate::validate::FieldError;

mod branch;
mod spares;
pub use branch::Changed;

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
    /// mirror fetches are not safe to run side by side. The lock holds what
    /// lab knows of the repo's mirror.
    locks: Mutex<HashMap<i64, Arc<tokio::sync::Mutex<Mirror>>>>,
    /// Each repo's prepared next workspace (`spares.rs`).
    spares: Arc<spares::Spares>,
}

/// What lab knows of one URL repo's mirror (kept under the repo's lock).
#[derive(Debug, Default)]
pub(super) struct Mirror {
    /// When it was last fetched (or cloned) without an error.
    fetched: Option<std::time::Instant>,
}

/// How old a mirror may be when lab reads a file of the repo's default
/// branch for a claim (`.lab.toml`): older, it is fetched first. A launch
/// always fetches.
pub const MIRROR_FRESH: std::time::Duration = std::time::Duration::from_secs(60);

/// The transports a mirror and a push may use (the operator's URL).
const REMOTE_PROTOCOLS: &[&str] = &["https", "http", "ssh", "git", "file"];

impl Workspaces {
    pub fn new(data_dir: &Path) -> Workspaces {
        Workspaces {
            root: data_dir.join("workspaces"),
            mirrors: data_dir.join("mirrors"),
            locks: Mutex::new(HashMap::new()),
            spares: Arc::new(spares::Spares::new(data_dir)),
        }
    }

    pub(super) fn lock(&self, repo_id: i64) -> Arc<tokio::sync::Mutex<Mirror>> {
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
    /// checked out once. The repo's spare is taken when it was made from the
    /// same head, and the next one is made after. Host side: no agent has
    /// run in it yet.
    pub async fn create(
        &self,
        repo: &Repo,
        run_id: i64,
        branch: &str,
    ) -> Result<Workspace, WorkspaceError> {
        let lock = self.lock(repo.id);
        let mut mirror = lock.lock().await;
        let git_dir = self.git_dir(repo);
        if let RepoSource::Url(url) = &repo.source {
            self.refresh_mirror(url, &git_dir, &mut mirror).await?;
        }
        std::fs::create_dir_all(&self.root)
            .map_err(|e| WorkspaceError(format!("cannot create {}: {e}", self.root.display())))?;
        let path = self.path_for(run_id);
        let start = format!("refs/heads/{}", repo.default_branch);
        let by_hand = branch_head_by_hand(&git_dir, &start);
        let sha = match by_hand {
            Some(sha) => Some(sha),
            None => Git::host(&git_dir).commit(&start).await,
        };
        let sha = sha.ok_or_else(|| {
            WorkspaceError(format!(
                "the repo has no branch '{}' to start from (set its default_branch)",
                repo.default_branch
            ))
        })?;
        let from = spares::From {
            repo_id: repo.id,
            git_dir: &git_dir,
            sha: &sha,
            default_branch: &repo.default_branch,
        };
        if !self.spares.take(&from, &path, branch).await {
            let path_s = path.to_string_lossy().into_owned();
            Git::host(&self.root)
                .run(&["init", "--quiet", "--template=", "--", &path_s])
                .await?;
            borrow_objects(&path, &git_dir, &sha, &repo.default_branch)
                .map_err(|e| WorkspaceError(format!("cannot set up {}: {e}", path.display())))?;
            Git::host(&path)
                .run(&["checkout", "--quiet", "--force", "-b", branch, &sha])
                .await?;
        }
        self.spares.refill(&from);
        Ok(Workspace {
            path,
            branch: branch.to_owned(),
        })
    }

    /// Drops what this node keeps ready for a repo lab no longer has (its
    /// spare workspace).
    pub async fn forget_repo(&self, repo_id: i64) {
        self.spares.forget(repo_id).await;
    }

    /// Moves a fresh workspace's branch to `commit` of the repo (a pull
    /// request's head a review run reads). Jail side: the tree is another
    /// run's bytes, so git writes it inside `jail` (the new run's sandbox,
    /// its workspace writable); `None` only where lab runs nothing
    /// sandboxed, hardened as every git.
    pub async fn check_out(
        &self,
        ws: &Workspace,
        commit: &str,
        jail: Option<&Jail>,
    ) -> Result<(), WorkspaceError> {
        let git_dir = ws.path.join(".git");
        Git::agents(&git_dir, jail)
            .work_tree(&ws.path)
            .run(&["checkout", "--quiet", "--force", "-B", &ws.branch, commit])
            .await?;
        Ok(())
    }

    /// Fetches a run's branch from its workspace into the registered repo
    /// (or its mirror), where pull requests and people find it. Only that
    /// branch: whatever else the run did to its own refs stays in its clone.
    ///
    /// Both sides: the fetch is lab's, in the repo (host side); the end that
    /// reads the workspace (`git upload-pack`) runs in the run's `jail`, so
    /// it is git's own protocol, checked object by object, that carries the
    /// branch across (as from any untrusted remote). Without a jail (a run
    /// that was never sandboxed) both ends run on the host, hardened.
    pub async fn collect(
        &self,
        repo: &Repo,
        workspace: &Path,
        branch: &str,
        jail: Option<&Jail>,
    ) -> Result<(), WorkspaceError> {
        if workspace.join(".git").symlink_metadata().is_err() {
            // Gone, or a worktree of an older lab, which shares its refs.
            return Ok(());
        }
        tend_internals(workspace, &git_folder(&self.git_dir(repo)))?;
        let lock = self.lock(repo.id);
        let _guard = lock.lock().await;
        let refspec = format!("+refs/heads/{branch}:refs/heads/{branch}");
        let ws = workspace.to_string_lossy().into_owned();
        let upload_pack = jail.map(|j| {
            let git = git_program();
            j.shell_command(&[&git.to_string_lossy(), "upload-pack"])
        });
        let mut args = vec![
            "-c",
            "fetch.fsckObjects=true",
            "fetch",
            "--quiet",
            "--no-tags",
        ];
        if let Some(u) = upload_pack.as_deref() {
            args.push("--upload-pack");
            args.push(u);
        }
        args.extend(["--", &ws, &refspec]);
        Git::host(&self.git_dir(repo))
            .protocols(&["file"])
            .run(&args)
            .await
    }

    /// Fetches a URL repo's mirror (cloning it the first time); `state` is
    /// the mirror's, held under the repo's lock.
    async fn refresh_mirror(
        &self,
        url: &str,
        mirror: &Path,
        state: &mut Mirror,
    ) -> Result<(), WorkspaceError> {
        let fetched = if mirror.join("HEAD").is_file() {
            Git::host(mirror)
                .protocols(REMOTE_PROTOCOLS)
                .timeout(FETCH_TIMEOUT)
                .run(&["fetch", "--prune", "--quiet", "origin"])
                .await
        } else {
            std::fs::create_dir_all(&self.mirrors).map_err(|e| {
                WorkspaceError(format!("cannot create {}: {e}", self.mirrors.display()))
            })?;
            let m = mirror.to_string_lossy().into_owned();
            Git::host(&self.mirrors)
                .protocols(REMOTE_PROTOCOLS)
                .timeout(FETCH_TIMEOUT)
                .run(&["clone", "--mirror", "--quiet", "--", url, &m])
                .await
        };
        if fetched.is_ok() {
            state.fetched = Some(std::time::Instant::now());
        }
        fetched
    }

    /// Fetches a URL repo's mirror unless it was fetched within `fresh`
    /// (a path repo is read as it is). A failed fetch leaves the mirror as
    /// it was, and says why.
    pub(super) async fn freshen(&self, repo: &Repo, fresh: std::time::Duration) {
        let RepoSource::Url(url) = &repo.source else {
            return;
        };
        let lock = self.lock(repo.id);
        let mut mirror = lock.lock().await;
        if mirror.fetched.is_some_and(|at| at.elapsed() < fresh) {
            return;
        }
        if let Err(e) = self
            .refresh_mirror(url, &self.git_dir(repo), &mut mirror)
            .await
        {
            tracing::warn!(repo = %repo.name, error = %e, "could not fetch the repo's mirror");
        }
    }

    /// Removes a run's workspace after fetching its branch back into the
    /// repo (the branch stays: it may hold the agent's work). Works when the
    /// repo is gone from lab or from disk, and for the worktrees older labs
    /// made. The folder goes without following a link in it.
    pub async fn remove(
        &self,
        repo: Option<&Repo>,
        path: &Path,
        branch: Option<&str>,
        jail: Option<&Jail>,
    ) -> Result<(), WorkspaceError> {
        if let Some(repo) = repo.filter(|r| self.git_dir(r).exists()) {
            if path
                .join(".git")
                .symlink_metadata()
                .is_ok_and(|m| m.is_file())
            {
                return self.remove_worktree(repo, path).await;
            }
            if let Some(branch) = branch {
                let keep = match self.agent_branch(repo, path, branch, jail).await {
                    // Nothing to keep: no branch is left behind for it.
                    Some((_, true)) => {
                        self.forget_branch(repo, branch).await;
                        false
                    }
                    Some((sha, false)) => !self.merged_already(repo, branch, &sha).await,
                    None => true,
                };
                if keep && let Err(e) = self.collect(repo, path, branch, jail).await {
                    tracing::warn!(path = %path.display(), error = %e, "could not keep a run's branch");
                }
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
        let git = Git::host(&git_dir);
        if git
            .run(&["worktree", "remove", "--force", "--force", &p])
            .await
            .is_err()
        {
            let _ = std::fs::remove_dir_all(path);
            let _ = git.run(&["worktree", "prune"]).await;
        }
        Ok(())
    }
}

/// The git folder of a repository: a work tree's `.git`, or a bare one.
/// The commit a branch of the operator's repo is at, read from its ref
/// file or `packed-refs` without starting git (a start's largest fixed cost
/// after the checkout). `None` for anything else (a symbolic ref, a repo
/// whose refs live elsewhere): git is asked then. Host side: the operator's
/// repo, not a run's.
fn branch_head_by_hand(git_dir: &Path, full_ref: &str) -> Option<String> {
    let folder = git_folder(git_dir);
    let is_sha =
        |s: &str| (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit());
    match std::fs::read_to_string(folder.join(full_ref)) {
        Ok(text) => {
            let sha = text.trim();
            return is_sha(sha).then(|| sha.to_owned());
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return None,
        Err(_) => {}
    }
    let packed = std::fs::read_to_string(folder.join("packed-refs")).ok()?;
    packed.lines().find_map(|l| {
        let (sha, name) = l.split_once(' ')?;
        (name == full_ref && is_sha(sha)).then(|| sha.to_owned())
    })
}

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
    std::fs::write(info.join("alternates"), alternates(&src))?;
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

/// The `alternates` of a workspace whose repo's git folder is `src`: that
/// repo's objects, nothing else.
fn alternates(src: &Path) -> String {
    format!("{}\n", src.join("objects").display())
}

/// Before lab reads a workspace its agent may have changed: refuses git
/// internals that are links (`.git` itself, its config, `HEAD`, refs,
/// objects, index) or that point elsewhere (`commondir`, a `.git` file), and
/// writes lab's own `objects/info/alternates` (the repo's objects, nothing
/// the agent chose). Every step goes through a descriptor opened without
/// following a link, so a link swapped in mid-way is refused, not followed.
///
/// Host side, on the agent's data: it executes nothing and follows no link.
pub(super) fn tend_internals(ws: &Path, repo_git: &Path) -> Result<(), WorkspaceError> {
    use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, openat, renameat, statat};
    let refuse = |what: &str| {
        WorkspaceError(format!(
            "the run's git folder is not as lab made it ({what})"
        ))
    };
    let dir = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
    let ws_fd = openat(CWD, ws, dir, Mode::empty()).map_err(|_| refuse("no workspace folder"))?;
    let git =
        openat(&ws_fd, ".git", dir, Mode::empty()).map_err(|_| refuse(".git is not a folder"))?;
    if statat(&git, "commondir", AtFlags::SYMLINK_NOFOLLOW).is_ok() {
        return Err(refuse("a commondir"));
    }
    for name in [
        "config",
        "HEAD",
        "packed-refs",
        "index",
        "refs",
        "objects",
        "shallow",
    ] {
        if let Ok(st) = statat(&git, name, AtFlags::SYMLINK_NOFOLLOW)
            && FileType::from_raw_mode(st.st_mode) == FileType::Symlink
        {
            return Err(refuse(&format!("{name} is a link")));
        }
    }
    let objects = openat(&git, "objects", dir, Mode::empty())
        .map_err(|_| refuse("objects is not a folder"))?;
    let info = match openat(&objects, "info", dir, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => {
            rustix::fs::mkdirat(&objects, "info", Mode::from_raw_mode(0o755))
                .map_err(|_| refuse("cannot make objects/info"))?;
            openat(&objects, "info", dir, Mode::empty())
                .map_err(|_| refuse("objects/info is not a folder"))?
        }
        Err(_) => return Err(refuse("objects/info is not a folder")),
    };
    let want = alternates(repo_git);
    if let Ok(fd) = openat(
        &info,
        "alternates",
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        let mut f = std::fs::File::from(fd);
        let mut have = String::new();
        use std::io::Read;
        if (&mut f).take(64 * 1024).read_to_string(&mut have).is_ok() && have == want {
            return Ok(());
        }
    }
    let mut rnd = [0u8; 6];
    getrandom::fill(&mut rnd).map_err(|_| refuse("no randomness"))?;
    let tmp = format!("alternates.lab-{}", hex::encode(rnd));
    let fd = openat(
        &info,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .map_err(|_| refuse("cannot write objects/info/alternates"))?;
    use std::io::Write;
    std::fs::File::from(fd)
        .write_all(want.as_bytes())
        .map_err(|_| refuse("cannot write objects/info/alternates"))?;
    renameat(&info, tmp.as_str(), &info, "alternates").map_err(|_| {
        let _ = rustix::fs::unlinkat(&info, tmp.as_str(), AtFlags::empty());
        refuse("objects/info/alternates is not a file")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    #[test]
    fn a_branch_head_read_by_hand_is_git_s() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        git(r, &["init", "-q", "-b", "main"]);
        git(r, &["commit", "-q", "--allow-empty", "-m", "one"]);
        let head = git(r, &["rev-parse", "refs/heads/main"]);
        assert_eq!(
            branch_head_by_hand(r, "refs/heads/main"),
            Some(head.clone())
        );
        // Packed, the loose file gone.
        git(r, &["pack-refs", "--all"]);
        assert!(!r.join(".git/refs/heads/main").exists());
        assert_eq!(branch_head_by_hand(r, "refs/heads/main"), Some(head));
        // Moved after packing: the loose file wins, as in git.
        git(r, &["commit", "-q", "--allow-empty", "-m", "two"]);
        let moved = git(r, &["rev-parse", "refs/heads/main"]);
        assert_eq!(branch_head_by_hand(r, "refs/heads/main"), Some(moved));
        assert_eq!(branch_head_by_hand(r, "refs/heads/nope"), None);
        // A symbolic ref is left to git.
        git(r, &["symbolic-ref", "refs/heads/alias", "refs/heads/main"]);
        assert_eq!(branch_head_by_hand(r, "refs/heads/alias"), None);
    }
}
