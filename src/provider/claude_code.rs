//! Claude Code (`claude`).

use super::config::{CliFile, CliHome, FileKind, Format};
use super::hooks;
use super::{
    Approval, Auth, BOOL_VALUES, CheckOutcome, CommandLine, ConfigEdit, ConfigFile, ConfigValue,
    OptionSpec, OptionType, Provider, SpawnSpec, Verdict, first_line,
};

pub struct ClaudeCode;

/// The screen check's reason for a permission question.
const PERMISSION: &str = "waits for a permission answer";

/// What `claude --resume <id>` says when it has no such session.
const NO_CONVERSATION: &str = "No conversation found with session ID";

/// The line the `ultracode` option puts before a non-empty initial prompt.
/// `ultracode` is a keyword Claude Code reacts to in a prompt, not a flag.
pub const ULTRACODE_DIRECTIVE: &str =
    "ultracode: plan this task, then fan substantial parts out to parallel sub-agents.";

/// Claude Code keeps onboarding and folder trust in `.claude.json`, in its
/// config folder when `CLAUDE_CONFIG_DIR` names one (as for every run).
const STATE: ConfigFile = ConfigFile {
    name: ".claude.json",
    format: Format::Json,
};

/// Claude Code's folder: `CLAUDE_CONFIG_DIR`, else `~/.claude` with the
/// state file beside it in the home. A run's is seeded with the operator's
/// OAuth credentials (read-only) and the account keys of `.claude.json` (an
/// API key approved there, the account); never their `settings.json`
/// (hooks, `statusLine`, `apiKeyHelper`) or `mcpServers` unless the operator
/// carries those keys.
const CLI_HOME: CliHome = CliHome {
    env: "CLAUDE_CONFIG_DIR",
    dir: ".claude",
    files: &[
        CliFile {
            name: ".credentials.json",
            in_home: false,
            kind: FileKind::Credential,
        },
        CliFile {
            name: ".claude.json",
            in_home: true,
            kind: FileKind::Config {
                format: Format::Json,
                credential_keys: &[
                    "oauthAccount",
                    "primaryApiKey",
                    "customApiKeyResponses",
                    "userID",
                ],
            },
        },
        CliFile {
            name: "settings.json",
            in_home: false,
            kind: FileKind::Config {
                format: Format::Json,
                credential_keys: &[],
            },
        },
    ],
};

const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        key: "ultracode",
        label: "Ultracode",
        ty: OptionType::Bool,
        values: BOOL_VALUES,
        default: "false",
        description: "Put an ultracode directive before the initial prompt, so Claude Code \
                      splits substantial work across sub-agents. Does nothing without a prompt.",
        asks: &[],
    },
    OptionSpec {
        key: "permission_mode",
        label: "Permission mode",
        ty: OptionType::Enum,
        values: &["bypassPermissions", "dontAsk"],
        default: "bypassPermissions",
        description: "What Claude Code may do without asking (--permission-mode). An AFK run has \
                      nobody to ask: bypassPermissions allows every tool; dontAsk refuses what is \
                      not allowed instead of asking. A manual run may also take the modes that \
                      ask a person (manual, acceptEdits, plan, auto); without a choice it runs \
                      the CLI's own default.",
        asks: &["manual", "acceptEdits", "plan", "auto"],
    },
];

