//! `labctl plan …`: a planning run submits its plan (its own token, from
//! its environment); a person lists an issue's plans and approves or
//! rejects the one waiting (issue 28 §2).

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::client::{CliError, CliResult, Client, Exit, seg};
use super::issues::{RepoArg, repo_of};
use super::output;
use crate::domain::MAX_PLAN_BYTES;
use crate::http::plans::{PlanBody, RejectPlanBody, SubmitPlanBody};

#[derive(Subcommand)]
pub enum PlanCommand {
    /// Submit this planning run's plan (inside the run: its LAB_RUN_ID and
    /// LAB_TOKEN).
    Submit {
        /// The plan's file; `-` reads standard input.
        #[arg(long)]
        file: PathBuf,
        /// The run (default: LAB_RUN_ID).
        #[arg(long, env = "LAB_RUN_ID")]
        run: Option<i64>,
        /// Print lab's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List an issue's plans, by version.
    List {
        /// The issue's number.
        issue: i64,
        #[command(flatten)]
        repo: RepoArg,
        /// Print lab's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve the plan waiting for a decision: the work run starts with it.
    Approve {
        /// The issue's number.
        issue: i64,
        #[command(flatten)]
        repo: RepoArg,
        /// Print lab's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Reject the plan waiting for a decision; the planning run is told why.
    Reject {
        /// The issue's number.
        issue: i64,
        /// Why (the planning run reads it).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        repo: RepoArg,
        /// Print lab's answer as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Reads `file` (`-`: standard input), at most `limit` bytes; `what` names
/// it in the error. A run's `… submit --file` (plans, verdicts).
pub(super) fn read_input(file: &Path, limit: u64, what: &str) -> CliResult<String> {
    let mut text = String::new();
    let read = if file.as_os_str() == "-" {
        std::io::stdin().take(limit).read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(limit).read_to_string(&mut text))
    };
    read.map_err(|e| {
        CliError::new(
            Exit::Usage,
            format!("cannot read {what} from {}: {e}", file.display()),
        )
    })?;
    Ok(text)
}

fn print(p: &PlanBody) {
    let why = p
        .reason
        .as_deref()
        .map(|r| format!(": {}", output::clean_lines(r)))
        .unwrap_or_default();
    println!(
        "plan version {} — {} by {} at {}{why}",
        p.version, p.state, p.by, p.at
    );
}

pub async fn run(client: &Client, cmd: PlanCommand) -> CliResult<()> {
    match cmd {
        PlanCommand::Submit { file, run, json } => {
            let Some(run) = run else {
                return Err(CliError::new(
                    Exit::Usage,
                    "--run is required outside a run (LAB_RUN_ID is not set)",
                ));
            };
            let text = read_input(&file, MAX_PLAN_BYTES as u64 + 1, "the plan")?;
            let p: PlanBody = client
                .post(
                    &format!("/api/v1/runs/{run}/plan"),
                    &SubmitPlanBody { text },
                )
                .await?;
            if json {
                output::json(&p);
            } else {
                println!(
                    "submitted plan version {}: lab shows it for a decision once your turn ends",
                    p.version
                );
            }
        }
        PlanCommand::List { issue, repo, json } => {
            let r = repo_of(client, &repo).await?;
            let all: Vec<PlanBody> = client
                .get(&format!("/api/v1/repos/{}/issues/{issue}/plans", seg(&r)))
                .await?;
            if json {
                output::json(&all);
            } else if all.is_empty() {
                println!("issue {issue} has no plans");
            } else {
                for p in &all {
                    print(p);
                    // The planning run's words: inert on a terminal.
                    println!("{}\n", output::clean_lines(&p.text));
                }
            }
        }
        PlanCommand::Approve { issue, repo, json } => {
            let r = repo_of(client, &repo).await?;
            let p: PlanBody = client
                .post(
                    &format!("/api/v1/repos/{}/issues/{issue}/plan/approve", seg(&r)),
                    &serde_json::json!({}),
                )
                .await?;
            if json {
                output::json(&p);
            } else {
                print(&p);
            }
        }
        PlanCommand::Reject {
            issue,
            reason,
            repo,
            json,
        } => {
            let r = repo_of(client, &repo).await?;
            let p: PlanBody = client
                .post(
                    &format!("/api/v1/repos/{}/issues/{issue}/plan/reject", seg(&r)),
                    &RejectPlanBody { reason },
                )
                .await?;
            if json {
                output::json(&p);
            } else {
                print(&p);
            }
        }
    }
    Ok(())
}
