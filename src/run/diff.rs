//! A run's changes as a diff, read with git (beside `workspace.rs`, the
//! other module that runs git).
//!
//! A live run's diff includes what its agent has not committed, untracked
//! files too, without touching the workspace: lab makes a scratch
//! repository of its own (its config is lab's, so nothing the agent wrote
//! in its clone's config, such as a filter, an fsmonitor or an external
//! diff, is run), which borrows the workspace's objects, and a scratch
//! index in it: `read-tree` of the branch's commit, `add -A` of the
//! workspace as work tree, then `diff --cached` against the merge base.
//! The agent's own index and refs are never written.
//!
//! After the workspace is gone, the diff is the run's branch as fetched
//! back into the repo. Both git outputs are bounded: the patch is read up to
//! [`Limits::total`] and git is stopped there.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::workspace::{WorkspaceError, Workspaces, git_folder};
use crate::diff::{self, Diff, Limits};
use crate::repo::Repo;

const DIFF_TIMEOUT: Duration = Duration::from_secs(60);

/// Options every diff is made with: names relative to the repo, `a/` and
/// `b/` prefixes whatever the config says, renames found, no external diff
/// or text conversion, no colour.
const DIFF_ARGS: &[&str] = &[
    "-c",
    "core.quotePath=true",
    "diff",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-relative",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "-M",
    "--submodule=short",
];

/// Where git runs and with what it is told.
pub(super) struct Git<'a> {
    git_dir: &'a Path,
    work_tree: Option<&'a Path>,
    index: Option<&'a Path>,
    /// Scratch repositories read no config but their own.
    isolated: bool,
}