impl Provider for ClaudeCode {
    fn id(&self) -> &'static str {
        "claude-code"
    }
    fn name(&self) -> &'static str {
        "Claude Code"
    }
    fn binary(&self) -> &'static str {
        "claude"
    }
    fn models(&self) -> &'static [&'static str] {
        &[
            "sonnet",
            "opus",
            "haiku",
            "fable",
            "opusplan",
            "sonnet[1m]",
            "opus[1m]",
            "fable[1m]",
        ]
    }
    fn efforts(&self) -> &'static [&'static str] {
        &["low", "medium", "high", "xhigh", "max"]
    }
    fn default_model(&self) -> &'static str {
        "sonnet"
    }
    fn default_effort(&self) -> &'static str {
        "high"
    }
    fn spawn_options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn command_line(&self, spec: &SpawnSpec) -> CommandLine {
        line(spec, "--session-id", initial_prompt(spec))
    }

    /// `--resume <id>` in place of `--session-id <id>`, every other flag as
    /// at the start; the prompt is the resume message as given (no
    /// ultracode directive: the session already has its task).
    fn resume_line(&self, spec: &SpawnSpec) -> CommandLine {
        line(spec, "--resume", spec.initial_prompt.clone())
    }

    fn takes_session_id(&self) -> bool {
        true
    }

    fn prepare(&self, spec: &SpawnSpec) -> Vec<ConfigEdit> {
        let ws = spec.working_dir.to_string_lossy().into_owned();
        vec![
            ConfigEdit {
                file: STATE,
                path: vec!["hasCompletedOnboarding".into()],
                value: ConfigValue::Bool(true),
            },
            // The folder-trust dialog defaults to "No, exit" and is asked per
            // exact folder (trusting a parent does not cover it).
            ConfigEdit {
                file: STATE,
                path: vec![
                    "projects".into(),
                    ws.clone(),
                    "hasTrustDialogAccepted".into(),
                ],
                value: ConfigValue::Bool(true),
            },
            ConfigEdit {
                file: STATE,
                path: vec![
                    "projects".into(),
                    ws,
                    "hasCompletedProjectOnboarding".into(),
                ],
                value: ConfigValue::Bool(true),
            },
        ]
    }

    /// An `ANTHROPIC_API_KEY` lab passes on is approved the way Claude Code
    /// 2.1.332 records the answer to its "Detected a custom API key"
    /// dialog: the key's last 20 characters (after trimming) in
    /// `customApiKeyResponses.approved` of `.claude.json`, and none in
    /// `rejected` (an earlier "No" of the operator's own CLI would make it
    /// ignore the key).
    fn approvals(&self, env: &std::collections::BTreeMap<String, String>) -> Option<Approval> {
        let key = env.get("ANTHROPIC_API_KEY")?.trim();
        if key.is_empty() {
            return None;
        }
        let tail: String = {
            let chars: Vec<char> = key.chars().collect();
            chars[chars.len().saturating_sub(20)..].iter().collect()
        };
        let at = |k: &str| vec!["customApiKeyResponses".to_owned(), k.to_owned()];
        Some(Approval {
            edits: vec![
                ConfigEdit {
                    file: STATE,
                    path: at("approved"),
                    value: ConfigValue::List(vec![tail]),
                },
                ConfigEdit {
                    file: STATE,
                    path: at("rejected"),
                    value: ConfigValue::List(Vec::new()),
                },
            ],
            what: "the API key in lab's environment (ANTHROPIC_API_KEY), approved by lab in this \
                   run's own Claude Code config, so the CLI does not ask",
        })
    }

    /// Without a terminal, Claude Code prints its answer and exits; with no
    /// account, an argv it accepts ends at "Not logged in". Unknown models
    /// and efforts are only warned about, on stderr.
    fn check_verdict(&self, o: &CheckOutcome) -> Verdict {
        if o.stdout.contains("Not logged in") {
            if o.stderr.trim().is_empty() {
                Verdict::Accepted
            } else {
                Verdict::Warning(first_line(&o.stderr))
            }
        } else if o.stderr.contains(NO_CONVERSATION) {
            // A resume's argv (ADR 18): every flag parsed, then the CLI
            // looked for the session, which a check's empty home lacks.
            let other: String = o
                .stderr
                .lines()
                .filter(|l| !l.contains(NO_CONVERSATION))
                .collect::<Vec<_>>()
                .join("\n");
            if other.trim().is_empty() {
                Verdict::Accepted
            } else {
                Verdict::Warning(first_line(&other))
            }
        } else if o.code.is_some_and(|c| c != 0) && !o.stderr.trim().is_empty() {
            Verdict::Rejected(first_line(&o.stderr))
        } else {
            Verdict::Unknown(format!(
                "exit {:?}: {}",
                o.code,
                first_line(&format!("{}{}", o.stdout, o.stderr))
            ))
        }
    }

    fn cli_home(&self) -> Option<&'static CliHome> {
        Some(&CLI_HOME)
    }

    fn unattended(&self, options: &std::collections::BTreeMap<String, String>) -> bool {
        options
            .get("permission_mode")
            .is_some_and(|m| matches!(m.as_str(), "bypassPermissions" | "dontAsk" | "auto"))
    }

    fn env_passthrough(&self) -> &'static [&'static str] {
        &[
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_BASE_URL",
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_USE_VERTEX",
        ]
    }

    fn hook_signal(&self, payload: &serde_json::Value) -> Option<hooks::Signal> {
        hooks::claude(payload)
    }

    /// Its `Notification` hook reports permission prompts.
    fn hooked_attention(&self) -> &'static [&'static str] {
        &[PERMISSION]
    }

    /// Claude Code 2.1.332's sign-in failures (strings of its binary): "Not
    /// logged in · Please run /login", the login method picker, "Invalid API
    /// key · Please run /login", "OAuth token revoked", "OAuth token has
    /// expired", "Your session has expired. Please run /login", "Login
    /// reached its time limit · Please run /login".
    fn unusable(&self, screen: &str) -> Option<&'static str> {
        let has = |s: &str| screen.contains(s);
        if has("Not logged in") || has("Select login method") {
            Some("not logged in")
        } else if has("Invalid API key")
            || has("OAuth token revoked")
            || has("OAuth token has expired")
            || has("session has expired")
            || has("Please run /login")
        {
            Some("its sign-in was refused or has expired")
        } else {
            None
        }
    }

    fn auth_args(&self) -> Option<&'static [&'static str]> {
        Some(&["auth", "status"])
    }

    /// `claude auth status` prints JSON with `loggedIn` (and exits 1 when
    /// it is false).
    fn auth_verdict(&self, o: &CheckOutcome) -> Auth {
        match serde_json::from_str::<serde_json::Value>(o.stdout.trim())
            .ok()
            .and_then(|v| v["loggedIn"].as_bool())
        {
            Some(true) => Auth::SignedIn,
            Some(false) => Auth::SignedOut("not logged in".into()),
            None => Auth::Unknown(first_line(&format!("{}{}", o.stdout, o.stderr))),
        }
    }

    fn attention(&self, screen: &str) -> Option<&'static str> {
        let has = |s: &str| screen.contains(s);
        if has("Not logged in") || has("Select login method") {
            Some("not logged in: type /login in the reply box below to sign in")
        } else if self.unusable(screen).is_some() {
            Some("its sign-in was refused: type /login in the reply box below to sign in again")
        } else if has("Quick safety check") || has("Yes, I trust this folder") {
            Some("waits at the folder-trust dialog")
        } else if has("Bypass Permissions mode") && has("Yes, I accept") {
            Some("waits at the bypass-permissions confirmation")
        } else if super::limits::usage_limit(screen).is_some() {
            Some(super::limits::REACHED)
        } else if has("Do you want to proceed?")
            || has("Do you want to make this edit")
            || has("Do you want to create")
        {
            Some(PERMISSION)
        } else {
            None
        }
    }
}

