//! `labctl node ls` (issue 29): the fleet's nodes, as the server lists them.

use clap::Subcommand;

use super::client::{CliResult, Client};
use super::output;
use crate::http::nodes::NodeBody;

#[derive(Subcommand)]
pub enum NodeCommand {
    /// List the lab nodes sharing this database: state, live runs, where
    /// they are reached, when they last beat.
    Ls {
        /// Print lab's answer as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(client: &Client, cmd: NodeCommand) -> CliResult<()> {
    match cmd {
        NodeCommand::Ls { json } => {
            let all: Vec<NodeBody> = client.get("/api/v1/nodes").await?;
            if json {
                output::json(&all);
                return Ok(());
            }
            println!(
                "{:<24} {:<9} {:>4}  {:<32} {:<8} LAST SEEN",
                "NODE", "STATE", "RUNS", "URL", "VERSION"
            );
            for n in &all {
                println!(
                    "{:<24} {:<9} {:>4}  {:<32} {:<8} {}",
                    n.id, n.state, n.runs, n.url, n.version, n.last_seen
                );
            }
        }
    }
    Ok(())
}
