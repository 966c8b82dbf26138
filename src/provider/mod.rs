//! The provider seam: what an agent CLI accepts and how a [`SpawnSpec`]
//! becomes its command line.
//!
//! A provider is pure data plus one pure function. It declares its model and
//! effort catalogs, its defaults and its spawn options, and turns a spawn spec
//! into a [`CommandLine`]. It never starts a process and does no IO: the run
//! module does that with what the provider returns.

mod claude_code;
mod codex;
pub mod config;
pub mod hooks;
mod id;
pub mod limits;
pub mod retries;

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use claude_code::ClaudeCode;
pub use codex::Codex;
pub use config::{CliFile, CliHome, ConfigEdit, ConfigFile, ConfigValue, FileKind};
pub use id::{ProviderId, UnknownProvider};

/// The CLI versions lab's catalogs, flags and config edits were checked
/// against, by provider id. The contract tests run these versions; `lab
/// doctor` says when an installed CLI is another one. (`.ci/run` reads this
/// list to install them.)
pub const CHECKED_VERSIONS: &[(&str, &str)] = &[("claude-code", "2.1.332"), ("codex", "0.171.0")];

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
    /// Values that have the CLI ask a person at times: offered to manual
    /// runs only, where one is there to answer (a manual run takes every
    /// value of [`OptionSpec::values`] too).
    pub asks: &'static [&'static str],
}

impl OptionSpec {
    /// Every value a manual run may take.
    pub fn manual_values(&self) -> Vec<&'static str> {
        self.values.iter().chain(self.asks).copied().collect()
    }
}

pub const BOOL_VALUES: &[&str] = &["true", "false"];

