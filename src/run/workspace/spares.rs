//! Spare workspaces: one prepared clone per repo, made at its default
//! branch's head after the repo's last start, so the next start takes it
//! (two renames and a `HEAD`) instead of paying `git init` and a checkout
//! while the person waits (issue 40 §11). A spare made at a head the repo
//! has since moved from is never taken: the start makes its workspace as
//! before, and a new spare follows.
//!
//! Host side: a spare is made by lab from the operator's repo and no agent
//! has run in it; a start takes it before its agent exists. Spares live
//! under `<data>/spares`, beside `workspaces` (a rename does not cross
//! filesystems), and what a former lab left there is removed at start-up:
//! only this process knows what each one holds.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{Git, WorkspaceError, borrow_objects};

/// The branch a spare is checked out on, renamed to the run's on taking.
const SPARE_BRANCH: &str = "lab-spare";

/// One spare: where it is and what it was made from.
#[derive(Debug)]
struct Spare {
    path: PathBuf,
    git_dir: PathBuf,
    sha: String,
    default_branch: String,
}

impl Spare {
    fn made_from(&self, from: &From<'_>) -> bool {
        self.sha == from.sha
            && self.default_branch == from.default_branch
            && self.git_dir == from.git_dir
    }
}

/// Each repo's spare slot. A slot's lock is held while its spare is made,
/// so a start that comes meanwhile waits for it (sooner done than a
/// workspace of its own).
type Slot = Arc<tokio::sync::Mutex<Option<Spare>>>;

pub(super) struct Spares {
    dir: PathBuf,
    slots: Mutex<HashMap<i64, Slot>>,
}

/// What a spare is made from: the repo's git folder and its default branch
/// at `sha`.
pub(super) struct From<'a> {
    pub repo_id: i64,
    pub git_dir: &'a Path,
    pub sha: &'a str,
    pub default_branch: &'a str,
}

impl Spares {
    pub(super) fn new(data_dir: &Path) -> Spares {
        let dir = data_dir.join("spares");
        // A former lab's spares: moved aside at once, removed off the path.
        if dir.exists() {
            let aside = data_dir.join(format!("spares.old-{}", std::process::id()));
            if std::fs::rename(&dir, &aside).is_ok() {
                let _ = std::thread::Builder::new()
                    .name("old-spares".into())
                    .spawn(move || std::fs::remove_dir_all(aside));
            }
        }
        Spares {
            dir,
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn slot(&self, repo_id: i64) -> Slot {
        self.slots
            .lock()
            .expect("spare slots poisoned")
            .entry(repo_id)
            .or_default()
            .clone()
    }

    /// Takes the repo's spare as the workspace at `path` on `branch`, when
    /// it was made from `from`. `false`: there was none to take (the caller
    /// makes the workspace). A spare made from another head is removed.
    pub(super) async fn take(&self, from: &From<'_>, path: &Path, branch: &str) -> bool {
        if !plain_branch(branch) {
            return false;
        }
        let slot = self.slot(from.repo_id);
        let Some(spare) = slot.lock().await.take() else {
            return false;
        };
        if !spare.made_from(from) {
            discard(spare.path);
            return false;
        }
        match adopt(&spare.path, path, branch) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(error = %e, "could not take a spare workspace; making one");
                if path.exists() {
                    discard(path.to_owned());
                }
                discard(spare.path);
                false
            }
        }
    }

    /// Makes the repo's next spare from `from`, in the background (unless
    /// one made from it is there).
    pub(super) fn refill(self: &Arc<Self>, from: &From<'_>) {
        let me = self.clone();
        let (repo_id, git_dir, sha, default_branch) = (
            from.repo_id,
            from.git_dir.to_owned(),
            from.sha.to_owned(),
            from.default_branch.to_owned(),
        );
        tokio::spawn(async move {
            let slot = me.slot(repo_id);
            let mut held = slot.lock().await;
            let from = From {
                repo_id,
                git_dir: &git_dir,
                sha: &sha,
                default_branch: &default_branch,
            };
            if held.as_ref().is_some_and(|s| s.made_from(&from)) {
                return;
            }
            if let Some(old) = held.take() {
                discard(old.path);
            }
            match me.make(repo_id, &git_dir, &sha, &default_branch).await {
                Ok(path) => {
                    *held = Some(Spare {
                        path,
                        git_dir: git_dir.clone(),
                        sha: sha.clone(),
                        default_branch: default_branch.clone(),
                    })
                }
                Err(e) => tracing::debug!(error = %e, "could not make a spare workspace"),
            }
        });
    }

