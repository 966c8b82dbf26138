//! OpenAI Codex CLI (`codex`).

use super::config::{CliFile, CliHome, FileKind, Format};
use super::hooks;
use super::{
    Auth, CheckOutcome, CommandLine, ConfigEdit, ConfigFile, ConfigValue, OptionSpec, OptionType,
    Provider, SpawnSpec, Verdict, first_line,
};

pub struct Codex;

/// Codex keeps trust and notices in `config.toml`, in its home folder
/// (`CODEX_HOME`, which every run has its own of).
const CONFIG: ConfigFile = ConfigFile {
    name: "config.toml",
    format: Format::Toml,
};

/// Codex's folder: `CODEX_HOME`, else `~/.codex`. A run's is seeded with
/// the operator's `auth.json` (read-only) and a `config.toml` of lab's
/// (nothing of the operator's, such as `notify` or `mcp_servers`, unless
/// the operator carries those keys).
const CLI_HOME: CliHome = CliHome {
    env: "CODEX_HOME",
    dir: ".codex",
    files: &[
        CliFile {
            name: "auth.json",
            in_home: false,
            kind: FileKind::Credential,
        },
        CliFile {
            name: "config.toml",
            in_home: false,
            kind: FileKind::Config {
                format: Format::Toml,
                credential_keys: &[],
            },
        },
    ],
};

/// Models the pinned Codex offers to replace with a newer one, and the
/// replacement, as `codex debug models` lists them. Marking the notice seen
/// keeps the chosen model without a dialog.
const MIGRATIONS: &[(&str, &str)] = &[
    ("gpt-5.5", "gpt-6-sol"),
    ("gpt-5.6-sol", "gpt-6-sol"),
    ("gpt-5.6-terra", "gpt-6-sol"),
    ("gpt-5.6-luna", "gpt-6-luna"),
];

const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        key: "approval",
        label: "Approval policy",
        ty: OptionType::Enum,
        values: &["never", "on-request"],
        default: "never",
        description: "When Codex asks before running a command (-a). An AFK run has nobody to \
                      ask: on-request can leave it waiting.",
        asks: &[],
    },
    OptionSpec {
        key: "sandbox",
        label: "Sandbox",
        ty: OptionType::Enum,
        values: &["workspace-write", "read-only", "danger-full-access"],
        default: "workspace-write",
        description: "What commands Codex runs may touch (-s).",
        asks: &[],
    },
];

