//! What lab reads of and does with a run's branch once it is in lab's own
//! repo (or mirror), after [`Workspaces::collect`] brought it in through
//! git's protocol: whether it has commits of its own, which paths it
//! changes, where it points, pushing it to a forge.
//!
//! Host side, over the agent's data: git runs here in lab's repo and reads
//! trees and refs only (`diff-tree`, `cat-file`, `merge-base`, `push`),
//! never a work tree, and runs no driver or filter. What it returns of the
//! branch (paths, link targets) is the agent's bytes; callers show them
//! only on lab's own pages.

use super::{REMOTE_PROTOCOLS, WorkspaceError, Workspaces};
use crate::repo::Repo;
use crate::run::git::{FETCH_TIMEOUT, Git};

/// The most bytes of changed paths' names lab reads of one branch.
const MAX_CHANGES_BYTES: usize = 4 << 20;

/// A path a run's branch changes (added, modified, deleted, or its mode
/// changed), as git names it: bytes, not necessarily UTF-8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    pub path: Vec<u8>,
    /// What a symlink the branch leaves at `path` points to (its blob).
    pub link: Option<Vec<u8>>,
}

/// The entries of `git diff-tree -r -z --raw`: each a metadata field
/// (`:100644 100644 <sha> <sha> M`) and a path, NUL after each.
fn raw_entries(raw: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut parts = raw.split(|b| *b == 0);
    let mut out = Vec::new();
    while let (Some(meta), Some(path)) = (parts.next(), parts.next()) {
        if !meta.starts_with(b":") {
            break;
        }
        out.push((String::from_utf8_lossy(meta).into_owned(), path.to_vec()));
    }
    out
}

impl Workspaces {
    /// Whether `branch` of the registered repo (or its mirror) has a
    /// commit its default branch lacks; `None` when the branch is not
    /// there. Host side: lab's own repo, after [`collect`](Self::collect)
    /// brought the branch in through git's protocol.
    pub async fn has_own_commits(&self, repo: &Repo, branch: &str) -> Option<bool> {
        let dir = self.git_dir(repo);
        let git = Git::host(&dir);
        let head = git.commit(&format!("refs/heads/{branch}")).await?;
        let base = format!("refs/heads/{}", repo.default_branch);
        Some(
            git.run(&["merge-base", "--is-ancestor", &head, &base])
                .await
                .is_err(),
        )
    }

    /// Every path `branch` of the registered repo (or its mirror) changes
    /// against where it left the default branch (its merge base): what its
    /// pull request would hold. A symlink it adds or changes comes with the
    /// target it names. Host side: lab's own repo, after
    /// [`collect`](Self::collect) brought the branch in through git's
    /// protocol; git reads trees here (`diff-tree`, `cat-file`), never a
    /// work tree, and runs no driver or filter. The paths and targets are
    /// the agent's bytes: the caller shows them only on lab's own pages.
    pub async fn changed_paths(
        &self,
        repo: &Repo,
        branch: &str,
    ) -> Result<Vec<Changed>, WorkspaceError> {
        let dir = self.git_dir(repo);
        let git = Git::host(&dir);
        let head = git
            .commit(&format!("refs/heads/{branch}"))
            .await
            .ok_or_else(|| WorkspaceError(format!("{branch} is not in the repo")))?;
        let base = git
            .out(&[
                "merge-base",
                &head,
                &format!("refs/heads/{}", repo.default_branch),
            ])
            .await?;
        if !base.bytes().all(|b| b.is_ascii_hexdigit()) || base.is_empty() {
            return Err(WorkspaceError(format!(
                "{branch} shares no history with {}",
                repo.default_branch
            )));
        }
        let (raw, cut) = git
            .bytes(
                &[
                    "diff-tree",
                    "-r",
                    "-z",
                    "--no-renames",
                    "--raw",
                    &base,
                    &head,
                ],
                MAX_CHANGES_BYTES,
            )
            .await?;
        if cut {
            return Err(WorkspaceError(format!(
                "{branch} changes more paths than lab reads ({} MiB of names)",
                MAX_CHANGES_BYTES >> 20
            )));
        }
        let mut out = Vec::new();
        for (meta, path) in raw_entries(&raw) {
            // `:old-mode new-mode old-sha new-sha status`
            let fields: Vec<&str> = meta.split(' ').collect();
            let (Some(mode), Some(sha)) = (fields.get(1), fields.get(3)) else {
                continue;
            };
            let link = if *mode == "120000" && sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                let (target, _) = git.bytes(&["cat-file", "blob", sha], 4096).await?;
                Some(target)
            } else {
                None
            };
            out.push(Changed { path, link });
        }
        Ok(out)
    }

    /// The commit a branch of the registered repo (or its mirror) points
    /// at, after [`collect`](Self::collect) brought it in.
    pub async fn branch_head(&self, repo: &Repo, branch: &str) -> Option<String> {
        Git::host(&self.git_dir(repo))
            .commit(&format!("refs/heads/{branch}"))
            .await
    }
}

impl Workspaces {
    /// Pushes a run's branch to `remote`. `auth` is an HTTP header for the
    /// forge (passed to git through its environment, never on its command
    /// line and never into the workspace's config). Host side: the branch is
    /// in the repo by now (`collect`).
    ///
    /// Only the run's own ref, and when `lease` names the commit the
    /// forge's branch was last seen at, as a forced push that fails if it
    /// moved since (`--force-with-lease`): a rebased branch goes, another
    /// person's push on it is never overwritten.
    pub async fn push_branch(
        &self,
        repo: &Repo,
        branch: &str,
        remote: &str,
        auth: Option<&str>,
        lease: Option<&str>,
    ) -> Result<(), WorkspaceError> {
        let lock = self.lock(repo.id);
        let _guard = lock.lock().await;
        let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
        let with_lease = lease.map(|sha| format!("--force-with-lease=refs/heads/{branch}:{sha}"));
        let env: Vec<(&str, &str)> = match auth {
            Some(h) => vec![
                ("GIT_CONFIG_COUNT", "1"),
                ("GIT_CONFIG_KEY_0", "http.extraHeader"),
                ("GIT_CONFIG_VALUE_0", h),
            ],
            None => Vec::new(),
        };
        Git::host(&self.git_dir(repo))
            .protocols(REMOTE_PROTOCOLS)
            .timeout(FETCH_TIMEOUT)
            .env(&env)
            .run(
                &std::iter::once("push")
                    .chain(with_lease.as_deref())
                    .chain(["--quiet", "--", remote, &refspec])
                    .collect::<Vec<_>>(),
            )
            .await
            .map_err(|e| WorkspaceError(e.0.replace(remote, "<the forge>")))
    }

    /// The repo's default branch's commit now: a mirror is fetched first
    /// (its objects are what workspaces borrow, so the commit is in every
    /// run's clone after). Host side.
    pub async fn base_head(&self, repo: &Repo) -> Option<String> {
        self.freshen(repo, std::time::Duration::ZERO).await;
        self.branch_head(repo, &repo.default_branch).await
    }
}
