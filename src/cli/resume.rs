//! `labctl resume RUN`: a lost run comes back (ADR 18).

use serde_json::Value;

use super::client::{CliResult, Client};
use super::output::{self, s};
use super::runs::{run_path, with_spinner};

pub async fn resume(client: &Client, run: &str, as_json: bool) -> CliResult<()> {
    let path = format!("{}/resume", run_path(run)?);
    let r = with_spinner(
        format!("resuming run {run}…"),
        client.post(&path, &Value::Null),
    )
    .await?;
    if as_json {
        output::json(&r);
    } else {
        match r["state_reason"].as_str() {
            Some(why) if r["state"] == "failed" => {
                println!("run {} failed to resume: {why}", s(&r["id"]))
            }
            _ => println!("run {} {}", s(&r["id"]), s(&r["state"])),
        }
    }
    Ok(())
}
