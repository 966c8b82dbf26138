//! Merging a pull request's branch into the registered repo's default
//! branch, without a working tree of lab's (ADR 19).
//!
//! A fast-forward when the default branch is an ancestor of the branch,
//! else a merge commit made by `git merge-tree --write-tree` and
//! `git commit-tree`; the default branch then moves by `git update-ref` with
//! its old value (so a branch that moved meanwhile is not overwritten), or,
//! when it is checked out in a clean working tree of the repo, by that
//! tree's own `git merge --ff-only` (git's checks keep a person's files).
//! lab refuses, changing nothing, when the merge conflicts, when the default
//! branch or the pull request's branch is checked out in a working tree with
//! local changes, and for a repo given by URL (lab holds only a mirror there,
//! which its next fetch would overwrite). After the merge the branch is
//! deleted, if it still points where it was merged from.

use std::path::{Path, PathBuf};

use super::git::{Git, Jail};
use super::workspace::{WorkspaceError, Workspaces, git_folder};
use crate::repo::{Repo, RepoSource};

/// Why a merge was not made; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// It cannot be done safely; the message says why and what to do.
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Git(#[from] WorkspaceError),
}

/// Each reason lab refuses a merge (it changed nothing); the message says
/// why and what to do.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// lab holds only a mirror of a repo given by URL.
    #[error(
        "the repo is given by URL: lab holds only a mirror of it, which its next fetch \
         overwrites; merge the branch where the repo lives"
    )]
    ByUrl,
    #[error("the repo has no branch '{target}' to merge into")]
    NoTarget { target: String },
    #[error("the branch '{branch}' is not in the repo (any more)")]
    NoBranch { branch: String },
    /// Merging would make an empty merge commit.
    #[error("the branch '{branch}' has no commit that '{target}' lacks: there is nothing to merge")]
    NothingToMerge { branch: String, target: String },
    #[error(
        "the branch '{branch}' is checked out in {}; switch that working tree to another \
         branch first",
        .tree.display()
    )]
    BranchCheckedOut { branch: String, tree: PathBuf },
    #[error(
        "'{target}' is checked out in {} with local changes; commit or stash them (lab never \
         touches a working tree a person may be using), then merge again",
        .tree.display()
    )]
    LocalChanges { target: String, tree: PathBuf },
    /// Not a fast-forward, and `git merge-tree` conflicts (at most 20 files
    /// named).
    #[error(
        "the branch is not a fast-forward and conflicts with '{target}' in: {}; rebase or \
         merge it by hand",
        .files.join(", ")
    )]
    Conflicts { target: String, files: Vec<String> },
    /// The target is checked out and its tree's `git merge --ff-only` failed.
    #[error(
        "'{target}' is checked out in {} and git would not move it: {error}",
        .tree.display()
    )]
    TreeWouldNotMove {
        target: String,
        tree: PathBuf,
        error: WorkspaceError,
    },
    /// `git update-ref` with the old value failed: the target moved.
    #[error("'{target}' moved while lab merged; try again ({error})")]
    Moved {
        target: String,
        error: WorkspaceError,
    },
}

/// A merge made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// The default branch's new commit.
    pub sha: String,
    /// Its commit before the merge.
    pub base: String,
    /// The branch's commit that was merged.
    pub head: String,
    pub fast_forward: bool,
}

/// A working tree of the repo: its path and the branch it has checked out.
#[derive(Debug)]
struct Tree {
    path: PathBuf,
    branch: Option<String>,
}

/// Host side: the operator's repository and its working trees.
async fn git(dir: &Path, args: &[&str]) -> Result<String, WorkspaceError> {
    Git::host(dir).out(args).await
}

/// A ref's commit, or `None`.
async fn commit(dir: &Path, refname: &str) -> Option<String> {
    Git::host_git_dir(&git_folder(dir)).commit(refname).await
}

/// The working trees of a repository (`git worktree list --porcelain -z`).
async fn trees(dir: &Path) -> Result<Vec<Tree>, WorkspaceError> {
    let out = git(dir, &["worktree", "list", "--porcelain", "-z"]).await?;
    let mut trees = Vec::new();
    let mut cur: Option<Tree> = None;
    for field in out.split('\0') {
        if let Some(p) = field.strip_prefix("worktree ") {
            trees.extend(cur.take());
            cur = Some(Tree {
                path: PathBuf::from(p),
                branch: None,
            });
        } else if let Some(b) = field.strip_prefix("branch ")
            && let Some(t) = cur.as_mut()
        {
            t.branch = Some(b.to_owned());
        } else if field == "bare" {
            cur = None;
        }
    }
    trees.extend(cur);
    Ok(trees)
}

/// Local changes of a working tree, untracked files included (read without
/// taking git's index lock: `GIT_OPTIONAL_LOCKS=0`).
async fn local_changes(tree: &Path) -> Result<bool, WorkspaceError> {
    let out = git(tree, &["status", "--porcelain", "-z"]).await?;
    Ok(!out.is_empty())
}

