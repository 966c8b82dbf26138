//! The provider seam: what an agent CLI accepts and how a [`SpawnSpec`]
//! becomes its command line.
//!
//! A provider is pure data plus one pure function. It declares its model and
//! effort catalogs, its defaults and its spawn options, and turns a spawn spec
//! into a [`CommandLine`]. It never starts a process and does no IO: the run
//! module does that with what the provider returns.

mod claude_code;
mod codex;

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use claude_code::ClaudeCode;
pub use codex::Codex;

/// The type of a spawn option's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionType {
    /// `true` or `false`, stored canonically in lower case.
    Bool,
    /// One of [`OptionSpec::values`], stored with the catalog's casing.
    Enum,
}

impl OptionType {
    pub fn as_str(self) -> &'static str {
        match self {
            OptionType::Bool => "bool",
            OptionType::Enum => "enum",
        }
    }
}

/// One entry of a provider's spawn-options schema.
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    pub key: &'static str,
    pub label: &'static str,
    pub ty: OptionType,
    /// Allowed values: `["true", "false"]` for a bool, the catalog for an enum.
    pub values: &'static [&'static str],
    pub default: &'static str,
    pub description: &'static str,
}

pub const BOOL_VALUES: &[&str] = &["true", "false"];

/// Everything a provider needs to build one command line. Adding an option
/// never changes this struct: options travel in [`SpawnSpec::options`].
#[derive(Debug, Clone, Default)]
pub struct SpawnSpec {
    /// The tmux session name lab made for the run.
    pub session_name: String,
    pub model: String,
    pub effort: String,
    /// Resolved spawn options, already validated and canonical. Keys the
    /// provider does not declare are never present.
    pub options: BTreeMap<String, String>,
    /// The first message to the agent; empty for a manual instance started
    /// without one.
    pub initial_prompt: String,
    /// The run's workspace.
    pub working_dir: PathBuf,
}

impl SpawnSpec {
    /// The option's value, or its declared default.
    pub fn option<'a>(&'a self, spec: &'a OptionSpec) -> &'a str {
        self.options
            .get(spec.key)
            .map(String::as_str)
            .unwrap_or(spec.default)
    }

    /// Whether an option was passed at all (manual starts pass none).
    pub fn has_option(&self, key: &str) -> bool {
        self.options.contains_key(key)
    }
}

/// What a provider hands to the run module: arguments after the program, and
/// the environment changes the CLI needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandLine {
    pub args: Vec<String>,
    /// Variables to set in the agent's environment.
    pub env: Vec<(String, String)>,
    /// Variables that must not reach the agent (they override lab's flags).
    pub env_remove: Vec<String>,
}

/// An agent CLI integration.
pub trait Provider: Send + Sync + 'static {
    /// Stable id, used in URLs, settings and the database (`claude-code`).
    fn id(&self) -> &'static str;
    /// Human name (`Claude Code`).
    fn name(&self) -> &'static str;
    /// The CLI's own name, looked up on `PATH` unless `LAB_<ID>_BIN` is set.
    fn binary(&self) -> &'static str;
    fn models(&self) -> &'static [&'static str];
    fn efforts(&self) -> &'static [&'static str];
    fn default_model(&self) -> &'static str;
    fn default_effort(&self) -> &'static str;
    fn spawn_options(&self) -> &'static [OptionSpec];
    /// Turns a spawn spec into a command line. Pure: no IO, no process.
    fn command_line(&self, spec: &SpawnSpec) -> CommandLine;

    fn option_spec(&self, key: &str) -> Option<&'static OptionSpec> {
        self.spawn_options().iter().find(|o| o.key == key)
    }

    /// The environment variable that overrides the binary, e.g.
    /// `LAB_CLAUDE_CODE_BIN`.
    fn binary_env_var(&self) -> String {
        format!("LAB_{}_BIN", self.id().to_uppercase().replace('-', "_"))
    }
}

static CLAUDE_CODE: ClaudeCode = ClaudeCode;
static CODEX: Codex = Codex;
static ALL: [&dyn Provider; 2] = [&CLAUDE_CODE, &CODEX];

/// Every provider lab knows, in display order.
pub fn all() -> &'static [&'static dyn Provider] {
    &ALL
}

/// The provider with this id.
pub fn get(id: &str) -> Option<&'static dyn Provider> {
    ALL.iter().copied().find(|p| p.id() == id)
}

/// Provider ids, for error messages.
pub fn ids() -> Vec<&'static str> {
    ALL.iter().map(|p| p.id()).collect()
}

/// The default provider for a new repo.
pub const DEFAULT_PROVIDER: &str = "claude-code";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_declared_default_is_in_its_catalog() {
        for p in all() {
            assert!(p.models().contains(&p.default_model()), "{}", p.id());
            assert!(p.efforts().contains(&p.default_effort()), "{}", p.id());
            for o in p.spawn_options() {
                assert!(o.values.contains(&o.default), "{}.{}", p.id(), o.key);
                if o.ty == OptionType::Bool {
                    assert_eq!(o.values, BOOL_VALUES, "{}.{}", p.id(), o.key);
                }
            }
        }
    }

    #[test]
    fn binary_env_var_names() {
        assert_eq!(
            get("claude-code").unwrap().binary_env_var(),
            "LAB_CLAUDE_CODE_BIN"
        );
        assert_eq!(get("codex").unwrap().binary_env_var(), "LAB_CODEX_BIN");
    }
}

#[cfg(test)]
mod snapshots;
