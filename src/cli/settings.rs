//! `labctl settings show|set`.

use std::collections::BTreeMap;

use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::Number;

use super::client::{CliError, CliResult, Client};
use super::output;
use super::repos::{OptionChange, number_or_null, option_pairs};
use crate::http::settings::SettingsBody;

#[derive(Subcommand)]
pub enum SettingsCommand {
    /// Show the global settings.
    Show {
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Change global settings. An empty value ("") clears (inherit).
    Set(Box<SetArgs>),
    /// Where lab posts when a run waits, ends, fails or opens a pull request.
    #[command(subcommand)]
    Notify(super::notify::NotifyCommand),
}

#[derive(Args)]
pub struct SetArgs {
    /// The provider the model, effort and option flags apply to.
    #[arg(long)]
    provider: Option<String>,
    /// Base model of the provider.
    #[arg(long)]
    model: Option<String>,
    /// Base effort of the provider.
    #[arg(long)]
    effort: Option<String>,
    /// AFK model of the provider ("" inherits the base).
    #[arg(long)]
    afk_model: Option<String>,
    /// AFK effort of the provider ("" inherits the base).
    #[arg(long)]
    afk_effort: Option<String>,
    /// An AFK spawn option of the provider, KEY=VALUE; KEY= clears. Repeatable.
    #[arg(long = "afk-option", value_name = "KEY=VALUE")]
    afk_options: Vec<String>,
    /// Plan and review runs' providers (global), and their model, effort
    /// and options of `--provider`.
    #[command(flatten)]
    kinds: super::kind_args::KindFlags,
    /// Rounds of plan and plan review an issue may have, the first included.
    #[arg(long)]
    max_plan_rounds: Option<i64>,
    /// Most AFK runs at once, over all repos.
    #[arg(long)]
    max_concurrent: Option<i64>,
    /// Seconds between AFK scheduler ticks.
    #[arg(long)]
    tick_seconds: Option<i64>,
    /// Minutes an AFK run may take.
    #[arg(long)]
    run_timeout_minutes: Option<i64>,
    /// Rounds an AFK run may have on its pull request, the first included.
    #[arg(long)]
    max_rounds: Option<i64>,
    /// Attempts at one issue, the first included.
    #[arg(long)]
    max_attempts: Option<i64>,
    /// Tokens an AFK run may use; "" removes the cap.
    #[arg(long, value_name = "TOKENS")]
    max_tokens: Option<String>,
    /// US dollars an AFK run may cost; "" removes the cap.
    #[arg(long, value_name = "USD")]
    max_cost_usd: Option<String>,
    /// MiB of available memory an AFK launch needs (0: no check).
    #[arg(long, value_name = "MIB")]
    memory_per_run_mb: Option<i64>,
    /// Where lab cannot sandbox runs (`labctl doctor`), start runs that ask
    /// nobody anyway, unsandboxed.
    #[arg(long)]
    allow_unsandboxed: Option<bool>,
    /// MiB of memory each run may use (a run past it is ended, out of
    /// memory); "" removes the cap.
    #[arg(long, value_name = "MIB")]
    memory_max_mb: Option<String>,
    /// Processes and threads each run may have; "" removes the cap.
    #[arg(long, value_name = "N")]
    pids_max: Option<String>,
    /// MiB of each run's log lab keeps (the newest output).
    #[arg(long, value_name = "MIB")]
    log_max_mb: Option<i64>,
    /// A top-level key of your CLI config (Claude Code's settings.json and
    /// .claude.json, Codex's config.toml) each run's own copy gets.
    /// Repeatable; the list replaces the stored one.
    #[arg(long = "carry-cli-key", value_name = "KEY")]
    carry_cli_keys: Vec<String>,
    /// Carry no key of your CLI config into runs (the default).
    #[arg(long, conflicts_with = "carry_cli_keys")]
    carry_no_cli_keys: bool,
    /// A global knob (`labctl knobs`), KEY=VALUE; KEY= clears it (every
    /// repo and issue then inherits the knob's default). VALUE is read as
    /// JSON when it is JSON (`["src/**"]`), else as text. Repeatable; the
    /// other knobs stay as they are.
    #[arg(long = "knob", value_name = "KEY=VALUE", value_parser = super::knob_args::knob_arg)]
    knobs: Vec<(String, serde_json::Value)>,
    /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
    #[arg(long)]
    json: bool,
}

/// The body of `PATCH /settings` as `labctl settings set` sends it (lab's
/// `SettingsPatchBody`): only the parts and fields given; an inner `None`
/// is `null` (no cap).
#[derive(Serialize)]
struct SettingsChange {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    providers: BTreeMap<String, DefaultsChange>,
    #[serde(skip_serializing_if = "AfkChange::is_empty")]
    afk: AfkChange,
    #[serde(skip_serializing_if = "RunsChange::is_empty")]
    runs: RunsChange,
    /// The whole set of knobs (a replace-set), when any is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    knobs: Option<serde_json::Map<String, serde_json::Value>>,
    /// `plan_provider`, `review_provider`.
    #[serde(flatten)]
    kinds: super::kind_args::KindProvidersChange,
}

/// A change to one provider's global defaults (and, flattened, to a repo's
/// own).
#[derive(Serialize, Default, PartialEq)]
pub(super) struct DefaultsChange {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_default: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort_default: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub afk_model_default: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub afk_effort_default: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub afk_options: Option<OptionChange>,
    /// `plan_*`, `review_*`.
    #[serde(flatten)]
    pub kinds: super::kind_args::KindDefaultsChange,
}

/// A change to the AFK scheduler's limits.
#[derive(Serialize, Default, PartialEq)]
struct AfkChange {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_concurrent: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tick_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_timeout_minutes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_rounds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_plan_rounds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_attempts: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_per_run_mb: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<Option<Number>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_cost_usd: Option<Option<Number>>,
}

impl AfkChange {
    fn is_empty(&self) -> bool {
        *self == AfkChange::default()
    }
}

/// A change to what every run gets.
#[derive(Serialize, Default, PartialEq)]
struct RunsChange {
    #[serde(skip_serializing_if = "Option::is_none")]
    allow_unsandboxed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_max_mb: Option<Option<Number>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pids_max: Option<Option<Number>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_max_mb: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    carry_cli_keys: Option<Vec<String>>,
}

impl RunsChange {
    fn is_empty(&self) -> bool {
        *self == RunsChange::default()
    }
}

impl SetArgs {
    /// The settings change these flags make.
    fn into_change(self) -> CliResult<SettingsChange> {
        let (kind_providers, kinds) = self.kinds.into_change()?;
        let prov = DefaultsChange {
            model_default: self.model,
            effort_default: self.effort,
            afk_model_default: self.afk_model,
            afk_effort_default: self.afk_effort,
            afk_options: option_pairs(&self.afk_options)?,
            kinds,
        };
        let afk = AfkChange {
            max_concurrent: self.max_concurrent,
            tick_seconds: self.tick_seconds,
            run_timeout_minutes: self.run_timeout_minutes,
            max_rounds: self.max_rounds,
            max_plan_rounds: self.max_plan_rounds,
            max_attempts: self.max_attempts,
            memory_per_run_mb: self.memory_per_run_mb,
            max_tokens: number_or_null("max-tokens", self.max_tokens)?,
            max_cost_usd: number_or_null("max-cost-usd", self.max_cost_usd)?,
        };
        let mut providers = BTreeMap::new();
        if prov != DefaultsChange::default() {
            let Some(id) = self.provider else {
                return Err(CliError::invalid(
                    "--provider is required with --model, --effort, --afk-model, --afk-effort, --afk-option \
                     and the --plan-/--review- model, effort and option flags (global defaults are kept \
                     per provider)",
                ));
            };
            providers.insert(id, prov);
        }
        let runs = RunsChange {
            allow_unsandboxed: self.allow_unsandboxed,
            memory_max_mb: number_or_null("memory-max-mb", self.memory_max_mb)?,
            pids_max: number_or_null("pids-max", self.pids_max)?,
            log_max_mb: self.log_max_mb,
            carry_cli_keys: (!self.carry_cli_keys.is_empty() || self.carry_no_cli_keys)
                .then_some(self.carry_cli_keys),
        };
        Ok(SettingsChange {
            providers,
            afk,
            runs,
            knobs: None,
            kinds: kind_providers,
        })
    }
}

pub async fn run(client: &Client, cmd: SettingsCommand) -> CliResult<()> {
    match cmd {
        SettingsCommand::Notify(cmd) => super::notify::run(client, cmd).await?,
        SettingsCommand::Show { json } => {
            let s: SettingsBody = client.get("/api/v1/settings").await?;
            output::settings(&s, json);
        }
        SettingsCommand::Set(a) => {
            let json = a.json;
            let knobs = a.knobs.clone();
            let mut body = a.into_change()?;
            if !knobs.is_empty() {
                // The API replaces the set: send the current ones with these.
                let s: SettingsBody = client.get("/api/v1/settings").await?;
                body.knobs = Some(super::knob_args::merged(&s.knobs, &knobs));
            }
            if body.providers.is_empty()
                && body.afk.is_empty()
                && body.runs.is_empty()
                && body.knobs.is_none()
            {
                return Err(CliError::invalid(
                    "nothing to change: give at least one setting (see --help)",
                ));
            }
            let s: SettingsBody = client.patch("/api/v1/settings", &body).await?;
            output::settings(&s, json);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use serde_json::json;

    use super::*;
    use crate::cli::{Cli, Command};

    fn change(args: &[&str]) -> CliResult<SettingsChange> {
        let line = [&["labctl", "settings", "set"][..], args].concat();
        match Cli::try_parse_from(line).map(|c| c.command) {
            Ok(Command::Settings(SettingsCommand::Set(a))) => a.into_change(),
            _ => panic!("not a settings change: {args:?}"),
        }
    }

    /// Only what was given goes, `""` as `null`; and lab reads it.
    #[test]
    fn a_settings_change_sends_what_was_given_and_lab_reads_it() {
        let body = change(&[
            "--provider",
            "claude-code",
            "--afk-model",
            "",
            "--afk-option",
            "ultracode=",
            "--tick-seconds",
            "12",
            "--max-cost-usd",
            "2.5",
            "--max-tokens",
            "",
            "--carry-no-cli-keys",
        ])
        .unwrap();
        let sent = serde_json::to_value(&body).unwrap();
        assert_eq!(
            sent,
            json!({
                "providers": {"claude-code": {"afk_model_default": "", "afk_options": {"ultracode": null}}},
                "afk": {"tick_seconds": 12, "max_tokens": null, "max_cost_usd": 2.5},
                "runs": {"carry_cli_keys": []}
            })
        );
        let read: crate::http::settings::SettingsPatchBody =
            serde_json::from_value(sent).expect("lab reads it");
        read.into_patch().expect("a valid change");
        let e = change(&["--model", "opus"]).err().expect("no provider");
        assert_eq!(e.code, crate::cli::Exit::Invalid);
    }
}
