//! Finding a program the way a shell would, once, so that lab can start it
//! by its full path.
//!
//! A child started by name with a changed environment (lab's tmux clients
//! keep only a few variables) makes the standard library look the name up
//! itself after a full `fork` of lab, copying its page tables for every
//! call; one started by its full path goes through `posix_spawn`, which
//! does not.

use std::path::{Path, PathBuf};

/// Whether `p` is a file someone may execute.
pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The first executable `name` in lab's `PATH`.
pub fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_on_path_is_found_by_its_full_path_and_a_missing_one_is_not() {
        let sh = find("sh").expect("sh is on every PATH");
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
        assert!(find("lab-no-such-program-anywhere").is_none());
        assert!(!is_executable(Path::new("/etc/passwd")));
    }
}
