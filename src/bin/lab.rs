//! The lab server.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// lab runs coding-agent CLIs in tmux for the git repositories it manages.
#[derive(Parser)]
#[command(name = "lab", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API and pages, and run the scheduler.
    Serve(lab::server::ServeConfig),
    /// Check that this machine can run agents: tmux, git, the data dir, the
    /// database, and each provider's CLI. Exits non-zero when something is
    /// broken.
    Doctor(lab::server::ServeConfig),
    /// The program a run's tmux pane starts: reads the launch file and
    /// becomes the agent. Used by lab itself.
    #[command(name = "__exec", hide = true)]
    Exec { launch_file: std::path::PathBuf },
    /// The process that copies every run's output to its pane and its log
    /// (ADR 22). Started by lab itself, in its tmux server.
    #[command(name = "__relay", hide = true)]
    Relay {
        socket: std::path::PathBuf,
        lock: std::path::PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Exec { launch_file } = &cli.command {
        // No runtime, no logging: become the agent as directly as possible.
        return ExitCode::from(lab::run::exec::exec_main(launch_file).clamp(0, 255) as u8);
    }
    if let Command::Relay { socket, lock } = &cli.command {
        return ExitCode::from(lab::run::relay::main(socket, lock).clamp(0, 255) as u8);
    }
    lab::init_logging();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lab: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Serve(cfg) => serve(cfg).await,
            Command::Doctor(cfg) => {
                let findings = lab::server::doctor(&cfg).await?;
                if lab::doctor::print(&findings) == lab::doctor::Level::Error {
                    anyhow::bail!("something above is broken");
                }
                Ok(())
            }
            Command::Exec { .. } | Command::Relay { .. } => unreachable!("handled above"),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lab: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(cfg: lab::server::ServeConfig) -> anyhow::Result<()> {
    let running = lab::server::start(&cfg).await?;
    let stop = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        anyhow::Ok(())
    };
    stop.await?;
    tracing::info!("shutting down");
    running.stop().await
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