impl Provider for Codex {
    fn id(&self) -> &'static str {
        "codex"
    }
    fn name(&self) -> &'static str {
        "Codex"
    }
    fn binary(&self) -> &'static str {
        "codex"
    }
    fn models(&self) -> &'static [&'static str] {
        &[
            "gpt-6.2-sol",
            "gpt-6.2-astra",
            "gpt-6.1-sol",
            "gpt-6.1-terra",
            "gpt-6-sol",
            "gpt-6-astra",
            "gpt-6-luna",
            "gpt-5.6-sol",
            "gpt-5.6-terra",
            "gpt-5.6-luna",
            "gpt-5.5",
        ]
    }
    /// The efforts every listed model supports (newer ones add `max` and
    /// `ultra`, and no model supports `minimal`).
    fn efforts(&self) -> &'static [&'static str] {
        &["low", "medium", "high", "xhigh"]
    }
    fn default_model(&self) -> &'static str {
        "gpt-6.2-sol"
    }
    fn default_effort(&self) -> &'static str {
        "medium"
    }
    fn spawn_options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn command_line(&self, spec: &SpawnSpec) -> CommandLine {
        CommandLine {
            args: line(spec, Vec::new(), &[]),
            env: Vec::new(),
            env_remove: Vec::new(),
        }
    }

    /// `codex resume <options> -- <session id> [prompt]`: the subcommand
    /// takes the same options as a start (`codex resume --help`).
    fn resume_line(&self, spec: &SpawnSpec) -> CommandLine {
        let id = spec.session_id.clone().unwrap_or_default();
        CommandLine {
            args: line(spec, vec!["resume".to_owned()], &[id]),
            env: Vec::new(),
            env_remove: Vec::new(),
        }
    }

    fn prepare(&self, spec: &SpawnSpec) -> Vec<ConfigEdit> {
        let mut edits = vec![ConfigEdit {
            file: CONFIG,
            path: vec![
                "projects".into(),
                spec.working_dir.to_string_lossy().into_owned(),
                "trust_level".into(),
            ],
            value: ConfigValue::Str("trusted".into()),
        }];
        if let Some((_, to)) = MIGRATIONS.iter().find(|(from, _)| *from == spec.model) {
            edits.push(ConfigEdit {
                file: CONFIG,
                path: vec![
                    "notice".into(),
                    "model_migrations".into(),
                    spec.model.clone(),
                ],
                value: ConfigValue::Str((*to).into()),
            });
        }
        edits
    }

    /// Codex parses its arguments (exit 2 when it cannot), then loads its
    /// config with the `-c` overrides (exit 1 "Error loading config"), and
    /// only then refuses a stdin that is not a terminal: reaching that
    /// refusal means the argv was accepted.
    fn check_verdict(&self, o: &CheckOutcome) -> Verdict {
        let err: String = o
            .stderr
            .lines()
            .filter(|l| !l.starts_with("WARNING: proceeding"))
            .collect::<Vec<_>>()
            .join("\n");
        if o.code == Some(2) {
            Verdict::Rejected(first_line(&err))
        } else if err.contains("stdin is not a terminal") {
            Verdict::Accepted
        } else if o.code == Some(1) {
            Verdict::Rejected(first_line(&err))
        } else {
            Verdict::Unknown(format!(
                "exit {:?}: {}",
                o.code,
                first_line(&format!("{}{err}", o.stdout))
            ))
        }
    }

    fn cli_home(&self) -> Option<&'static CliHome> {
        Some(&CLI_HOME)
    }

    fn unattended(&self, options: &std::collections::BTreeMap<String, String>) -> bool {
        options.get("approval").is_some_and(|a| a == "never")
    }

    fn env_passthrough(&self) -> &'static [&'static str] {
        &["OPENAI_API_KEY", "OPENAI_BASE_URL"]
    }

    fn hook_signal(&self, payload: &serde_json::Value) -> Option<hooks::Signal> {
        hooks::codex(payload)
    }

    /// Codex 0.171.0's sign-in screen and failures (strings of its
    /// binary): "Sign in with ChatGPT", "Sign in with Device Code", "Your
    /// access token could not be refreshed…", "Your ChatGPT credential
    /// expired…".
    fn unusable(&self, screen: &str) -> Option<&'static str> {
        let has = |s: &str| screen.contains(s);
        if signing_in(screen).is_some() {
            Some("not logged in")
        } else if has("access token could not be refreshed") || has("credential expired") {
            Some("its sign-in was refused or has expired")
        } else {
            None
        }
    }

    fn auth_args(&self) -> Option<&'static [&'static str]> {
        Some(&["login", "status"])
    }

    /// `codex login status` prints "Logged in using …" (exit 0) or "Not
    /// logged in" (exit 1).
    fn auth_verdict(&self, o: &CheckOutcome) -> Auth {
        let text = format!("{}\n{}", o.stdout, o.stderr);
        if text.contains("Not logged in") {
            Auth::SignedOut("not logged in".into())
        } else if o.code == Some(0) && text.contains("Logged in") {
            Auth::SignedIn
        } else {
            Auth::Unknown(first_line(text.trim()))
        }
    }

    fn attention(&self, screen: &str) -> Option<&'static str> {
        let has = |s: &str| screen.contains(s);
        if let Some(why) = signing_in(screen) {
            Some(why)
        } else if self.unusable(screen).is_some() {
            Some("its sign-in was refused: sign in again with the keys below")
        } else if has("Trust this folder?") || has("Trust and continue") {
            Some("waits at the folder-trust dialog")
        } else if has("Try new model") && has("Use existing model") {
            Some("waits at a model-migration notice")
        } else if super::limits::usage_limit(screen).is_some() {
            Some(super::limits::REACHED)
        } else if has("Would you like to run the following command?") || has("Allow command?") {
            Some("waits for an approval")
        } else {
            None
        }
    }
}

