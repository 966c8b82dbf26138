//! Claude Code (`claude`).

use super::{BOOL_VALUES, CommandLine, OptionSpec, OptionType, Provider, SpawnSpec};

pub struct ClaudeCode;

/// The line the `ultracode` option puts before a non-empty initial prompt.
/// `ultracode` is a keyword Claude Code reacts to in a prompt, not a flag.
pub const ULTRACODE_DIRECTIVE: &str =
    "ultracode: plan this task, then fan substantial parts out to parallel sub-agents.";

const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        key: "ultracode",
        label: "Ultracode",
        ty: OptionType::Bool,
        values: BOOL_VALUES,
        default: "false",
        description: "Put an ultracode directive before the initial prompt, so Claude Code \
                      splits substantial work across sub-agents. Does nothing without a prompt.",
    },
    OptionSpec {
        key: "permission_mode",
        label: "Permission mode",
        ty: OptionType::Enum,
        values: &[
            "bypassPermissions",
            "acceptEdits",
            "auto",
            "dontAsk",
            "plan",
            "manual",
        ],
        default: "bypassPermissions",
        description: "What Claude Code may do without asking (--permission-mode). An AFK run \
                      has nobody to ask: any mode but bypassPermissions can leave it waiting.",
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
            "best",
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
        let mut args = vec![
            "--model".to_owned(),
            spec.model.clone(),
            "--effort".to_owned(),
            spec.effort.clone(),
        ];
        if let Some(mode) = spec.options.get("permission_mode") {
            args.push("--permission-mode".to_owned());
            args.push(mode.clone());
        }
        let prompt = initial_prompt(spec);
        if !prompt.is_empty() {
            // `--` keeps a prompt that starts with `-` from being read as a flag.
            args.push("--".to_owned());
            args.push(prompt);
        }
        CommandLine {
            args,
            env: Vec::new(),
            env_remove: vec!["CLAUDE_CODE_EFFORT_LEVEL".to_owned()],
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
