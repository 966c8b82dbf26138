//! A CLI's own folder, as each run gets one (ADR 24): pure data. The run
//! module makes the folder, seeds it from what is declared here, and applies
//! the edits a provider asks for before a start.

use std::path::{Path, PathBuf};

/// A CLI's own folder of config, credentials and transcripts. Each run has
/// one of its own (`<run>/home/<dir>`), named to the CLI by `env`; the
/// operator's (the same variable in lab's environment, else `<home>/<dir>`)
/// is only read from, never written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CliHome {
    /// The variable that moves the folder (`CLAUDE_CONFIG_DIR`,
    /// `CODEX_HOME`).
    pub env: &'static str,
    /// The folder under the home when the variable is unset (`.claude`).
    pub dir: &'static str,
    /// The operator's files a run's folder is seeded from.
    pub files: &'static [CliFile],
}

/// One of the operator's files a run's folder is seeded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CliFile {
    pub name: &'static str,
    /// Where the operator's copy lies when the variable is unset: in the
    /// home itself (Claude Code's `~/.claude.json`) rather than the folder.
    pub in_home: bool,
    pub kind: FileKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A credential file: bound read-only into the run's folder (copied
    /// for a run without a sandbox); lab never reads it.
    Credential,
    /// A config file: the run's starts from nothing but these keys of the
    /// operator's (the account, never settings), plus the keys the operator
    /// lists to carry (`runs.carry_cli_keys`).
    Config {
        format: Format,
        credential_keys: &'static [&'static str],
    },
}

impl CliHome {
    /// The operator's folder, for an agent home `home` and lab's
    /// environment lookup.
    pub fn operator_dir(&self, home: &Path, env: impl Fn(&str) -> Option<String>) -> PathBuf {
        match env(self.env).filter(|d| !d.is_empty()) {
            Some(d) => PathBuf::from(d),
            None => home.join(self.dir),
        }
    }

    /// Where the operator's copy of `f` is.
    pub fn operator_file(
        &self,
        f: &CliFile,
        home: &Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> PathBuf {
        match env(self.env).filter(|d| !d.is_empty()) {
            Some(d) => PathBuf::from(d).join(f.name),
            None if f.in_home => home.join(f.name),
            None => home.join(self.dir).join(f.name),
        }
    }
}

/// One of the CLI's config files in a run's own folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigFile {
    pub name: &'static str,
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Toml,
}

/// A value to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigValue {
    Bool(bool),
    Str(String),
    /// A list of strings, replacing whatever the key held.
    List(Vec<String>),
}

/// Sets `value` at `path` (object keys, or for TOML, table names then the
/// key) in `file`, creating what is missing and keeping everything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEdit {
    pub file: ConfigFile,
    pub path: Vec<String>,
    pub value: ConfigValue,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_s_files_are_where_the_cli_keeps_them() {
        const H: CliHome = CliHome {
            env: "X_DIR",
            dir: ".x",
            files: &[],
        };
        let inside = CliFile {
            name: "a",
            in_home: false,
            kind: FileKind::Credential,
        };
        let beside = CliFile {
            in_home: true,
            ..inside
        };
        let home = Path::new("/h");
        let unset = |_: &str| None;
        let set = |_: &str| Some("/c".to_owned());
        assert_eq!(H.operator_file(&inside, home, unset), Path::new("/h/.x/a"));
        assert_eq!(H.operator_file(&beside, home, unset), Path::new("/h/a"));
        assert_eq!(H.operator_file(&beside, home, set), Path::new("/c/a"));
        assert_eq!(H.operator_dir(home, set), Path::new("/c"));
    }
}
