//! `labctl repo …` and `labctl resolve`.

use clap::{Args, Subcommand};
use serde_json::{Map, Value};

use super::client::{CliError, CliResult, Client, seg};
use super::output;

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
}

/// A number flag where "" means `null` (inherit); anything else must parse.
pub fn number_or_null(flag: &str, v: Option<String>) -> CliResult<Option<Value>> {
    match v.as_deref() {
        None => Ok(None),
        Some("") => Ok(Some(Value::Null)),
        Some(s) => s
            .parse::<i64>()
            .map(Value::from)
            .or_else(|_| s.parse::<f64>().map(Value::from))
            .map(Some)
            .map_err(|_| {
                CliError::invalid(format!(
                    "--{flag} '{s}': expected a number, or \"\" to inherit"
                ))
            }),
    }
}

/// Splits `KEY=VALUE` options into a JSON object; `KEY=` clears.
pub fn option_pairs(pairs: &[String]) -> CliResult<Option<Value>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut m = Map::new();
    for p in pairs {
        let (k, v) = p.split_once('=').ok_or_else(|| {
            CliError::invalid(format!(
                "--afk-option '{p}': expected KEY=VALUE (KEY= to inherit)"
            ))
        })?;
        m.insert(
            k.to_owned(),
            if v.is_empty() {
                Value::Null
            } else {
                Value::from(v)
            },
        );
    }
    Ok(Some(Value::Object(m)))
}

impl RepoFields {
    fn into_json(self, body: &mut Map<String, Value>) -> CliResult<()> {
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                body.insert(k.to_owned(), v);
            }
        };
        put("default_branch", self.branch.map(Value::from));
        put("provider", self.provider.map(Value::from));
        put("model_default", self.model.map(Value::from));
        put("effort_default", self.effort.map(Value::from));
        put("afk_model_default", self.afk_model.map(Value::from));
        put("afk_effort_default", self.afk_effort.map(Value::from));
        put("afk_options", option_pairs(&self.afk_options)?);
        put("afk_enabled", self.afk_enabled.map(Value::from));
        put("afk_label", self.afk_label.map(Value::from));
        put(
            "afk_max_concurrent",
            self.afk_max_concurrent.map(Value::from),
        );
        put(
            "allow_unsandboxed",
            self.allow_unsandboxed.map(|v| match v.as_str() {
                "" => Value::Null,
                v => Value::Bool(v == "true"),
            }),
        );
        put("check_command", self.check_command.map(Value::from));
        put(
            "afk_max_tokens",
            number_or_null("afk-max-tokens", self.afk_max_tokens)?,
        );
        put(
            "afk_max_cost_usd",
            number_or_null("afk-max-cost-usd", self.afk_max_cost_usd)?,
        );
        put(
            "afk_run_timeout_minutes",
            number_or_null("afk-run-timeout-minutes", self.afk_run_timeout_minutes)?,
        );
        put(
            "memory_max_mb",
            number_or_null("memory-max-mb", self.memory_max_mb)?,
        );
        put("pids_max", number_or_null("pids-max", self.pids_max)?);
        put("issue_source", self.issue_source.map(Value::from));
        put("forge_url", self.forge_url.map(Value::from));
        put("forge_repo", self.forge_repo.map(Value::from));
        let token = match self.forge_token.as_deref() {
            Some("-") => {
                let mut line = String::new();
                std::io::stdin()
                    .read_line(&mut line)
                    .map_err(|e| CliError::invalid(format!("--forge-token -: {e}")))?;
                Some(line.trim().to_owned())
            }
            other => other.map(str::to_owned),
        };
        put("forge_token", token.map(Value::from));
        Ok(())
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
            let mut body = Map::new();
            body.insert("name".into(), name.into());
            if let Some(p) = path {
                body.insert("path".into(), absolute(&p).into());
            }
            if let Some(u) = url {
                body.insert("url".into(), u.into());
            }
            fields.into_json(&mut body)?;
            let repo = client.post("/api/v1/repos", &Value::Object(body)).await?;
            output::repo(&repo, json);
        }
        RepoCommand::List { json } => {
            let repos = client.get("/api/v1/repos").await?;
            output::repos(&repos, json);
        }
        RepoCommand::Show { repo, json } => {
            let repo = client.get(&format!("/api/v1/repos/{}", seg(&repo))).await?;
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
            let mut body = Map::new();
            if let Some(n) = name {
                body.insert("name".into(), n.into());
            }
            if let Some(p) = path {
                body.insert("path".into(), absolute(&p).into());
            }
            if let Some(u) = url {
                body.insert("url".into(), u.into());
            }
            fields.into_json(&mut body)?;
            if body.is_empty() {
                return Err(CliError::invalid(
                    "nothing to change: give at least one --field (see --help)",
                ));
            }
            let repo = client
                .patch(
                    &format!("/api/v1/repos/{}", seg(&repo)),
                    &Value::Object(body),
                )
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
    #[arg(long, value_parser = ["manual", "afk"], default_value = "manual")]
    kind: String,
    /// Manual only: the model you would ask for.
    #[arg(long)]
    model: Option<String>,
    /// Manual only: the effort you would ask for.
    #[arg(long)]
    effort: Option<String>,
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
    let query: Vec<String> = q.iter().map(|(k, v)| format!("{k}={}", seg(v))).collect();
    let v = client
        .get(&format!(
            "/api/v1/repos/{}/resolve?{}",
            seg(&a.repo),
            query.join("&")
        ))
        .await?;
    output::resolved(&a.repo, &v, a.json);
    Ok(())
}
