//! `labctl repo …` and `labctl resolve`.

use std::collections::BTreeMap;

use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::Number;

use super::client::{CliError, CliResult, Client, seg};
use super::output;
use crate::http::repos::{RepoBody, ResolvedBody};

#[derive(Subcommand)]
pub enum RepoCommand {
    /// Register a repo (a local path or a clone URL).
    Add {
        /// A name for the repo: letters, digits, '.', '_', '-'.
        name: String,
        /// Absolute path of a local git repository.
        #[arg(long, conflicts_with = "url", required_unless_present = "url")]
        path: Option<String>,
        /// Clone URL; lab keeps a mirror of it.
        #[arg(long)]
        url: Option<String>,
        #[command(flatten)]
        fields: RepoFields,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// List repos.
    List {
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Show one repo.
    Show {
        /// Repo name or id.
        repo: String,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Change a repo. An empty value ("") clears a field (inherit).
    Set {
        /// Repo name or id.
        repo: String,
        /// New name.
        #[arg(long)]
        name: Option<String>,
        /// Absolute path of a local git repository (replaces the URL).
        #[arg(long, conflicts_with = "url")]
        path: Option<String>,
        /// Clone URL (replaces the path).
        #[arg(long)]
        url: Option<String>,
        #[command(flatten)]
        fields: RepoFields,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Remove a repo from lab (its files stay where they are).
    Rm {
        /// Repo name or id.
        repo: String,
    },
}

/// Settings a repo add or set can carry.
#[derive(Args, Default)]
pub struct RepoFields {
    /// Branch runs start from.
    #[arg(long)]
    branch: Option<String>,
    /// Provider id (claude-code, codex).
    #[arg(long)]
    provider: Option<String>,
    /// Base model (manual starts, and AFK runs without an AFK model).
    #[arg(long)]
    model: Option<String>,
    /// Base effort.
    #[arg(long)]
    effort: Option<String>,
    /// AFK model ("" inherits).
    #[arg(long)]
    afk_model: Option<String>,
    /// AFK effort ("" inherits).
    #[arg(long)]
    afk_effort: Option<String>,
    /// An AFK spawn option, KEY=VALUE; KEY= inherits again. Repeatable.
    #[arg(long = "afk-option", value_name = "KEY=VALUE")]
    afk_options: Vec<String>,
    /// Its plan and review runs' providers, models, efforts and options.
    #[command(flatten)]
    kinds: super::kind_args::KindFlags,
    /// Let the AFK scheduler take this repo's issues.
    #[arg(long)]
    afk_enabled: Option<bool>,
    /// The label that marks an issue ready for an agent.
    #[arg(long)]
    afk_label: Option<String>,
    /// Most AFK runs of this repo at once.
    #[arg(long)]
    afk_max_concurrent: Option<i64>,
    /// Where lab cannot sandbox runs, start this repo's runs that ask nobody
    /// anyway: true, false, or "" to follow the global setting.
    #[arg(long, value_parser = ["true", "false", ""])]
    allow_unsandboxed: Option<String>,
    /// Where the repo's issues live.
    #[arg(long, value_parser = ["builtin", "gitea", "github"])]
    issue_source: Option<String>,
    /// The forge's address (Gitea/Forgejo: its web address; GitHub:
    /// https://api.github.com, the default).
    #[arg(long)]
    forge_url: Option<String>,
    /// The repo on the forge, OWNER/NAME.
    #[arg(long, value_name = "OWNER/NAME")]
    forge_repo: Option<String>,
    /// A forge token for this repo; "-" reads it from standard input (keeps
    /// it out of your shell history); "" goes back to LAB_GITEA_TOKEN /
    /// LAB_GITHUB_TOKEN of lab's environment.
    #[arg(long)]
    forge_token: Option<String>,
    /// A shell command lab runs in an AFK run's workspace (sandboxed) after
    /// each round of its agent on its pull request; exit 0 is green; ""
    /// removes it.
    #[arg(long)]
    check_command: Option<String>,
    /// Tokens an AFK run of this repo may use; "" inherits the global budget.
    #[arg(long, value_name = "TOKENS")]
    afk_max_tokens: Option<String>,
    /// US dollars an AFK run of this repo may cost; "" inherits.
    #[arg(long, value_name = "USD")]
    afk_max_cost_usd: Option<String>,
    /// Minutes an AFK run of this repo may take; "" inherits.
    #[arg(long, value_name = "MINUTES")]
    afk_run_timeout_minutes: Option<String>,
    /// MiB of memory each run of this repo may use; "" inherits
    /// runs.memory_max_mb.
    #[arg(long, value_name = "MIB")]
    memory_max_mb: Option<String>,
    /// Processes and threads each run of this repo may have; "" inherits
    /// runs.pids_max.
    #[arg(long, value_name = "N")]
    pids_max: Option<String>,
    /// A knob of the repo (`labctl knobs`), KEY=VALUE; KEY= clears it (it
    /// inherits the global one). VALUE is read as JSON when it is JSON
    /// (`["src/**"]`), else as text. Repeatable; the repo's other knobs stay.
    #[arg(long = "knob", value_name = "KEY=VALUE", value_parser = super::knob_args::knob_arg)]
    knobs: Vec<(String, serde_json::Value)>,
    /// A model the repo's issues may ask for (repeatable; the list replaces
    /// the stored one).
    #[arg(long = "allowed-model", value_name = "MODEL")]
    allowed_models: Vec<String>,
    /// Let the repo's issues ask for any model of its provider's catalog
    /// (the default).
    #[arg(long, conflicts_with = "allowed_models")]
    all_models: bool,
}

/// A number flag where "" means `null` (inherit); anything else must parse.
/// lab checks the number (a whole one where it needs one): labctl sends it
/// as typed.
pub fn number_or_null(flag: &str, v: Option<String>) -> CliResult<Option<Option<Number>>> {
    match v.as_deref() {
        None => Ok(None),
        Some("") => Ok(Some(None)),
        Some(s) => s
            .parse::<i64>()
            .map(|n| Some(Number::from(n)))
            // A number JSON cannot hold (inf, NaN) goes as `null`, as
            // labctl always sent it.
            .or_else(|_| s.parse::<f64>().map(Number::from_f64))
            .map(Some)
            .map_err(|_| {
                CliError::invalid(format!(
                    "--{flag} '{s}': expected a number, or \"\" to inherit"
                ))
            }),
    }
}

/// AFK spawn options as a change sends them: a value, or `null` to inherit.
pub type OptionChange = BTreeMap<String, Option<String>>;

/// Splits `KEY=VALUE` options into a change; `KEY=` clears.
pub fn option_pairs(pairs: &[String]) -> CliResult<Option<OptionChange>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut m = OptionChange::new();
    for p in pairs {
        let (k, v) = p.split_once('=').ok_or_else(|| {
            CliError::invalid(format!(
                "--afk-option '{p}': expected KEY=VALUE (KEY= to inherit)"
            ))
        })?;
        m.insert(k.to_owned(), Some(v.to_owned()).filter(|v| !v.is_empty()));
    }
    Ok(Some(m))
}

/// The body of `POST /repos` and `PATCH /repos/{id}` as labctl sends it
/// (lab's `RepoPatchBody`): only the fields given; an inner `None` is
/// `null` (inherit).
#[derive(Serialize, Default, PartialEq)]
struct RepoChange {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    default_branch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    provider: Option<String>,
    #[serde(flatten)]
    kind_providers: super::kind_args::KindProvidersChange,
    /// The repo's base and AFK defaults, as a provider's global ones change.
    #[serde(flatten)]
    defaults: super::settings::DefaultsChange,
    #[serde(skip_serializing_if = "Option::is_none")]
    afk_enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    afk_label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    afk_max_concurrent: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    allow_unsandboxed: Option<Option<bool>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    check_command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    afk_max_tokens: Option<Option<Number>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    afk_max_cost_usd: Option<Option<Number>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    afk_run_timeout_minutes: Option<Option<Number>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_max_mb: Option<Option<Number>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pids_max: Option<Option<Number>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    issue_source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    forge_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    forge_repo: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    forge_token: Option<String>,
    /// The whole set of the repo's knobs (a replace-set), when any is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    knobs: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    allowed_models: Option<Vec<String>>,
}

impl RepoFields {
    /// The change these flags make, on top of `body` (its name and source).
    fn into_change(self, body: RepoChange) -> CliResult<RepoChange> {
        // Every flag is checked before a token is read from stdin.
        let afk_options = option_pairs(&self.afk_options)?;
        let (kind_providers, kinds) = self.kinds.into_change()?;
        let afk_max_tokens = number_or_null("afk-max-tokens", self.afk_max_tokens)?;
        let afk_max_cost_usd = number_or_null("afk-max-cost-usd", self.afk_max_cost_usd)?;
        let afk_run_timeout_minutes =
            number_or_null("afk-run-timeout-minutes", self.afk_run_timeout_minutes)?;
        let memory_max_mb = number_or_null("memory-max-mb", self.memory_max_mb)?;
        let pids_max = number_or_null("pids-max", self.pids_max)?;
        let forge_token = match self.forge_token.as_deref() {
            Some("-") => {
                let mut line = String::new();
                std::io::stdin()
                    .read_line(&mut line)
                    .map_err(|e| CliError::invalid(format!("--forge-token -: {e}")))?;
                Some(line.trim().to_owned())
            }
            other => other.map(str::to_owned),
        };
        Ok(RepoChange {
            default_branch: self.branch,
            provider: self.provider,
            kind_providers,
            defaults: super::settings::DefaultsChange {
                model_default: self.model,
                effort_default: self.effort,
                afk_model_default: self.afk_model,
                afk_effort_default: self.afk_effort,
                afk_options,
                kinds,
            },
            afk_enabled: self.afk_enabled,
            afk_label: self.afk_label,
            afk_max_concurrent: self.afk_max_concurrent,
            // "" follows the global setting.
            allow_unsandboxed: self
                .allow_unsandboxed
                .map(|v| Some(v == "true").filter(|_| !v.is_empty())),
            check_command: self.check_command,
            afk_max_tokens,
            afk_max_cost_usd,
            afk_run_timeout_minutes,
            memory_max_mb,
            pids_max,
            issue_source: self.issue_source,
            forge_url: self.forge_url,
            forge_repo: self.forge_repo,
            forge_token,
            // Knobs are merged into the repo's by the caller, which knows
            // them.
            allowed_models: (!self.allowed_models.is_empty() || self.all_models)
                .then_some(self.allowed_models),
            ..body
        })
    }
}

pub async fn run(client: &Client, cmd: RepoCommand) -> CliResult<()> {
    match cmd {
        RepoCommand::Add {
            name,
            path,
            url,
            fields,
            json,
        } => {
            let knobs = fields.knobs.clone();
            let mut body = fields.into_change(RepoChange {
                name: Some(name),
                path: path.as_deref().map(absolute),
                url,
                ..RepoChange::default()
            })?;
            if !knobs.is_empty() {
                body.knobs = Some(super::knob_args::merged(&Default::default(), &knobs));
            }
            let repo: RepoBody = client.post("/api/v1/repos", &body).await?;
            output::repo(&repo, json);
        }
        RepoCommand::List { json } => {
            let repos: Vec<RepoBody> = client.get("/api/v1/repos").await?;
            output::repos(&repos, json);
        }
        RepoCommand::Show { repo, json } => {
            let repo: RepoBody = client.get(&format!("/api/v1/repos/{}", seg(&repo))).await?;
            output::repo(&repo, json);
        }
        RepoCommand::Set {
            repo,
            name,
            path,
            url,
            fields,
            json,
        } => {
            let knobs = fields.knobs.clone();
            let mut body = fields.into_change(RepoChange {
                name,
                path: path.as_deref().map(absolute),
                url,
                ..RepoChange::default()
            })?;
            if !knobs.is_empty() {
                // The API replaces the set: send the repo's with these.
                let current: RepoBody =
                    client.get(&format!("/api/v1/repos/{}", seg(&repo))).await?;
                body.knobs = Some(super::knob_args::merged(&current.knobs, &knobs));
            }
            if body == RepoChange::default() {
                return Err(CliError::invalid(
                    "nothing to change: give at least one --field (see --help)",
                ));
            }
            let repo: RepoBody = client
                .patch(&format!("/api/v1/repos/{}", seg(&repo)), &body)
                .await?;
            output::repo(&repo, json);
        }
        RepoCommand::Rm { repo } => {
            client
                .delete(&format!("/api/v1/repos/{}", seg(&repo)))
                .await?;
            println!("removed repo {repo}");
        }
    }
    Ok(())
}

/// A path as the server needs it: absolute (relative to where labctl runs).
fn absolute(p: &str) -> String {
    let path = std::path::Path::new(p);
    if path.is_absolute() {
        return p.to_owned();
    }
    std::env::current_dir()
        .map(|d| d.join(path).to_string_lossy().into_owned())
        .unwrap_or_else(|_| p.to_owned())
}

#[derive(Args)]
pub struct ResolveArgs {
    /// Repo name or id.
    repo: String,
    /// Which kind of run.
    #[arg(long, value_parser = ["manual", "afk", "plan", "review"], default_value = "manual")]
    kind: String,
    /// Manual only: the model you would ask for.
    #[arg(long)]
    model: Option<String>,
    /// Manual only: the effort you would ask for.
    #[arg(long)]
    effort: Option<String>,
    /// AFK only: what a run of this issue would get (its knobs on top).
    #[arg(long, value_name = "N")]
    issue: Option<i64>,
    /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
    #[arg(long)]
    json: bool,
}

pub async fn resolve(client: &Client, a: ResolveArgs) -> CliResult<()> {
    let mut q = vec![("kind", a.kind.clone())];
    if let Some(m) = a.model {
        q.push(("model", m));
    }
    if let Some(e) = a.effort {
        q.push(("effort", e));
    }
    if let Some(n) = a.issue {
        q.push(("issue", n.to_string()));
    }
    let query: Vec<String> = q.iter().map(|(k, v)| format!("{k}={}", seg(v))).collect();
    let v: ResolvedBody = client
        .get(&format!(
            "/api/v1/repos/{}/resolve?{}",
            seg(&a.repo),
            query.join("&")
        ))
        .await?;
    output::resolved(&a.repo, &v, a.json);
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use serde_json::json;

    use super::*;
    use crate::cli::{Cli, Command};

    fn change(args: &[&str]) -> RepoChange {
        let line = [&["labctl", "repo", "set", "web"][..], args].concat();
        let Ok(Command::Repo(cmd)) = Cli::try_parse_from(line).map(|c| c.command) else {
            panic!("not a repo change: {args:?}");
        };
        let RepoCommand::Set {
            name,
            path,
            url,
            fields,
            ..
        } = *cmd
        else {
            panic!("not a repo change: {args:?}");
        };
        fields
            .into_change(RepoChange {
                name,
                path,
                url,
                ..RepoChange::default()
            })
            .unwrap()
    }

    /// Only what was given goes, `""` as itself or as `null` as lab wants
    /// it; and lab reads it.
    #[test]
    fn a_repo_change_sends_what_was_given_and_lab_reads_it() {
        let body = change(&[
            "--name",
            "site",
            "--model",
            "",
            "--afk-option",
            "ultracode=true",
            "--afk-option",
            "x=",
            "--allow-unsandboxed",
            "",
            "--afk-max-tokens",
            "1000",
            "--afk-max-cost-usd",
            "2.5",
            "--pids-max",
            "",
        ]);
        let sent = serde_json::to_value(&body).unwrap();
        assert_eq!(
            sent,
            json!({
                "name": "site",
                "model_default": "",
                "afk_options": {"ultracode": "true", "x": null},
                "allow_unsandboxed": null,
                "afk_max_tokens": 1000,
                "afk_max_cost_usd": 2.5,
                "pids_max": null
            })
        );
        let read: crate::http::repos::RepoPatchBody =
            serde_json::from_value(sent).expect("lab reads it");
        read.into_patch().expect("a valid change");
        assert!(change(&[]) == RepoChange::default(), "nothing given");
        assert_eq!(
            serde_json::to_value(change(&["--allow-unsandboxed", "false"])).unwrap(),
            json!({"allow_unsandboxed": false})
        );
    }
}
