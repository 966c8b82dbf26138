//! labctl: lab from the terminal. Talks to `lab serve` over HTTP only.

mod afk;
mod client;
mod config;
mod hook;
mod issues;
mod kind_args;
mod knob_args;
mod nodes;
mod notify;
mod output;
mod plans;
mod pulls;
mod repos;
mod resume;
mod reviews;
#[cfg(test)]
mod round_trip;
mod runs;
mod settings;
mod writes_hook;

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
    /// Where lab serves [default: the URL `labctl login` saved, else
    /// http://127.0.0.1:7878].
    #[arg(
        long = "lab-url",
        env = "LAB_URL",
        global = true,
        value_name = "URL",
        help_heading = "Global options"
    )]
    lab_url: Option<String>,
    /// The token to send [default: the one `labctl login` saved for this
    /// URL, else the token file in LAB_DATA_DIR (or the default data dir)].
    #[arg(
        long,
        env = "LAB_TOKEN",
        hide_env_values = true,
        global = true,
        help_heading = "Global options"
    )]
    token: Option<String>,
    /// Seconds to wait for lab's answer; 0 waits without limit. Starting a
    /// run waits at least 6 minutes (a first start clones the repo), and
    /// `logs --follow` as long as the run lasts.
    #[arg(
        long,
        env = "LAB_TIMEOUT",
        default_value_t = 30,
        global = true,
        value_name = "SECONDS",
        help_heading = "Global options"
    )]
    timeout: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the providers with their models, efforts and options.
    Providers {
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// List the knobs: the per-issue directives lab knows, their values and
    /// defaults.
    Knobs {
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
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
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Show an AFK run's receipt: what lab did for its pull request, round
    /// by round.
    Receipt {
        /// Run id.
        run: String,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
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
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Resume a lost run: its agent CLI goes on with the same session, in
    /// the same workspace.
    Resume {
        /// Run id.
        run: String,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
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
    /// Plans of AFK issues: submit this planning run's; list, approve,
    /// reject an issue's.
    #[command(subcommand)]
    Plan(plans::PlanCommand),
    /// Reviews of AFK pull requests: submit this review run's verdict; list
    /// an issue's.
    #[command(subcommand)]
    Review(reviews::ReviewCommand),
    /// The lab nodes sharing this database.
    #[command(subcommand)]
    Node(nodes::NodeCommand),
    /// Print a run's changes against its base (live: uncommitted files too).
    Diff(pulls::DiffArgs),
    /// Notification endpoints: send a test, list, add, remove (the same as
    /// `labctl settings notify`).
    #[command(subcommand)]
    Notify(notify::NotifyCommand),
    /// AFK outcomes by repo and by model/effort.
    Ledger {
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Ask the server whether its machine can run agents (`lab doctor`).
    Doctor {
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
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
    /// Claude Code's `PreToolUse` hook in a run with a scope (what lab puts
    /// on its file-writing tools): reads the tool call on stdin and refuses
    /// a write outside the globs, naming the path and the globs. Inside the
    /// run's sandbox, never talks to lab, always exits 0.
    #[command(hide = true)]
    WritesHook {
        /// The run's workspace.
        #[arg(long)]
        root: std::path::PathBuf,
        /// The run's `writes` globs.
        #[arg(last = true)]
        globs: Vec<String>,
    },
    /// Save where lab serves and a token for it, so later calls need no
    /// LAB_URL or LAB_TOKEN (the token: --token or LAB_TOKEN, else the
    /// token file of a lab on this machine, else read from stdin).
    Login {
        /// lab's URL, e.g. http://lab.example:7878.
        url: String,
    },
    /// Forget what `labctl login` saved.
    Logout,
    /// Print a shell completion script.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Entry point of the `labctl` binary.
pub fn main() -> ExitCode {
    // A closed pipe (`labctl ps | head -1`) ends labctl quietly, as it does
    // any other command line tool, instead of a panic in `println!`.
    crate::sys::default_disposition(crate::sys::Signal::Pipe);
    let json = std::env::args().any(|a| a == "--json");
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
        Err(e)
            if json
                && !matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                ) =>
        {
            let message = e.render().to_string();
            let message = message.trim().trim_start_matches("error: ");
            output::error_json(Exit::Usage, message);
            return Exit::Usage.into();
        }
        Err(e) => e.exit(),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_)
            if matches!(
                cli.command,
                Command::Hook { .. } | Command::WritesHook { .. }
            ) =>
        {
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("labctl: cannot start: {e}");
            return Exit::Failure.into();
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.message.is_empty() => e.code.into(),
        Err(e) if json => {
            output::error_json(e.code, &e.message);
            e.code.into()
        }
        Err(e) => {
            eprintln!("labctl: {}", e.message);
            e.code.into()
        }
    }
}

async fn run(cli: Cli) -> CliResult<()> {
    if let Command::Hook { provider, args } = &cli.command {
        let url = cli.lab_url.as_deref().unwrap_or(config::DEFAULT_URL);
        hook::hook(url, cli.token.clone(), provider, args).await;
        return Ok(());
    }
    if let Command::WritesHook { root, globs } = &cli.command {
        writes_hook::writes_hook(root, globs);
        return Ok(());
    }
    if let Command::Logout = cli.command {
        match config::remove()? {
            Some(p) => println!("forgot what labctl login saved ({})", p.display()),
            None => println!("nothing to forget: labctl login saved nothing"),
        }
        return Ok(());
    }
    if let Command::Completions { shell } = cli.command {
        clap_complete::generate(shell, &mut Cli::command(), "labctl", &mut std::io::stdout());
        return Ok(());
    }
    let timeout = (cli.timeout > 0).then(|| std::time::Duration::from_secs(cli.timeout));
    if let Command::Login { url } = &cli.command {
        return login(url, cli.token, timeout).await;
    }
    let (url, token) = config::resolve(cli.lab_url, cli.token, &config::load()?);
    let client = Client::new(&url, token, timeout)?;
    match cli.command {
        Command::Providers { json } => {
            let v: Vec<crate::http::providers::ProviderBody> =
                client.get("/api/v1/providers").await?;
            output::providers(&v, json);
            Ok(())
        }
        Command::Knobs { json } => {
            let v: Vec<crate::http::knobs::KnobBody> = client.get("/api/v1/knobs").await?;
            output::knobs(&v, json);
            Ok(())
        }
        Command::Repo(cmd) => repos::run(&client, *cmd).await,
        Command::Settings(cmd) => settings::run(&client, cmd).await,
        Command::Resolve(args) => repos::resolve(&client, args).await,
        Command::Start(args) => runs::start(&client, args).await,
        Command::Ps(args) => runs::ps(&client, args).await,
        Command::Show { run, json } => runs::show(&client, &run, json).await,
        Command::Receipt { run, json } => runs::receipt(&client, &run, json).await,
        Command::Attach { run } => runs::attach(&client, &run).await,
        Command::Stop { run, json } => runs::stop(&client, &run, json).await,
        Command::Resume { run, json } => resume::resume(&client, &run, json).await,
        Command::Logs(args) => runs::logs(&client, args).await,
        Command::Send(args) => runs::send(&client, args).await,
        Command::Rm { run } => runs::rm(&client, &run).await,
        Command::Doctor { json } => {
            let body: crate::http::status::DoctorBody = client.get("/api/v1/doctor").await?;
            if json {
                output::json(&body);
            } else {
                crate::doctor::print(&body.findings);
            }
            if body.worst == crate::doctor::Level::Error {
                // Under --json the answer says it; only the exit code adds to it.
                return Err(if json {
                    CliError::quiet(Exit::Failure)
                } else {
                    CliError::failure("something above is broken")
                });
            }
            Ok(())
        }
        Command::Afk(cmd) => afk::afk(&client, cmd).await,
        Command::Issue(cmd) => issues::issue(&client, cmd).await,
        Command::Pr(cmd) => afk::pr(&client, cmd).await,
        Command::Plan(cmd) => plans::run(&client, cmd).await,
        Command::Review(cmd) => reviews::run(&client, cmd).await,
        Command::Node(cmd) => nodes::run(&client, cmd).await,
        Command::Ledger { json } => afk::ledger(&client, json).await,
        Command::Notify(cmd) => notify::run(&client, cmd).await,
        Command::Diff(args) => pulls::diff(&client, args).await,
        Command::Completions { .. }
        | Command::Hook { .. }
        | Command::WritesHook { .. }
        | Command::Login { .. }
        | Command::Logout => unreachable!("handled above"),
    }
}

/// `labctl login URL`: checks the token against lab, then saves both.
async fn login(
    url: &str,
    token: Option<String>,
    timeout: Option<std::time::Duration>,
) -> CliResult<()> {
    let url = url.trim_end_matches('/').to_owned();
    let parsed = reqwest::Url::parse(&url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
    let Some(parsed) = parsed else {
        return Err(CliError::invalid(format!(
            "'{url}' is not a URL labctl can reach; give http(s)://host[:port], e.g. \
             http://127.0.0.1:7878"
        )));
    };
    // This machine's token file goes only to a lab on this machine.
    let host = parsed.host_str().unwrap_or("").trim_matches(['[', ']']);
    let local = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let token = match token.filter(|t| !t.is_empty()) {
        Some(t) => t,
        None => match client::local_token().filter(|_| local) {
            Some(t) => t,
            None => read_token()?,
        },
    };
    let client = Client::new(&url, Some(token.clone()), timeout)?;
    let _: crate::http::settings::SettingsBody = client.get("/api/v1/settings").await?;
    let path = config::save(&config::Saved {
        url: Some(url.clone()),
        token: Some(token),
    })?;
    println!(
        "logged in to {url}: labctl uses it from now on (saved in {}, mode 0600)",
        path.display()
    );
    Ok(())
}

/// A token typed (or piped) on stdin.
fn read_token() -> CliResult<String> {
    use std::io::{BufRead, IsTerminal};
    if std::io::stdin().is_terminal() {
        eprint!("lab's admin token (the file `token` in lab's data dir): ");
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| CliError::failure(format!("reading the token: {e}")))?;
    let t = line.trim().to_owned();
    if t.is_empty() {
        return Err(CliError::invalid(
            "no token: give --token, set LAB_TOKEN, or type it on stdin",
        ));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// Every command and every option says what it is for.
    #[test]
    fn every_command_and_option_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if matches!(id, "help" | "version") || a.is_hide_set() {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} --{id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                let p = format!("{path} {}", sub.get_name());
                if sub.get_name() != "help" && sub.get_about().is_none() {
                    missing.push(p.clone());
                }
                walk(sub, &p, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "labctl", &mut missing);
        assert!(
            missing.is_empty(),
            "without help text:\n{}",
            missing.join("\n")
        );
    }
}
