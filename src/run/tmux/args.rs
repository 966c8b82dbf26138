//! What tmux does to arguments, and where lab's socket lives.
//!
//! - an argument ending in `;` separates commands: [`arg`] escapes the final
//!   `;` as `\;`, which tmux turns back into `;`;
//! - `-s`, `-c`, `-F` and `pipe-pane`'s command are read as formats:
//!   [`fmt_arg`] doubles every `#`;
//! - a Unix socket path is at most [`MAX_SOCKET_PATH`] bytes: [`socket_path`]
//!   falls back to a short private path for a deep data dir.

use std::path::{Path, PathBuf};

use super::TmuxError;

/// The longest socket path a Unix socket takes (sun_path is 108 bytes).
pub const MAX_SOCKET_PATH: usize = 107;

/// An argument as tmux must receive it to pass it on unchanged: a final `;`
/// would end the command, so it is sent as `\;`.
pub fn arg(s: &str) -> String {
    match s.strip_suffix(';') {
        Some(head) => format!("{head}\\;"),
        None => s.to_owned(),
    }
}

/// An argument tmux reads as a format: every `#` doubled, then [`arg`].
pub fn fmt_arg(s: &str) -> String {
    arg(&s.replace('#', "##"))
}

/// Single-quotes for `sh`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `<data-dir>/tmux.sock`, or when that is too long for a Unix socket, a
/// stable short path named after the data dir in a private folder.
pub fn socket_path(data_dir: &Path) -> Result<PathBuf, TmuxError> {
    let preferred = data_dir.join("tmux.sock");
    if preferred.as_os_str().len() <= MAX_SOCKET_PATH {
        return Ok(preferred);
    }
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let canonical = data_dir
        .canonicalize()
        .unwrap_or_else(|_| data_dir.to_path_buf());
    let hash = hex::encode(&Sha256::digest(canonical.as_os_str().as_encoded_bytes())[..8]);
    let uid = rustix::process::getuid().as_raw();
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("lab-{uid}"));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let meta = std::fs::metadata(&dir)
        .map_err(|e| TmuxError::Setup(format!("cannot create {}: {e}", dir.display())))?;
    if meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(TmuxError::Setup(format!(
            "the data dir's socket path {} is longer than {MAX_SOCKET_PATH} bytes, and the fallback folder {} \
             is not private to this user: use a shorter --data-dir",
            preferred.display(),
            dir.display()
        )));
    }
    let path = dir.join(format!("{hash}.sock"));
    if path.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(TmuxError::Setup(format!(
            "the tmux socket path {} is longer than {MAX_SOCKET_PATH} bytes: use a shorter --data-dir",
            preferred.display()
        )));
    }
    tracing::warn!(
        preferred = %preferred.display(),
        socket = %path.display(),
        "the data dir is too deep for a Unix socket; lab's tmux socket lives at the fallback path"
    );
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_final_semicolon_is_escaped_and_nothing_else_changes() {
        assert_eq!(arg("a;"), "a\\;");
        assert_eq!(arg(";"), "\\;");
        assert_eq!(arg("a\\;"), "a\\\\;");
        assert_eq!(arg("a;b"), "a;b");
        assert_eq!(arg("#{x} $(y)"), "#{x} $(y)");
        assert_eq!(fmt_arg("/d#{x};"), "/d##{x}\\;");
    }

    #[test]
    fn long_data_dirs_get_a_short_socket() {
        let short = Path::new("/tmp/x");
        assert_eq!(socket_path(short).unwrap(), Path::new("/tmp/x/tmux.sock"));
        let long = std::env::temp_dir().join("d".repeat(120));
        let p = socket_path(&long).unwrap();
        assert!(p.as_os_str().len() <= MAX_SOCKET_PATH, "{}", p.display());
        assert_eq!(socket_path(&long).unwrap(), p, "stable");
    }
}
