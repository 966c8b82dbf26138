//! OpenAI Codex CLI (`codex`).

use super::{CommandLine, OptionSpec, OptionType, Provider, SpawnSpec};

pub struct Codex;

const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        key: "approval",
        label: "Approval policy",
        ty: OptionType::Enum,
        values: &["never", "on-request"],
        default: "never",
        description: "When Codex asks before running a command (-a). An AFK run has nobody to \
                      ask: on-request can leave it waiting.",
    },
    OptionSpec {
        key: "sandbox",
        label: "Sandbox",
        ty: OptionType::Enum,
        values: &["workspace-write", "read-only", "danger-full-access"],
        default: "workspace-write",
        description: "What commands Codex runs may touch (-s).",
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
            "gpt-5.5",
            "gpt-5.6-sol",
            "gpt-5.6-terra",
            "gpt-5.6-luna",
            "gpt-6-sol",
            "gpt-6-astra",
            "gpt-6-luna",
            "gpt-6.1-sol",
            "gpt-6.1-terra",
            "gpt-6.2-sol",
            "gpt-6.2-astra",
        ]
    }
    fn efforts(&self) -> &'static [&'static str] {
        &["low", "medium", "high", "xhigh"]
    }
    fn default_model(&self) -> &'static str {
        "gpt-5.5"
    }
    fn default_effort(&self) -> &'static str {
        "medium"
    }
    fn spawn_options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn command_line(&self, spec: &SpawnSpec) -> CommandLine {
        let mut args = vec![
            "-m".to_owned(),
            spec.model.clone(),
            "-c".to_owned(),
            format!("model_reasoning_effort={}", spec.effort),
        ];
        if let Some(policy) = spec.options.get("approval") {
            args.push("-a".to_owned());
            args.push(policy.clone());
        }
        if let Some(sandbox) = spec.options.get("sandbox") {
            args.push("-s".to_owned());
            args.push(sandbox.clone());
        }
        if !spec.initial_prompt.is_empty() {
            args.push("--".to_owned());
            args.push(spec.initial_prompt.clone());
        }
        CommandLine {
            args,
            env: Vec::new(),
            env_remove: Vec::new(),
        }
    }
}