impl Workspaces {
    /// What a run's clone says of its `branch`: its commit, and whether it
    /// is still where the workspace started (the clone's default branch).
    /// Read in the run's jail, with lab's config only (ADR 24); `None` when
    /// the branch is not there. The agent's word decides only what happens
    /// to this run's own branch.
    pub(super) async fn agent_branch(
        &self,
        repo: &Repo,
        ws: &Path,
        branch: &str,
        jail: Option<&Jail>,
    ) -> Option<(String, bool)> {
        let ws_git = ws.join(".git");
        let agent = Git::agents(&ws_git, jail);
        let sha = agent.commit(&format!("refs/heads/{branch}")).await?;
        let start = format!("refs/heads/{}", repo.default_branch);
        let unchanged = agent.commit(&start).await.as_deref() == Some(sha.as_str());
        Some((sha, unchanged))
    }

    /// Deletes a run's branch from the registered repo when it has no
    /// commit the default branch lacks (a run that changed nothing, whose
    /// branch an earlier diff or pull request attempt brought in). Host
    /// side, lab's own repo: whatever the run's clone said, a branch with
    /// a commit of its own is never deleted here.
    pub(super) async fn forget_branch(&self, repo: &Repo, branch: &str) {
        if matches!(repo.source, RepoSource::Url(_)) {
            return;
        }
        let lock = self.lock(repo.id);
        let _guard = lock.lock().await;
        let dir = git_folder(&self.git_dir(repo));
        let head_ref = format!("refs/heads/{branch}");
        let Some(head) = commit(&dir, &head_ref).await else {
            return;
        };
        let target = format!("refs/heads/{}", repo.default_branch);
        if git(&dir, &["merge-base", "--is-ancestor", &head, &target])
            .await
            .is_ok()
            && let Err(e) = git(&dir, &["update-ref", "-d", &head_ref, &head]).await
        {
            tracing::warn!(branch, error = %e, "an unchanged run's branch could not be deleted");
        }
    }

    /// Whether a run's branch, at `sha` with commits of its own, is all in
    /// the repo's default branch already and gone from the repo (its pull
    /// request was merged and the branch deleted): then removing the
    /// workspace does not bring the branch back. Host side, lab's own repo.
    pub(super) async fn merged_already(&self, repo: &Repo, branch: &str, sha: &str) -> bool {
        let dir = git_folder(&self.git_dir(repo));
        let target = format!("refs/heads/{}", repo.default_branch);
        commit(&dir, &format!("refs/heads/{branch}"))
            .await
            .is_none()
            && git(&dir, &["merge-base", "--is-ancestor", sha, &target])
                .await
                .is_ok()
    }

    /// Merges `branch` into the repo's default branch (see the module's
    /// documentation for how, and when lab refuses).
    pub async fn merge(
        &self,
        repo: &Repo,
        branch: &str,
        message: &str,
    ) -> Result<Merged, MergeError> {
        if matches!(repo.source, RepoSource::Url(_)) {
            return Err(Refusal::ByUrl.into());
        }
        let lock = self.lock(repo.id);
        let _guard = lock.lock().await;
        let dir = git_folder(&self.git_dir(repo));
        let target_ref = format!("refs/heads/{}", repo.default_branch);
        let head_ref = format!("refs/heads/{branch}");
        let base = commit(&dir, &target_ref)
            .await
            .ok_or_else(|| Refusal::NoTarget {
                target: repo.default_branch.clone(),
            })?;
        let head = commit(&dir, &head_ref)
            .await
            .ok_or_else(|| Refusal::NoBranch {
                branch: branch.to_owned(),
            })?;
        // Nothing of its own: merging would make an empty merge commit.
        if git(&dir, &["merge-base", "--is-ancestor", &head, &base])
            .await
            .is_ok()
        {
            return Err(Refusal::NothingToMerge {
                branch: branch.to_owned(),
                target: repo.default_branch.clone(),
            }
            .into());
        }
        let trees = trees(&dir).await?;
        if let Some(t) = trees
            .iter()
            .find(|t| t.branch.as_deref() == Some(&head_ref))
        {
            return Err(Refusal::BranchCheckedOut {
                branch: branch.to_owned(),
                tree: t.path.clone(),
            }
            .into());
        }
        let checked_out = trees
            .iter()
            .find(|t| t.branch.as_deref() == Some(&target_ref));
        if let Some(t) = checked_out
            && local_changes(&t.path).await?
        {
            return Err(Refusal::LocalChanges {
                target: repo.default_branch.clone(),
                tree: t.path.clone(),
            }
            .into());
        }
        let fast_forward = git(&dir, &["merge-base", "--is-ancestor", &base, &head])
            .await
            .is_ok();
        let sha = if fast_forward {
            head.clone()
        } else {
            merge_commit(&dir, &base, &head, &repo.default_branch, message).await?
        };
        match checked_out {
            Some(t) => {
                git(&t.path, &["merge", "--ff-only", "--quiet", &sha])
                    .await
                    .map_err(|error| Refusal::TreeWouldNotMove {
                        target: repo.default_branch.clone(),
                        tree: t.path.clone(),
                        error,
                    })?;
            }
            None => {
                let msg = format!("lab: {message}");
                git(&dir, &["update-ref", "-m", &msg, &target_ref, &sha, &base])
                    .await
                    .map_err(|error| Refusal::Moved {
                        target: repo.default_branch.clone(),
                        error,
                    })?;
            }
        }
        if let Err(e) = git(&dir, &["update-ref", "-d", &head_ref, &head]).await {
            tracing::warn!(branch, error = %e, "a merged branch could not be deleted");
        }
        Ok(Merged {
            sha,
            base,
            head,
            fast_forward,
        })
    }
}

