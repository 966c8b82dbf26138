//! labctl's own file (`labctl login`): where lab serves and the token to
//! send it, so a server on another port or machine needs no variables on
//! every call.
//!
//! The file is `$LABCTL_CONFIG`, else `<config dir>/lab/labctl.toml`
//! (`~/.config/lab/labctl.toml` on Linux), written with mode 0600:
//!
//! ```toml
//! url = "http://lab.example:7878"
//! token = "…"
//! ```
//!
//! What wins: `--lab-url` / `LAB_URL`, then the file's `url`, then
//! `http://127.0.0.1:7878`. `--token` / `LAB_TOKEN`, then the file's
//! `token` (only when labctl talks to the file's `url`: a token never goes
//! to another server), then the token file of `LAB_DATA_DIR`.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use super::client::{CliError, CliResult};

/// Where lab serves when nothing says otherwise.
pub const DEFAULT_URL: &str = "http://127.0.0.1:7878";

/// What `labctl login` saved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Saved {
    pub url: Option<String>,
    pub token: Option<String>,
}

/// The file's path, when there is a place for it.
pub fn path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LABCTL_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    dirs::config_dir().map(|d| d.join("lab").join("labctl.toml"))
}

/// The saved file; empty when there is none. A file labctl cannot read is
/// an error naming it (never silently another server).
pub fn load() -> CliResult<Saved> {
    let Some(path) = path() else {
        return Ok(Saved::default());
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Saved::default()),
        Err(e) => {
            return Err(CliError::failure(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e| {
        CliError::invalid(format!(
            "{} is not valid TOML ({e}); fix it, or run `labctl logout` to remove it",
            path.display()
        ))
    })?;
    let field = |k: &str| {
        doc.get(k)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
            .filter(|v| !v.is_empty())
    };
    Ok(Saved {
        url: field("url"),
        token: field("token"),
    })
}

/// Writes the file (mode 0600: it holds a token); its path.
pub fn save(s: &Saved) -> CliResult<PathBuf> {
    let path = path().ok_or_else(|| {
        CliError::failure("there is no config folder here; set LABCTL_CONFIG to a file path")
    })?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::failure(format!("cannot create {}: {e}", dir.display())))?;
    }
    let mut doc = toml_edit::DocumentMut::new();
    if let Some(u) = &s.url {
        doc["url"] = toml_edit::value(u.as_str());
    }
    if let Some(t) = &s.token {
        doc["token"] = toml_edit::value(t.as_str());
    }
    let tmp = path.with_extension("toml.tmp");
    let _ = std::fs::remove_file(&tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(doc.to_string().as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, &path));
    written.map_err(|e| CliError::failure(format!("cannot write {}: {e}", path.display())))?;
    Ok(path)
}

/// Removes the file; whether there was one.
pub fn remove() -> CliResult<Option<PathBuf>> {
    let Some(path) = path() else {
        return Ok(None);
    };
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(Some(path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CliError::failure(format!(
            "cannot remove {}: {e}",
            path.display()
        ))),
    }
}

/// The URL and token to use, from the flags (or their variables) and the
/// file.
pub fn resolve(
    url: Option<String>,
    token: Option<String>,
    saved: &Saved,
) -> (String, Option<String>) {
    let trim = |u: &str| u.trim_end_matches('/').to_owned();
    let url = url
        .filter(|u| !u.is_empty())
        .or_else(|| saved.url.clone())
        .unwrap_or_else(|| DEFAULT_URL.to_owned());
    let token = token.filter(|t| !t.is_empty()).or_else(|| {
        saved
            .url
            .as_deref()
            .filter(|u| trim(u) == trim(&url))
            .and(saved.token.clone())
    });
    (url, token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_and_a_saved_token_goes_only_to_its_server() {
        let saved = Saved {
            url: Some("http://far:9000/".into()),
            token: Some("t".into()),
        };
        assert_eq!(
            resolve(None, None, &saved),
            ("http://far:9000/".into(), Some("t".into()))
        );
        assert_eq!(
            resolve(Some("http://far:9000".into()), None, &saved).1,
            Some("t".into())
        );
        // Another server never gets the saved token.
        assert_eq!(
            resolve(Some("http://other:1".into()), None, &saved),
            ("http://other:1".into(), None)
        );
        assert_eq!(
            resolve(None, Some("mine".into()), &saved).1,
            Some("mine".into())
        );
        assert_eq!(
            resolve(None, None, &Saved::default()),
            (DEFAULT_URL.into(), None)
        );
    }
}
