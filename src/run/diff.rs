//! A run's changes as a diff.
//!
//! Which side of the trust boundary (ADR 24): a live run's diff reads its
//! agent's workspace, so every git of it runs in the run's jail (its sandbox
//! view, the workspace read-only, no network; `git.rs`): lab makes a scratch
//! repository of its own in the jail's scratch folder (its config is lab's,
//! so nothing the agent wrote in its clone's config is used), which borrows
//! the workspace's objects, and a scratch index in it: `read-tree` of the
//! branch's commit, `add -A` of the workspace as work tree, then
//! `diff --cached` against the merge base. A link in the workspace that
//! names a host file shows as a link; the host file is not in the jail's
//! view to be read. The agent's own index and refs are never written.
//!
//! After the workspace is gone, the diff is the run's branch as fetched
//! back into the repo (host side: objects in the operator's repository,
//! read with no external diff or text conversion). Both git outputs are
//! bounded: the patch is read up to [`Limits::total`] and git is stopped
//! there.

use std::path::{Path, PathBuf};

use super::git::{Git, Jail};
use super::workspace::{WorkspaceError, Workspaces, git_folder, tend_internals};
use crate::diff::{self, Diff, Limits};
use crate::repo::Repo;

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

/// The diff from `base` to the index (`cached`) or to `head`.
async fn diff_of(
    git: &Git<'_>,
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
    let (stat, _) = git.bytes(&stat_args, 16 * 1024 * 1024).await?;
    let patch_args = with(&["-p"]);
    let (patch, cut) = git.bytes(&patch_args, limits.total).await?;
    Ok(diff::parse(base, head, &stat, &patch, cut, limits))
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
        jail: Option<&Jail>,
    ) -> Result<Diff, WorkspaceError> {
        let git_dir = git_folder(&self.git_dir(repo));
        let origin = Git::host_git_dir(&git_dir);
        let default = format!("refs/heads/{}", repo.default_branch);
        let target = origin.commit(&default).await.ok_or_else(|| {
            WorkspaceError(format!("the repo has no branch '{}'", repo.default_branch))
        })?;
        match workspace.filter(|w| w.join(".git").symlink_metadata().is_ok()) {
            Some(ws) => self.live_diff(&git_dir, ws, &target, limits, jail).await,
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
        let origin = Git::host_git_dir(&git_dir);
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
            .out(&["merge-base", target, head])
            .await
            .unwrap_or_else(|_| target.to_owned());
        diff_of(git, &base, head, false, limits).await
    }

    async fn live_diff(
        &self,
        repo_git: &Path,
        ws: &Path,
        target: &str,
        limits: Limits,
        jail: Option<&Jail>,
    ) -> Result<Diff, WorkspaceError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        tend_internals(ws, repo_git)?;
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base_dir: PathBuf = match jail.and_then(|j| j.scratch.clone()) {
            Some(s) => s,
            None => self.root_dir().join(".diff"),
        };
        let tmp = base_dir.join(format!("{}-{n}", std::process::id()));
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
        let git = Git::host_git_dir(&tmp)
            .work_tree(ws)
            .index(&index)
            .isolated()
            .jail(jail);
        let ws_git = ws.join(".git");
        let agent = Git::agents(&ws_git, jail);
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
            .out(&["merge-base", target, &head])
            .await
            .unwrap_or_else(|_| target.to_owned());
        let mut d = diff_of(&git, &base, &head, true, limits).await?;
        d.work_tree = true;
        drop(scratch);
        Ok(d)
    }
}