/// Which of Codex's sign-in screens `screen` is, as what to do there (its
/// first menu and each step after it, as Codex 0.171.0 draws them:
/// `tests/fixtures/screens/codex-0.171.0-*.txt`).
fn signing_in(screen: &str) -> Option<&'static str> {
    let has = |s: &str| screen.contains(s);
    if has("Paste or type your API key") {
        Some("not logged in: paste an OpenAI API key into the reply box below and press Send")
    } else if has("Finish signing in via your browser") {
        Some(
            "not logged in: finish signing in with the link on the screen (it returns to this \
             machine; elsewhere press Esc and choose Device Code)",
        )
    } else if has("Sign in another way") && has("Use an OpenAI API key") {
        Some("not logged in: choose how to sign in with the keys below")
    } else if has("Sign in with ChatGPT") || has("Sign in with Device Code") {
        Some(
            "not logged in: choose a sign-in method with the keys below (Device Code works from a browser)",
        )
    } else {
        None
    }
}

/// The arguments: `args` first (a subcommand), the options, then after `--`
/// the `positional` arguments and the prompt.
fn line(spec: &SpawnSpec, mut args: Vec<String>, positional: &[String]) -> Vec<String> {
    // `-c` is always given: without one, codex starts a background daemon
    // that outlives the run's session.
    args.extend([
        "-m".to_owned(),
        spec.model.clone(),
        "-c".to_owned(),
        format!("model_reasoning_effort={}", spec.effort),
    ]);
    if let Some(command) = &spec.hook_command {
        // Codex runs its `notify` program when a turn completes, with
        // the event as JSON in its last argument.
        args.push("-c".to_owned());
        args.push(hooks::codex_notify(command));
    }
    if let Some(policy) = spec.options.get("approval") {
        args.push("-a".to_owned());
        args.push(policy.clone());
    }
    if let Some(sandbox) = spec.options.get("sandbox") {
        args.push("-s".to_owned());
        args.push(sandbox.clone());
    }
    if !positional.is_empty() || !spec.initial_prompt.is_empty() {
        args.push("--".to_owned());
        args.extend(positional.iter().cloned());
    }
    if !spec.initial_prompt.is_empty() {
        args.push(spec.initial_prompt.clone());
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every step of Codex 0.171.0's sign-in, recorded from the real CLI
    /// signed out: each one waits for a person, none is `working`.
    #[test]
    fn every_sign_in_screen_waits_for_a_person() {
        let screens = [
            (
                include_str!("../../tests/fixtures/screens/codex-0.171.0-sign-in.txt"),
                "choose a sign-in method",
            ),
            (
                include_str!("../../tests/fixtures/screens/codex-0.171.0-sign-in-another-way.txt"),
                "choose how to sign in",
            ),
            (
                include_str!("../../tests/fixtures/screens/codex-0.171.0-api-key.txt"),
                "paste an OpenAI API key",
            ),
            (
                include_str!("../../tests/fixtures/screens/codex-0.171.0-browser-sign-in.txt"),
                "finish signing in with the link",
            ),
        ];
        for (screen, said) in screens {
            let why = Codex.attention(screen).expect("a sign-in screen waits");
            assert!(
                why.starts_with("not logged in: ") && why.contains(said),
                "{why}"
            );
            assert_eq!(Codex.unusable(screen), Some("not logged in"));
        }
    }
}