fn initial_prompt(spec: &SpawnSpec) -> String {
    let ultracode = spec.options.get("ultracode").is_some_and(|v| v == "true");
    if ultracode && !spec.initial_prompt.is_empty() {
        format!("{ULTRACODE_DIRECTIVE}\n\n{}", spec.initial_prompt)
    } else {
        spec.initial_prompt.clone()
    }
}

/// The command line: the session id after `session_flag`, `prompt` as the
/// first message.
fn line(spec: &SpawnSpec, session_flag: &str, prompt: String) -> CommandLine {
    let mut args = vec![
        "--model".to_owned(),
        spec.model.clone(),
        "--effort".to_owned(),
        spec.effort.clone(),
    ];
    if let Some(id) = &spec.session_id {
        // Names the session's transcript, from which lab reads usage;
        // `--resume` takes the same id to go on with it.
        args.push(session_flag.to_owned());
        args.push(id.clone());
    }
    let mut env = vec![("DISABLE_AUTOUPDATER".to_owned(), "1".to_owned())];
    // One `--settings` layer: Claude Code merges it with the user's
    // settings files (their hooks run too), it replaces none of them.
    let mut settings = serde_json::Map::new();
    if let Some(mode) = spec.options.get("permission_mode") {
        args.push("--permission-mode".to_owned());
        args.push(mode.clone());
        if mode == "bypassPermissions" {
            // Pre-answers the "Bypass Permissions mode" confirmation,
            // which otherwise defaults to "No, exit".
            settings.insert("skipDangerousModePermissionPrompt".into(), true.into());
        }
    }
    if let Some(command) = &spec.hook_command {
        let mut all = hooks::claude_hooks(command);
        if let (Some(pre), Some(map)) = (
            hooks::claude_writes_hook(command, &spec.working_dir.to_string_lossy(), &spec.writes),
            all.as_object_mut(),
        ) {
            map.insert("PreToolUse".into(), pre);
        }
        settings.insert("hooks".into(), all);
    }
    if spec.read_only {
        // Claude Code's own refusal of its file-writing tools (its plan
        // mode would ask a person before it ends, and nobody answers):
        // deny rules hold in every permission mode. Only the tools 2.1.332
        // has: a rule for another (MultiEdit) is warned about at start.
        settings.insert(
            "permissions".into(),
            serde_json::json!({ "deny": ["Write", "Edit", "NotebookEdit"] }),
        );
    }
    if !settings.is_empty() {
        args.push("--settings".to_owned());
        args.push(serde_json::Value::Object(settings).to_string());
    }
    if spec.sandboxed {
        // True only under lab's sandbox; Claude Code refuses its bypass
        // mode as root unless told so.
        env.push(("IS_SANDBOX".to_owned(), "1".to_owned()));
    }
    if !prompt.is_empty() {
        // `--` keeps a prompt that starts with `-` from being read as a flag.
        args.push("--".to_owned());
        args.push(prompt);
    }
    CommandLine {
        args,
        env,
        // It overrides --effort.
        env_remove: vec!["CLAUDE_CODE_EFFORT_LEVEL".to_owned()],
    }
}