/// A merge commit of `head` into `base`, made without a working tree;
/// refused when the two conflict (the conflicting files are named).
async fn merge_commit(
    dir: &Path,
    base: &str,
    head: &str,
    target_name: &str,
    message: &str,
) -> Result<String, MergeError> {
    let (out, _, failed) = Git::host(dir)
        .capture(
            &[
                "merge-tree",
                "--write-tree",
                "--name-only",
                "--no-messages",
                "-z",
                base,
                head,
            ],
            16 * 1024 * 1024,
        )
        .await?;
    let stdout = String::from_utf8_lossy(&out);
    let mut fields = stdout.split('\0');
    let tree = fields.next().unwrap_or_default().trim().to_owned();
    match failed {
        None => {}
        Some((Some(1), _)) => {
            let files = fields.filter(|f| !f.is_empty()).take(20);
            return Err(Refusal::Conflicts {
                target: target_name.to_owned(),
                files: files.map(str::to_owned).collect(),
            }
            .into());
        }
        Some((_, err)) => {
            return Err(MergeError::Git(WorkspaceError(format!(
                "git merge-tree failed: {}",
                String::from_utf8_lossy(&err).trim()
            ))));
        }
    }
    let ident = [
        ("GIT_AUTHOR_NAME", "lab"),
        ("GIT_AUTHOR_EMAIL", "lab@localhost"),
        ("GIT_COMMITTER_NAME", "lab"),
        ("GIT_COMMITTER_EMAIL", "lab@localhost"),
    ];
    Ok(Git::host(dir)
        .env(&ident)
        .out(&["commit-tree", &tree, "-p", base, "-p", head, "-m", message])
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each refusal's text, as the API's 409 and the page say it.
    #[test]
    fn refusals_say_why_and_what_to_do() {
        let tree = || PathBuf::from("/src/app");
        let branch = || "lab/run-7".to_owned();
        let target = || "main".to_owned();
        let git = || WorkspaceError("fatal: no".into());
        let cases: Vec<(Refusal, &str)> = vec![
            (
                Refusal::ByUrl,
                "the repo is given by URL: lab holds only a mirror of it, which its next fetch \
                 overwrites; merge the branch where the repo lives",
            ),
            (
                Refusal::NoTarget { target: target() },
                "the repo has no branch 'main' to merge into",
            ),
            (
                Refusal::NoBranch { branch: branch() },
                "the branch 'lab/run-7' is not in the repo (any more)",
            ),
            (
                Refusal::NothingToMerge {
                    branch: branch(),
                    target: target(),
                },
                "the branch 'lab/run-7' has no commit that 'main' lacks: there is nothing to merge",
            ),
            (
                Refusal::BranchCheckedOut {
                    branch: branch(),
                    tree: tree(),
                },
                "the branch 'lab/run-7' is checked out in /src/app; switch that working tree to \
                 another branch first",
            ),
            (
                Refusal::LocalChanges {
                    target: target(),
                    tree: tree(),
                },
                "'main' is checked out in /src/app with local changes; commit or stash them (lab \
                 never touches a working tree a person may be using), then merge again",
            ),
            (
                Refusal::Conflicts {
                    target: target(),
                    files: vec!["a.rs".into(), "b.rs".into()],
                },
                "the branch is not a fast-forward and conflicts with 'main' in: a.rs, b.rs; \
                 rebase or merge it by hand",
            ),
            (
                Refusal::TreeWouldNotMove {
                    target: target(),
                    tree: tree(),
                    error: git(),
                },
                "'main' is checked out in /src/app and git would not move it: fatal: no",
            ),
            (
                Refusal::Moved {
                    target: target(),
                    error: git(),
                },
                "'main' moved while lab merged; try again (fatal: no)",
            ),
        ];
        for (refusal, said) in cases {
            assert_eq!(MergeError::from(refusal).to_string(), said);
        }
    }
}