impl<'a> Git<'a> {
    /// git in a repository, with its own config.
    pub(super) fn plain(git_dir: &'a Path) -> Git<'a> {
        Git {
            git_dir,
            work_tree: None,
            index: None,
            isolated: false,
        }
    }

    /// git in a repository an agent wrote: no system or global config; its
    /// own config is the agent's, so only `rev-parse` runs here (it starts
    /// no program a config names; fsmonitor and hooks are turned off too).
    pub(super) fn agents(git_dir: &'a Path) -> Git<'a> {
        Git {
            isolated: true,
            ..Git::plain(git_dir)
        }
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("git");
        cmd.arg("--git-dir").arg(self.git_dir);
        if let Some(w) = self.work_tree {
            cmd.arg("--work-tree").arg(w).current_dir(w);
        } else {
            cmd.current_dir(self.git_dir);
        }
        cmd.args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
        if let Some(i) = self.index {
            cmd.env("GIT_INDEX_FILE", i);
        }
        if self.isolated {
            cmd.env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null");
        }
        cmd
    }

    /// Runs git; its output, at most `cap` bytes of it (git is stopped
    /// there), and whether it was cut.
    async fn bytes(&self, args: &[&str], cap: usize) -> Result<(Vec<u8>, bool), WorkspaceError> {
        let mut child = self
            .command(args)
            .spawn()
            .map_err(|e| WorkspaceError(format!("cannot run git: {e}")))?;
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let work = async {
            let mut out = Vec::new();
            let mut buf = vec![0u8; 64 * 1024];
            let mut cut = false;
            loop {
                let n = stdout.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                let room = cap - out.len();
                if n > room {
                    out.extend_from_slice(&buf[..room]);
                    cut = true;
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
            if cut {
                let _ = child.start_kill();
                let _ = child.wait().await;
                return Ok::<_, std::io::Error>((out, true, None));
            }
            let mut err = Vec::new();
            stderr.read_to_end(&mut err).await?;
            let status = child.wait().await?;
            Ok((out, false, (!status.success()).then_some(err)))
        };
        let (out, cut, failed) = tokio::time::timeout(DIFF_TIMEOUT, work)
            .await
            .map_err(|_| {
                WorkspaceError(format!(
                    "git {} took longer than {} s",
                    args[0],
                    DIFF_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|e| WorkspaceError(format!("cannot read git's output: {e}")))?;
        if let Some(err) = failed {
            return Err(WorkspaceError(format!(
                "git {} failed: {}",
                args.iter()
                    .find(|a| !a.starts_with('-') && !a.contains('='))
                    .unwrap_or(&"?"),
                String::from_utf8_lossy(&err).trim()
            )));
        }
        Ok((out, cut))
    }

    async fn line(&self, args: &[&str]) -> Result<String, WorkspaceError> {
        let (out, _) = self.bytes(args, 64 * 1024).await?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// A revision's commit id, or `None` when it names none.
    pub(super) async fn commit(&self, rev: &str) -> Option<String> {
        let spec = format!("{rev}^{{commit}}");
        self.line(&[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ])
        .await
        .ok()
        .filter(|s| s.len() >= 40 && s.bytes().all(|b| b.is_ascii_hexdigit()))
    }

    /// The diff from `base` to the index (`cached`) or to `head`.
    async fn diff(
        &self,
        base: &str,
        head: &str,
        cached: bool,
        limits: Limits,
    ) -> Result<Diff, WorkspaceError> {
        let range: Vec<&str> = if cached {
            vec!["--cached", base]
        } else {
            vec![base, head]
        };
        let with = |extra: &[&'static str]| -> Vec<&str> {
            let mut a: Vec<&str> = DIFF_ARGS.to_vec();
            a.extend_from_slice(extra);
            a.extend(range.iter().copied());
            a.push("--");
            a
        };
        let stat_args = with(&["--numstat", "-z"]);
        let (stat, _) = self.bytes(&stat_args, 16 * 1024 * 1024).await?;
        let patch_args = with(&["-p"]);
        let (patch, cut) = self.bytes(&patch_args, limits.total).await?;
        Ok(diff::parse(base, head, &stat, &patch, cut, limits))
    }
}

/// A scratch folder removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn io(what: &str) -> impl Fn(std::io::Error) -> WorkspaceError + '_ {
    move |e| WorkspaceError(format!("cannot {what}: {e}"))
}

impl Workspaces {
    /// The diff of a run's work against the merge base of its branch with
    /// the repo's default branch: its workspace's files when `workspace`
    /// still holds its clone, else its branch in the repo.
    pub async fn run_diff(
        &self,
        repo: &Repo,
        workspace: Option<&Path>,
        branch: &str,
        limits: Limits,
    ) -> Result<Diff, WorkspaceError> {
        let git_dir = git_folder(&self.git_dir(repo));
        let origin = Git::plain(&git_dir);
        let default = format!("refs/heads/{}", repo.default_branch);
        let target = origin.commit(&default).await.ok_or_else(|| {
            WorkspaceError(format!("the repo has no branch '{}'", repo.default_branch))
        })?;
        match workspace.filter(|w| w.join(".git").is_dir()) {
            Some(ws) => self.live_diff(&git_dir, ws, &target, limits).await,
            None => {
                let head = origin
                    .commit(&format!("refs/heads/{branch}"))
                    .await
                    .ok_or_else(|| {
                        WorkspaceError(format!("the branch '{branch}' is not in the repo"))
                    })?;
                self.range_diff_in(&origin, &target, &head, limits).await
            }
        }
    }

    /// The diff of `head` against its merge base with `target`, in the repo.
    pub async fn range_diff(
        &self,
        repo: &Repo,
        target: &str,
        head: &str,
        limits: Limits,
    ) -> Result<Diff, WorkspaceError> {
        let git_dir = git_folder(&self.git_dir(repo));
        let origin = Git::plain(&git_dir);
        let (Some(target), Some(head)) = (origin.commit(target).await, origin.commit(head).await)
        else {
            return Err(WorkspaceError(format!(
                "'{target}' or '{head}' is not in the repo"
            )));
        };
        self.range_diff_in(&origin, &target, &head, limits).await
    }

    async fn range_diff_in(
        &self,
        git: &Git<'_>,
        target: &str,
        head: &str,
        limits: Limits,
    ) -> Result<Diff, WorkspaceError> {
        let base = git
            .line(&["merge-base", target, head])
            .await
            .unwrap_or_else(|_| target.to_owned());
        git.diff(&base, head, false, limits).await
    }

    async fn live_diff(
        &self,
        repo_git: &Path,
        ws: &Path,
        target: &str,
        limits: Limits,
    ) -> Result<Diff, WorkspaceError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = self
            .root_dir()
            .join(".diff")
            .join(format!("{}-{n}", std::process::id()));
        let scratch = Scratch(tmp.clone());
        std::fs::create_dir_all(tmp.join("objects/info")).map_err(io("make a scratch repo"))?;
        std::fs::create_dir_all(tmp.join("refs/heads")).map_err(io("make a scratch repo"))?;
        std::fs::write(tmp.join("HEAD"), "ref: refs/heads/lab-diff\n")
            .map_err(io("make a scratch repo"))?;
        std::fs::write(
            tmp.join("config"),
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n",
        )
        .map_err(io("make a scratch repo"))?;
        std::fs::write(
            tmp.join("objects/info/alternates"),
            format!(
                "{}\n{}\n",
                ws.join(".git/objects").display(),
                repo_git.join("objects").display()
            ),
        )
        .map_err(io("make a scratch repo"))?;
        let index = tmp.join("index");
        let git = Git {
            git_dir: &tmp,
            work_tree: Some(ws),
            index: Some(&index),
            isolated: true,
        };
        let ws_git = ws.join(".git");
        let agent = Git::agents(&ws_git);
        let head = agent
            .commit("HEAD")
            .await
            .ok_or_else(|| WorkspaceError("the run's workspace has no commit".into()))?;
        git.bytes(&["read-tree", &head], 1024).await?;
        git.bytes(&["add", "--all", "--ignore-errors", "--", "."], 1024 * 1024)
            .await
            .or_else(|e| {
                // An unreadable file is left out, the rest is added.
                tracing::debug!(error = %e, "a run's files could not all be read for its diff");
                Ok::<_, WorkspaceError>((Vec::new(), false))
            })?;
        let base = git
            .line(&["merge-base", target, &head])
            .await
            .unwrap_or_else(|_| target.to_owned());
        let mut d = git.diff(&base, &head, true, limits).await?;
        d.work_tree = true;
        drop(scratch);
        Ok(d)
    }
}
