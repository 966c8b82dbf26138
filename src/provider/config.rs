//! What a provider needs written into its CLI's own config before an
//! unattended start: pure data. The run module applies it (merging into the
//! operator's files, never replacing them, never touching a credential).

use std::path::PathBuf;

/// One of the CLI's config files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigFile {
    /// The variable that moves the CLI's config folder (`CLAUDE_CONFIG_DIR`,
    /// `CODEX_HOME`).
    pub dir_env: &'static str,
    /// The folder under the home when the variable is unset ("" for the home).
    pub default_dir: &'static str,
    pub name: &'static str,
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Toml,
}

impl ConfigFile {
    /// The file's path for an agent with this home and environment lookup.
    pub fn path(&self, home: &std::path::Path, env: impl Fn(&str) -> Option<String>) -> PathBuf {
        match env(self.dir_env).filter(|d| !d.is_empty()) {
            Some(dir) => PathBuf::from(dir).join(self.name),
            None => home.join(self.default_dir).join(self.name),
        }
    }
}

/// A value to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigValue {
    Bool(bool),
    Str(String),
}

/// Sets `value` at `path` (object keys, or for TOML, table names then the
/// key) in `file`, creating what is missing and keeping everything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEdit {
    pub file: ConfigFile,
    pub path: Vec<String>,
    pub value: ConfigValue,
}

/// An entry that belongs to one workspace, removed with it: `path` names the
/// object or table to remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub file: ConfigFile,
    pub path: Vec<String>,
}

/// A file or folder a CLI keeps its state in: `name` under the folder that
/// `dir_env` names, else under `default_dir` in the home ("" for the folder
/// itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatePath {
    pub dir_env: &'static str,
    pub default_dir: &'static str,
    pub name: &'static str,
    pub is_dir: bool,
}

impl StatePath {
    /// Its path for an agent with this home and environment lookup.
    pub fn path(&self, home: &std::path::Path, env: impl Fn(&str) -> Option<String>) -> PathBuf {
        let base = match env(self.dir_env).filter(|d| !d.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => home.join(self.default_dir),
        };
        if self.name.is_empty() {
            base
        } else {
            base.join(self.name)
        }
    }
}
