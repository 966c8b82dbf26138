//! `labctl resume RUN`: a lost run comes back (ADR 18).

use super::client::{CliResult, Client};
use super::output;
use super::runs::{run_path, with_spinner};
use crate::domain::RunState;
use crate::http::runs::RunBody;

pub async fn resume(client: &Client, run: &str, as_json: bool) -> CliResult<()> {
    let path = format!("{}/resume", run_path(run)?);
    let r: RunBody = with_spinner(format!("resuming run {run}…"), client.post_empty(&path)).await?;
    if as_json {
        output::json(&r);
    } else {
        match &r.state_reason {
            Some(why) if r.state == RunState::Failed => {
                println!("run {} failed to resume: {why}", r.id)
            }
            _ => println!("run {} {}", r.id, r.state),
        }
    }
    Ok(())
}
