//! `labctl review …`: a review run submits its verdict (its own token,
//! from its environment); anyone lists an issue's verdicts (issue 28 §3).

use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::client::{CliError, CliResult, Client, Exit, seg};
use super::issues::{RepoArg, repo_of};
use super::output;
use crate::http::reviews::ReviewBody;

/// The most bytes of a verdict's file lab reads.
const MAX_VERDICT_BYTES: u64 = 512 * 1024;

#[derive(Subcommand)]
pub enum ReviewCommand {
    /// Submit this review run's verdict (inside the run: its LAB_RUN_ID and
    /// LAB_TOKEN): a JSON file {verdict, summary, findings}.
    Submit {
        /// The verdict's JSON file; `-` reads standard input.
        #[arg(long)]
        file: PathBuf,
        /// The run (default: LAB_RUN_ID).
        #[arg(long, env = "LAB_RUN_ID")]
        run: Option<i64>,
        /// Print lab's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the verdicts on an issue's pull requests, oldest first.
    List {
        /// The issue's number.
        issue: i64,
        #[command(flatten)]
        repo: RepoArg,
        /// Print lab's answer as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn read_verdict(file: &Path) -> CliResult<serde_json::Value> {
    let text = super::plans::read_input(file, MAX_VERDICT_BYTES, "the verdict")?;
    serde_json::from_str(&text).map_err(|e| {
        CliError::new(
            Exit::Usage,
            format!(
                "{} is not JSON ({e}): write {{\"verdict\": \"approved\" | \"changes_requested\", \
                 \"summary\": \"…\", \"findings\": [{{\"path\", \"line\", \"severity\": \
                 \"blocking\" | \"advisory\", \"message\"}}]}}",
                file.display()
            ),
        )
    })
}

fn print(r: &ReviewBody) {
    let head: String = r.head.chars().take(12).collect();
    println!(
        "run {} — {} on {head} (round {}) at {}",
        r.run_id, r.verdict, r.round, r.at
    );
    // The reviewer's words: inert on a terminal.
    println!("{}", output::clean_lines(&r.summary));
    for f in &r.findings {
        println!(
            "  [{}] {}:{}: {}",
            f.severity,
            output::clean(&f.path),
            f.line,
            output::clean_lines(&f.message)
        );
    }
}

pub async fn run(client: &Client, cmd: ReviewCommand) -> CliResult<()> {
    match cmd {
        ReviewCommand::Submit { file, run, json } => {
            let Some(run) = run else {
                return Err(CliError::new(
                    Exit::Usage,
                    "--run is required outside a run (LAB_RUN_ID is not set)",
                ));
            };
            let body = read_verdict(&file)?;
            let r: ReviewBody = client
                .post(&format!("/api/v1/runs/{run}/review"), &body)
                .await?;
            if json {
                output::json(&r);
            } else {
                println!(
                    "submitted a verdict ({}, {} finding(s)): lab acts on it now; end your turn",
                    r.verdict,
                    r.findings.len()
                );
            }
        }
        ReviewCommand::List { issue, repo, json } => {
            let r = repo_of(client, &repo).await?;
            let all: Vec<ReviewBody> = client
                .get(&format!("/api/v1/repos/{}/issues/{issue}/reviews", seg(&r)))
                .await?;
            if json {
                output::json(&all);
            } else if all.is_empty() {
                println!("issue {issue} has no reviews");
            } else {
                for r in &all {
                    print(r);
                    println!();
                }
            }
        }
    }
    Ok(())
}
