//! Workspaces: the git worktree each run works in, and the repositories they
//! come from.

use std::path::Path;

use crate::repo::RepoSource;
use crate::validate::FieldError;

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
