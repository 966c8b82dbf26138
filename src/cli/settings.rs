//! `labctl settings show|set`.

use clap::{Args, Subcommand};
use serde_json::{Map, Value};

use super::client::{CliError, CliResult, Client};
use super::output;
use super::repos::option_pairs;

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
    /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
    #[arg(long)]
    json: bool,
}

pub async fn run(client: &Client, cmd: SettingsCommand) -> CliResult<()> {
    match cmd {
        SettingsCommand::Notify(cmd) => super::notify::run(client, cmd).await?,
        SettingsCommand::Show { json } => {
            let s = client.get("/api/v1/settings").await?;
            output::settings(&s, json);
        }
        SettingsCommand::Set(a) => {
            let mut prov = Map::new();
            let mut put = |k: &str, v: Option<Value>| {
                if let Some(v) = v {
                    prov.insert(k.to_owned(), v);
                }
            };
            put("model_default", a.model.map(Value::from));
            put("effort_default", a.effort.map(Value::from));
            put("afk_model_default", a.afk_model.map(Value::from));
            put("afk_effort_default", a.afk_effort.map(Value::from));
            put("afk_options", option_pairs(&a.afk_options)?);
            let mut afk = Map::new();
            for (k, v) in [
                ("max_concurrent", a.max_concurrent),
                ("tick_seconds", a.tick_seconds),
                ("run_timeout_minutes", a.run_timeout_minutes),
                ("max_rounds", a.max_rounds),
                ("max_attempts", a.max_attempts),
                ("memory_per_run_mb", a.memory_per_run_mb),
            ] {
                if let Some(v) = v {
                    afk.insert(k.to_owned(), v.into());
                }
            }
            for (k, flag, v) in [
                ("max_tokens", "max-tokens", a.max_tokens),
                ("max_cost_usd", "max-cost-usd", a.max_cost_usd),
            ] {
                if let Some(v) = super::repos::number_or_null(flag, v)? {
                    afk.insert(k.to_owned(), v);
                }
            }
            let mut body = Map::new();
            if !prov.is_empty() {
                let Some(id) = a.provider else {
                    return Err(CliError::invalid(
                        "--provider is required with --model, --effort, --afk-model, --afk-effort and --afk-option \
                         (global defaults are kept per provider)",
                    ));
                };
                let mut providers = Map::new();
                providers.insert(id, Value::Object(prov));
                body.insert("providers".into(), Value::Object(providers));
            }
            if !afk.is_empty() {
                body.insert("afk".into(), Value::Object(afk));
            }
            let mut runs = Map::new();
            if let Some(allow) = a.allow_unsandboxed {
                runs.insert("allow_unsandboxed".into(), allow.into());
            }
            for (k, flag, v) in [
                ("memory_max_mb", "memory-max-mb", a.memory_max_mb),
                ("pids_max", "pids-max", a.pids_max),
            ] {
                if let Some(v) = super::repos::number_or_null(flag, v)? {
                    runs.insert(k.to_owned(), v);
                }
            }
            if let Some(v) = a.log_max_mb {
                runs.insert("log_max_mb".into(), v.into());
            }
            if !a.carry_cli_keys.is_empty() || a.carry_no_cli_keys {
                runs.insert("carry_cli_keys".into(), a.carry_cli_keys.clone().into());
            }
            if !runs.is_empty() {
                body.insert("runs".into(), Value::Object(runs));
            }
            if body.is_empty() {
                return Err(CliError::invalid(
                    "nothing to change: give at least one setting (see --help)",
                ));
            }
            let s = client
                .patch("/api/v1/settings", &Value::Object(body))
                .await?;
            output::settings(&s, a.json);
        }
    }
    Ok(())
}