/// An approval lab writes into a run's own CLI config
/// ([`Provider::approvals`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub edits: Vec<ConfigEdit>,
    /// What was approved, for the run's page (never the secret itself).
    pub what: &'static str,
}

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
    /// Whether lab's sandbox is in force for this run (a CLI may be told so:
    /// Claude Code refuses its unattended mode as root unless it is).
    pub sandboxed: bool,
    /// The program (and its first arguments) the CLI's hooks run to report
    /// the agent's state to lab (`labctl hook <provider>`, ADR 13); `None`:
    /// no hooks.
    pub hook_command: Option<Vec<String>>,
    /// The session id lab chose for the run (a v4 UUID), for a CLI that
    /// takes one ([`Provider::takes_session_id`]).
    pub session_id: Option<String>,
    /// The run's `writes` globs (issue 28 §4; empty: unrestricted). A CLI
    /// with a hook before its file-writing tools refuses a write outside
    /// them as it is tried (Claude Code's `PreToolUse`); lab's check of the
    /// branch holds for every CLI either way.
    pub writes: Vec<String>,
    /// The run may not change its workspace (a planning or review run,
    /// issue 28): lab's sandbox shows it read-only, and a CLI with its own
    /// way to refuse file-writing tools is told to use it.
    pub read_only: bool,
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

    /// The command line that resumes the CLI session `spec.session_id` in
    /// the same workspace (a lost run, ADR 18): the same model, effort,
    /// options and hooks as [`Provider::command_line`];
    /// `spec.initial_prompt` is the message sent on resuming (may be empty).
    /// Pure: no IO, no process.
    fn resume_line(&self, spec: &SpawnSpec) -> CommandLine;

    /// Whether the CLI takes the session id lab chooses
    /// ([`SpawnSpec::session_id`]); otherwise lab reads the CLI's own from its
    /// transcript.
    fn takes_session_id(&self) -> bool {
        false
    }

    /// What must be in the run's own CLI config so that this start meets no
    /// first-run dialog (folder trust, onboarding, model notices).
    fn prepare(&self, _spec: &SpawnSpec) -> Vec<ConfigEdit> {
        Vec::new()
    }

    /// What the operator gave lab for this CLI in lab's environment that
    /// the CLI would otherwise ask a person to approve (Claude Code's
    /// "Detected a custom API key" dialog), approved in the run's own
    /// config the way the CLI records an approval. `env` is the run's
    /// environment as lab passes it on. Pure: no IO.
    fn approvals(&self, _env: &BTreeMap<String, String>) -> Option<Approval> {
        None
    }

    /// Variables of lab's environment the CLI needs in a run's (an API key,
    /// its config folder). Everything else of lab's stays out (`run::env`).
    fn env_passthrough(&self) -> &'static [&'static str] {
        &[]
    }

    /// The CLI's own folder, which each run gets one of (its config, the
    /// operator's credentials read-only, its transcripts; ADR 24).
    fn cli_home(&self) -> Option<&'static CliHome> {
        None
    }

    /// Whether a run with these spawn options goes on without ever asking a
    /// person (an unattended permission or approval mode). Such a run is
    /// refused where lab cannot sandbox it, unless the operator allows it.
    fn unattended(&self, _options: &BTreeMap<String, String>) -> bool {
        false
    }

    /// Whether a screen of the CLI shows it waiting for a person, and why
    /// ("login required"). Pure: matched against text.
    fn attention(&self, _screen: &str) -> Option<&'static str> {
        None
    }

    /// Whether a screen of the CLI says it cannot work at all (not signed
    /// in, its credentials refused): why, in lab's words. Pure. An AFK run
    /// showing it ends at once; only the CLI's own sign-in check
    /// ([`Provider::auth_args`]) holds the provider's other runs back.
    fn unusable(&self, _screen: &str) -> Option<&'static str> {
        None
    }

    /// The arguments of the CLI's own sign-in check (`claude auth status`),
    /// which lab runs outside any run, in a run's conditions.
    fn auth_args(&self) -> Option<&'static [&'static str]> {
        None
    }

    /// What the sign-in check's outcome says.
    fn auth_verdict(&self, _outcome: &CheckOutcome) -> Auth {
        Auth::Unknown("lab has no sign-in check for this CLI".into())
    }

    /// What one of the CLI's hook payloads says about its agent (ADR 13);
    /// `None` for an event that says nothing lab uses. Pure.
    fn hook_signal(&self, _payload: &serde_json::Value) -> Option<hooks::Signal> {
        None
    }

    /// The [`Provider::attention`] reasons its hooks report themselves (with
    /// the exact question): the screen check leaves those to the hooks.
    fn hooked_attention(&self) -> &'static [&'static str] {
        &[]
    }

    /// Reads the outcome of an offline argv check (see `run::cli_check`): the
    /// CLI ran with this argv, no terminal, no account.
    fn check_verdict(&self, outcome: &CheckOutcome) -> Verdict;

    /// Arguments that make the CLI print its version.
    fn version_args(&self) -> &'static [&'static str] {
        &["--version"]
    }

    /// The CLI version lab was checked against.
    fn checked_version(&self) -> &'static str {
        CHECKED_VERSIONS
            .iter()
            .find(|(id, _)| *id == self.id())
            .map(|(_, v)| *v)
            .unwrap_or("unknown")
    }

    fn option_spec(&self, key: &str) -> Option<&'static OptionSpec> {
        self.spawn_options().iter().find(|o| o.key == key)
    }

    /// The environment variable that overrides the binary, e.g.
    /// `LAB_CLAUDE_CODE_BIN`.
    fn binary_env_var(&self) -> String {
        format!("LAB_{}_BIN", self.id().to_uppercase().replace('-', "_"))
    }
}

/// What a CLI did when lab ran it with an argv to check, offline.
#[derive(Debug, Clone, Default)]
pub struct CheckOutcome {
    /// Exit code; `None` when it was killed (timeout).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Whether a CLI can sign in to its provider, as its own check says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    SignedIn,
    /// It cannot: why, in lab's words ("not logged in").
    SignedOut(String),
    /// The check said nothing lab can read: what it printed.
    Unknown(String),
}

/// Whether a CLI accepts an argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    /// Accepted, but the CLI warned (an unknown model or effort is only a
    /// warning to Claude Code: a stale catalog would go unnoticed).
    Warning(String),
    Rejected(String),
    /// The outcome says neither.
    Unknown(String),
}

/// The first non-empty line of a CLI's output, for a verdict.
pub fn first_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .chars()
        .take(300)
        .collect()
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
    fn every_provider_has_a_checked_version() {
        for p in all() {
            assert_ne!(p.checked_version(), "unknown", "{}", p.id());
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
