//! A file of a repo's default branch, as lab reads it: `.lab.toml`
//! (issue 27). Host side of the trust boundary: the registered repo (or its
//! mirror) is the operator's, and git reads the file from the branch's
//! commit, never from a work tree or a run's clone.

use super::git::Git;
use super::workspace::{MIRROR_FRESH, WorkspaceError, Workspaces};
use crate::repo::Repo;

/// A file of the default branch: the commit it was read at and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchFile {
    pub commit: String,
    pub bytes: Vec<u8>,
    /// The file was longer than asked for; `bytes` is its start.
    pub cut: bool,
}

impl Workspaces {
    /// `name` at the top of the repo's default branch, at most `cap` bytes
    /// of it: `None` when the branch has no such regular file (a link or a
    /// folder by that name is none), or no commit. A URL repo's mirror is
    /// fetched first when it is older than [`MIRROR_FRESH`] (a launch fetches
    /// it too), so a claim reads the file the remote has.
    pub async fn default_branch_file(
        &self,
        repo: &Repo,
        name: &str,
        cap: usize,
    ) -> Result<Option<BranchFile>, WorkspaceError> {
        self.freshen(repo, MIRROR_FRESH).await;
        let dir = self.git_dir(repo);
        let git = Git::host(&dir);
        let Some(commit) = git
            .commit(&format!("refs/heads/{}", repo.default_branch))
            .await
        else {
            return Ok(None);
        };
        let listed = git
            .out(&["ls-tree", "--full-tree", &commit, "--", name])
            .await?;
        // `<mode> <type> <id>\t<name>`: a regular file is a blob of mode
        // 100644 or 100755 (a link is 120000).
        let Some((meta, _)) = listed.split_once('\t') else {
            return Ok(None);
        };
        let mut parts = meta.split(' ');
        let (mode, kind, id) = (parts.next(), parts.next(), parts.next());
        if !matches!(mode, Some("100644" | "100755")) || kind != Some("blob") {
            return Ok(None);
        }
        let Some(id) = id.filter(|i| super::git::is_object_id(i)) else {
            return Ok(None);
        };
        let (bytes, cut) = git.bytes(&["cat-file", "blob", id], cap).await?;
        Ok(Some(BranchFile { commit, bytes, cut }))
    }
}
