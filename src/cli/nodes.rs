//! `labctl node ls|drain|undrain|forget` (issue 29): the fleet's nodes, as
//! the server lists them.

use clap::Subcommand;

use super::client::{CliResult, Client, seg};
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
    /// Stop new launches on a node (AFK and manual) while its runs finish.
    Drain {
        /// The node's id (`labctl node ls`).
        node: String,
    },
    /// Let a drained node launch again.
    Undrain {
        /// The node's id.
        node: String,
    },
    /// Forget a node that is down for good (a machine retired): it leaves
    /// `node ls`. Only a down node whose runs and claims the fleet took
    /// over; should it beat again, it is listed again.
    Forget {
        /// The node's id.
        node: String,
    },
}

pub async fn run(client: &Client, cmd: NodeCommand) -> CliResult<()> {
    let (node, action) = match cmd {
        NodeCommand::Ls { json } => return list(client, json).await,
        NodeCommand::Drain { node } => (node, "drain"),
        NodeCommand::Undrain { node } => (node, "undrain"),
        NodeCommand::Forget { node } => {
            client
                .delete(&format!("/api/v1/nodes/{}", seg(&node)))
                .await?;
            println!("node {node} is forgotten");
            return Ok(());
        }
    };
    let n: NodeBody = client
        .post(
            &format!("/api/v1/nodes/{}/{action}", seg(&node)),
            &serde_json::json!({}),
        )
        .await?;
    println!("node {} is {} ({} live run(s))", n.id, n.state, n.runs);
    Ok(())
}

async fn list(client: &Client, json: bool) -> CliResult<()> {
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
    Ok(())
}
