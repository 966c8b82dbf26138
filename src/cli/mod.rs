//! labctl: lab from the terminal. Talks to `lab serve` over HTTP only.

mod afk;
mod client;
mod hook;
mod issues;
mod notify;
mod output;
mod pulls;
mod repos;
mod resume;
mod runs;
mod settings;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

pub use client::{CliError, CliResult, Client, Exit};

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  failure (a server error, a local error)
  2  usage error
  3  not found (repo, run or issue)
  4  conflict (a taken name, a run still live, a cap reached)
  5  invalid value (the message names it and what is allowed)
  6  not authorised (no token, a wrong token, or out of a run token's scope)
  7  lab could not be reached";

/// labctl: start and watch agent runs, and manage lab's settings and repos.
#[derive(Parser)]
#[command(name = "labctl", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    /// Where lab serves.
    #[arg(
        long = "lab-url",
        env = "LAB_URL",
        default_value = "http://127.0.0.1:7878",
        global = true
    )]
    lab_url: String,
    /// The token to send. Default: the token file in LAB_DATA_DIR (or the
    /// default data dir).
    #[arg(long, env = "LAB_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// Seconds to wait for lab's answer; 0 waits without limit. Starting a
    /// run waits at least 6 minutes (a first start clones the repo), and
    /// `logs --follow` as long as the run lasts.
    #[arg(
        long,
        env = "LAB_TIMEOUT",
        default_value_t = 30,
        global = true,
        value_name = "SECONDS"
    )]
    timeout: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the providers with their models, efforts and options.
    Providers {
        #[arg(long)]
        json: bool,
    },
    /// Manage repos.
    #[command(subcommand)]
    Repo(Box<repos::RepoCommand>),
    /// Show or change the global settings.
    #[command(subcommand)]
    Settings(settings::SettingsCommand),
    /// Show what a run of REPO would get, and where each value comes from.
    Resolve(repos::ResolveArgs),
    /// Start a manual run of a repo in tmux.
    Start(runs::StartArgs),
    /// List runs (live ones unless --all).
    Ps(runs::PsArgs),
    /// Show one run: its values, state, CLI session and usage.
    Show {
        /// Run id.
        run: String,
        #[arg(long)]
        json: bool,
    },
    /// Attach this terminal to a run's tmux session (detach: Ctrl-b d).
    Attach {
        /// Run id.
        run: String,
    },
    /// Stop a run: its whole process tree, then its session.
    Stop {
        /// Run id.
        run: String,
        #[arg(long)]
        json: bool,
    },
    /// Resume a lost run: its agent CLI goes on with the same session, in
    /// the same workspace.
    Resume {
        /// Run id.
        run: String,
        #[arg(long)]
        json: bool,
    },
    /// Print a run's screen as its CLI drew it, with what scrolled off above
    /// it (--raw: the log's bytes).
    Logs(runs::LogsArgs),
    /// Type into a live run: text as it is, then keys (Enter by default).
    Send(runs::SendArgs),
    /// Remove an ended run and its workspace (its branch stays when it has
    /// commits of its own).
    Rm {
        /// Run id.
        run: String,
    },
    /// The AFK scheduler: start a run now, status, pause, resume.
    #[command(subcommand)]
    Afk(afk::AfkCommand),
    /// Issues of a repo (inside a run: of the run's repo).
    #[command(subcommand)]
    Issue(issues::IssueCommand),
    /// Pull requests: open this run's; list, view, merge, close.
    #[command(subcommand)]
    Pr(afk::PrCommand),
    /// Print a run's changes against its base (live: uncommitted files too).
    Diff(pulls::DiffArgs),
    /// Notification endpoints: send a test, list, add, remove (the same as
    /// `labctl settings notify`).
    #[command(subcommand)]
    Notify(notify::NotifyCommand),
    /// AFK outcomes by repo and by model/effort.
    Ledger {
        #[arg(long)]
        json: bool,
    },
    /// Ask the server whether its machine can run agents (`lab doctor`).
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Report an agent CLI's hook event to lab (what a run's CLI runs; it
    /// reads the run's LAB_URL, LAB_RUN_ID and LAB_TOKEN, waits at most 2 s,
    /// prints nothing and always exits 0).
    Hook {
        /// The CLI: claude-code (payload on stdin) or codex (payload as the
        /// last argument).
        provider: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
    /// Print a shell completion script.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Entry point of the `labctl` binary.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // A hook never fails its agent, even when called wrongly.
        Err(e)
            if std::env::args().nth(1).as_deref() == Some("hook")
                && !matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                ) =>
        {
            return ExitCode::SUCCESS;
        }
        Err(e) => e.exit(),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) if matches!(cli.command, Command::Hook { .. }) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("labctl: cannot start: {e}");
            return Exit::Failure.into();
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("labctl: {}", e.message);
            e.code.into()
        }
    }
}

async fn run(cli: Cli) -> CliResult<()> {
    if let Command::Hook { provider, args } = &cli.command {
        hook::hook(&cli.lab_url, cli.token.clone(), provider, args).await;
        return Ok(());
    }
    if let Command::Completions { shell } = cli.command {
        clap_complete::generate(shell, &mut Cli::command(), "labctl", &mut std::io::stdout());
        return Ok(());
    }
    let timeout = (cli.timeout > 0).then(|| std::time::Duration::from_secs(cli.timeout));
    let client = Client::new(&cli.lab_url, cli.token, timeout)?;
    match cli.command {
        Command::Providers { json } => {
            let v = client.get("/api/v1/providers").await?;
            output::providers(&v, json);
            Ok(())
        }
        Command::Repo(cmd) => repos::run(&client, *cmd).await,
        Command::Settings(cmd) => settings::run(&client, cmd).await,
        Command::Resolve(args) => repos::resolve(&client, args).await,
        Command::Start(args) => runs::start(&client, args).await,
        Command::Ps(args) => runs::ps(&client, args).await,
        Command::Show { run, json } => runs::show(&client, &run, json).await,
        Command::Attach { run } => runs::attach(&client, &run).await,
        Command::Stop { run, json } => runs::stop(&client, &run, json).await,
        Command::Resume { run, json } => resume::resume(&client, &run, json).await,
        Command::Logs(args) => runs::logs(&client, args).await,
        Command::Send(args) => runs::send(&client, args).await,
        Command::Rm { run } => runs::rm(&client, &run).await,
        Command::Doctor { json } => {
            let v = client.get("/api/v1/doctor").await?;
            if json {
                output::json(&v);
            } else {
                let body: crate::http::status::DoctorBody = serde_json::from_value(v.clone())
                    .map_err(|e| CliError::failure(format!("the server's doctor answer: {e}")))?;
                let findings = body.findings;
                crate::doctor::print(&findings);
            }
            if v["worst"] == "error" {
                return Err(CliError::failure("something above is broken"));
            }
            Ok(())
        }
        Command::Afk(cmd) => afk::afk(&client, cmd).await,
        Command::Issue(cmd) => issues::issue(&client, cmd).await,
        Command::Pr(cmd) => afk::pr(&client, cmd).await,
        Command::Ledger { json } => afk::ledger(&client, json).await,
        Command::Notify(cmd) => notify::run(&client, cmd).await,
        Command::Diff(args) => pulls::diff(&client, args).await,
        Command::Completions { .. } | Command::Hook { .. } => unreachable!("handled above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }
}
