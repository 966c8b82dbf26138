//! `labctl afk …`, `labctl pr create`, `labctl ledger` (`labctl issue …`
//! is in `issues.rs`; `labctl pr list|view|merge|close` and `labctl diff`
//! in `pulls.rs`).
//!
//! Inside a run, `LAB_RUN_ID` and the run's `LAB_TOKEN` are set: `issue`
//! commands then default to the run's repo, and `pr create` opens the run's
//! pull request.

use super::issues::RepoArg;
use clap::Subcommand;

use super::client::{CliError, CliResult, Client, Exit, LAUNCH_WAIT, seg};
use super::output::{self, opt, table};
use crate::domain::{compact_cost, compact_tokens};
use crate::http::afk::{AfkStatusBody, CliCheckBody};
use crate::http::issues::PullBody;
use crate::http::repos::RepoBody;
use crate::http::runs::RunBody;
use crate::issues::PullRequest;
use crate::service::afk::{LedgerBody, LedgerRow};

#[derive(Subcommand)]
pub enum AfkCommand {
    /// Start an AFK run now for REPO's next ready issue.
    Start {
        /// The repo (name or id) whose next ready issue to take.
        repo: String,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// The scheduler: paused or not, limits, repos, recent AFK runs.
    Status {
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Pause the scheduler (or one repo's AFK runs). Live runs go on.
    Pause {
        /// Only this repo (name or id); default: the whole scheduler.
        repo: Option<String>,
    },
    /// Resume the scheduler (or one repo's AFK runs).
    Resume {
        /// Only this repo (name or id); default: the whole scheduler.
        repo: Option<String>,
    },
    /// Check a provider's CLI now (it starts, it is signed in): one that
    /// works lets its held AFK runs go on.
    Check {
        /// The provider: claude-code or codex.
        provider: String,
        /// Print the server's answer as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum PrCommand {
    /// Open the pull request of this run's branch (inside an AFK run).
    Create {
        /// The pull request's title.
        #[arg(long)]
        title: String,
        /// Its description (Markdown).
        #[arg(long, default_value = "")]
        body: String,
        /// The run (default: LAB_RUN_ID).
        #[arg(long, env = "LAB_RUN_ID")]
        run: Option<i64>,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// List a repo's pull requests.
    List {
        #[command(flatten)]
        repo: RepoArg,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Show a pull request and its diff (--stat: files only).
    View {
        /// The pull request's number.
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
        /// Files and their +/- counts only.
        #[arg(long)]
        stat: bool,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Merge a built-in pull request into the repo's default branch.
    Merge {
        /// The pull request's number.
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Close a built-in pull request without merging (its branch stays).
    Close {
        /// The pull request's number.
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
}

pub async fn afk(client: &Client, cmd: AfkCommand) -> CliResult<()> {
    match cmd {
        AfkCommand::Start { repo, json } => {
            let r: RunBody = client
                .patient(LAUNCH_WAIT)
                .post_empty(&format!("/api/v1/repos/{}/afk/start", seg(&repo)))
                .await?;
            if json {
                output::json(&r);
            } else {
                output::run_started(&r);
            }
        }
        AfkCommand::Status { json } => {
            let v: AfkStatusBody = client.get("/api/v1/afk/status").await?;
            if json {
                output::json(&v);
            } else {
                print_status(&v);
                let l: LedgerBody = client.get("/api/v1/afk/ledger").await?;
                print_by_outcome(&l);
            }
        }
        AfkCommand::Pause { repo } => toggle(client, repo, "pause").await?,
        AfkCommand::Resume { repo } => toggle(client, repo, "resume").await?,
        AfkCommand::Check { provider, json } => {
            let body: CliCheckBody = client
                .patient(std::time::Duration::from_secs(60))
                .post_empty(&format!("/api/v1/afk/providers/{}/check", seg(&provider)))
                .await?;
            if json {
                output::json(&body);
                if !body.works {
                    return Err(CliError::quiet(super::Exit::Failure));
                }
            } else if body.works {
                println!("{}: its CLI works here; its AFK runs go on", body.provider);
            } else {
                return Err(CliError::failure(format!(
                    "{}: its CLI cannot work here: {}; its AFK runs are held back",
                    body.provider,
                    body.reason.unwrap_or_default()
                )));
            }
        }
    }
    Ok(())
}

async fn toggle(client: &Client, repo: Option<String>, what: &str) -> CliResult<()> {
    match repo {
        Some(r) => {
            let _: RepoBody = client
                .post_empty(&format!("/api/v1/repos/{}/afk/{what}", seg(&r)))
                .await?;
            println!(
                "AFK runs of {r}: {}",
                if what == "pause" { "paused" } else { "resumed" }
            );
        }
        None => {
            let _: AfkStatusBody = client.post_empty(&format!("/api/v1/afk/{what}")).await?;
            println!(
                "the AFK scheduler is {}",
                if what == "pause" { "paused" } else { "running" }
            );
        }
    }
    Ok(())
}

fn print_status(v: &AfkStatusBody) {
    println!(
        "scheduler: {}; {} of at most {} AFK runs live; a tick every {} s; a run may take {} min",
        if v.paused { "PAUSED" } else { "running" },
        v.live,
        v.max_concurrent,
        v.tick_seconds,
        v.run_timeout_minutes
    );
    if let Some(why) = &v.admission {
        println!("launches wait: {why}");
    }
    for l in &v.limited {
        if l.kind == "cli" {
            println!(
                "{} cannot work here: {}; no new AFK run for it (checked again at {}). Fix: {}",
                l.provider,
                l.reason,
                l.until,
                opt(&l.fix)
            );
        } else {
            println!(
                "{} is at its usage limit until {}: no new AFK run for it ({})",
                l.provider, l.until, l.reason
            );
        }
    }
    let rows: Vec<Vec<String>> = v
        .repos
        .iter()
        .map(|r| {
            let afk = match (r.enabled, r.paused) {
                (true, true) => "paused",
                (true, false) => "on",
                (false, _) => "off",
            };
            vec![
                r.repo.clone(),
                afk.to_owned(),
                r.label.clone(),
                format!("{}/{}", r.live, r.max_concurrent),
                r.problem.clone().unwrap_or_default(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        println!();
        table(&["REPO", "AFK", "LABEL", "LIVE", "PROBLEM"], &rows);
    }
    let recent: Vec<Vec<String>> = v
        .recent
        .iter()
        .take(15)
        .map(|c| {
            vec![
                c.repo.clone(),
                format!("#{}", c.issue),
                c.attempt.to_string(),
                c.rounds.to_string(),
                opt(&c.run_id),
                if c.active {
                    "live".into()
                } else {
                    opt(&c.outcome)
                },
                c.pr_url.clone().unwrap_or_default(),
            ]
        })
        .collect();
    if !recent.is_empty() {
        println!();
        table(
            &[
                "REPO",
                "ISSUE",
                "ATTEMPT",
                "ROUNDS",
                "RUN",
                "OUTCOME",
                "PULL REQUEST",
            ],
            &recent,
        );
    }
}

pub async fn pr(client: &Client, cmd: PrCommand) -> CliResult<()> {
    let PrCommand::Create {
        title,
        body,
        run,
        json,
    } = cmd
    else {
        return super::pulls::pr(client, cmd).await;
    };
    let Some(run) = run else {
        return Err(CliError::new(
            Exit::Usage,
            "--run is required outside a run (LAB_RUN_ID is not set)",
        ));
    };
    // Opening it may push the run's branch to a forge.
    let v: PullRequest = client
        .patient(LAUNCH_WAIT)
        .post(
            &format!("/api/v1/runs/{run}/pull"),
            &PullBody { title, body },
        )
        .await?;
    if json {
        output::json(&v);
    } else {
        println!("opened pull request #{}: {}", v.number, v.url);
    }
    Ok(())
}

pub async fn ledger(client: &Client, json: bool) -> CliResult<()> {
    let v: LedgerBody = client.get("/api/v1/afk/ledger").await?;
    if json {
        output::json(&v);
        return Ok(());
    }
    let secs = |v: Option<f64>| v.map_or_else(|| "-".into(), |s| format!("{:.0} s", s));
    let row = |r: &LedgerRow, first: String| {
        vec![
            first,
            r.runs.to_string(),
            r.succeeded.to_string(),
            r.failed.to_string(),
            r.timed_out.to_string(),
            r.stopped.to_string(),
            secs(r.median_seconds),
            tokens(r),
            compact_cost(r.cost_usd),
            r.per_success_shown(),
            r.merged.to_string(),
            r.per_merged_shown(),
        ]
    };
    let by_repo: Vec<Vec<String>> = v.by_repo.iter().map(|r| row(r, opt(&r.repo))).collect();
    let by_model: Vec<Vec<String>> = v
        .by_model
        .iter()
        .map(|r| row(r, format!("{} · {}", opt(&r.model), opt(&r.effort))))
        .collect();
    if by_repo.is_empty() {
        println!("no AFK runs yet");
        return Ok(());
    }
    let counts = [
        "RUNS",
        "SUCCEEDED",
        "FAILED",
        "TIMED OUT",
        "STOPPED",
        "MEDIAN",
        "TOKENS",
        "COST",
        "PER SUCCESS",
        "MERGED",
        "PER MERGED",
    ];
    table(&[&["REPO"][..], &counts].concat(), &by_repo);
    println!();
    table(&[&["MODEL · EFFORT"][..], &counts].concat(), &by_model);
    print_by_outcome(&v);
    Ok(())
}

/// A ledger row's tokens, compact.
fn tokens(r: &LedgerRow) -> String {
    compact_tokens(r.tokens)
}

/// What the AFK runs of each outcome used.
fn print_by_outcome(ledger: &LedgerBody) {
    let rows: Vec<Vec<String>> = ledger
        .by_outcome
        .iter()
        .map(|r| {
            vec![
                r.outcome.as_deref().unwrap_or("live").to_owned(),
                r.runs.to_string(),
                r.rounds.to_string(),
                r.retries.to_string(),
                tokens(r),
                compact_cost(r.cost_usd),
            ]
        })
        .collect();
    if !rows.is_empty() {
        println!();
        table(
            &["OUTCOME", "RUNS", "ROUNDS", "RETRIES", "TOKENS", "COST"],
            &rows,
        );
    }
}