    /// Forgets a repo's spare (the repo is gone from lab).
    pub(super) async fn forget(&self, repo_id: i64) {
        let slot = self
            .slots
            .lock()
            .expect("spare slots poisoned")
            .remove(&repo_id);
        if let Some(slot) = slot
            && let Some(s) = slot.lock().await.take()
        {
            discard(s.path);
        }
    }

    /// Makes one spare: what [`super::Workspaces::create`] makes, on
    /// [`SPARE_BRANCH`].
    async fn make(
        &self,
        repo_id: i64,
        git_dir: &Path,
        sha: &str,
        default_branch: &str,
    ) -> Result<PathBuf, WorkspaceError> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| WorkspaceError(format!("cannot create {}: {e}", self.dir.display())))?;
        let mut rnd = [0u8; 6];
        getrandom::fill(&mut rnd).map_err(|e| WorkspaceError(e.to_string()))?;
        let path = self.dir.join(format!("{repo_id}-{}", hex::encode(rnd)));
        let path_s = path.to_string_lossy().into_owned();
        let made = async {
            Git::host(&self.dir)
                .run(&["init", "--quiet", "--template=", "--", &path_s])
                .await?;
            borrow_objects(&path, git_dir, sha, default_branch)
                .map_err(|e| WorkspaceError(format!("cannot set up {}: {e}", path.display())))?;
            Git::host(&path)
                .run(&["checkout", "--quiet", "--force", "-b", SPARE_BRANCH, sha])
                .await
        };
        match made.await {
            Ok(()) => Ok(path),
            Err(e) => {
                discard(path);
                Err(e)
            }
        }
    }
}

/// Whether lab may write `branch` as a ref by hand: lab's own names
/// (`lab/run-7`), nothing git's `check-ref-format` would have to judge.
fn plain_branch(branch: &str) -> bool {
    !branch.is_empty()
        && branch != SPARE_BRANCH
        && branch.split('/').all(|c| {
            !c.is_empty()
                && !c.starts_with('.')
                && !c.ends_with(".lock")
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
        })
}

/// Moves the spare at `spare` to `path` and renames its branch to `branch`
/// (its ref, its reflog, `HEAD`).
fn adopt(spare: &Path, path: &Path, branch: &str) -> std::io::Result<()> {
    std::fs::rename(spare, path)?;
    let git = path.join(".git");
    for base in ["refs/heads", "logs/refs/heads"] {
        let from = git.join(base).join(SPARE_BRANCH);
        if base.starts_with("logs") && !from.exists() {
            continue;
        }
        let to = git.join(base).join(branch);
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::rename(from, to)?;
    }
    std::fs::write(git.join("HEAD"), format!("ref: refs/heads/{branch}\n"))
}

/// Removes a spare (or a half-taken one) off the caller's path.
fn discard(path: PathBuf) {
    let _ = std::thread::Builder::new()
        .name("spare-rm".into())
        .spawn(move || std::fs::remove_dir_all(path));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lab_s_own_branch_names_are_written_by_hand() {
        for ok in ["lab/run-7", "lab/issue-12-fix_it", "main"] {
            assert!(plain_branch(ok), "{ok}");
        }
        for no in [
            "",
            "lab-spare",
            "lab//run",
            "lab/.hidden",
            "lab/run.lock",
            "lab/run 7",
            "lab/ü",
            "../x",
            "lab/run..7",
        ] {
            assert!(!plain_branch(no), "{no:?}");
        }
    }
}
