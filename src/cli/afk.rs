//! `labctl afk …`, `labctl issue …`, `labctl pr create`, `labctl ledger`
//! (`labctl pr list|view|merge|close` and `labctl diff` are in `pulls.rs`).
//!
//! Inside a run, `LAB_RUN_ID` and the run's `LAB_TOKEN` are set: `issue`
//! commands then default to the run's repo, and `pr create` opens the run's
//! pull request.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::client::{CliError, CliResult, Client, Exit, LAUNCH_WAIT, seg};
use super::output::{self, s, table};
use crate::domain::{IssueState, compact_cost, compact_tokens};

#[derive(Subcommand)]
pub enum AfkCommand {
    /// Start an AFK run now for REPO's next ready issue.
    Start {
        repo: String,
        #[arg(long)]
        json: bool,
    },
    /// The scheduler: paused or not, limits, repos, recent AFK runs.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Pause the scheduler (or one repo's AFK runs). Live runs go on.
    Pause { repo: Option<String> },
    /// Resume the scheduler (or one repo's AFK runs).
    Resume { repo: Option<String> },
}

/// `open` or `closed`, offered and checked by clap.
fn issue_state() -> impl TypedValueParser<Value = IssueState> {
    PossibleValuesParser::new(IssueState::ALL.iter().map(|s| s.as_str()))
        .map(|s| s.parse::<IssueState>().expect("one of the possible values"))
}

#[derive(Subcommand)]
pub enum IssueCommand {
    /// List issues (open ones, unless --state).
    List {
        #[command(flatten)]
        repo: RepoArg,
        #[arg(long)]
        label: Option<String>,
        #[arg(long, value_parser = issue_state())]
        state: Option<IssueState>,
        #[arg(long)]
        json: bool,
    },
    /// Show an issue and its comments.
    View {
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
        #[arg(long)]
        json: bool,
    },
    /// Open an issue.
    Create {
        #[command(flatten)]
        repo: RepoArg,
        #[arg(long)]
        title: String,
        #[arg(long, default_value = "")]
        body: String,
        /// Repeatable.
        #[arg(long = "label")]
        labels: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Close an issue.
    Close {
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
    },
    /// Reopen a closed issue.
    Reopen {
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
    },
    /// Put labels on an issue and take others off (the repo's ready label
    /// gives it to the AFK scheduler).
    Label {
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
        /// A label to put on (repeatable).
        #[arg(long)]
        add: Vec<String>,
        /// A label to take off (repeatable).
        #[arg(long)]
        remove: Vec<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub struct RepoArg {
    /// Repo name or id (inside a run: the run's repo).
    #[arg(long)]
    repo: Option<String>,
}

#[derive(Subcommand)]
pub enum PrCommand {
    /// Open the pull request of this run's branch (inside an AFK run).
    Create {
        #[arg(long)]
        title: String,
        #[arg(long, default_value = "")]
        body: String,
        /// The run (default: LAB_RUN_ID).
        #[arg(long, env = "LAB_RUN_ID")]
        run: Option<i64>,
        #[arg(long)]
        json: bool,
    },
    /// List a repo's pull requests.
    List {
        #[command(flatten)]
        repo: RepoArg,
        #[arg(long)]
        json: bool,
    },
    /// Show a pull request and its diff (--stat: files only).
    View {
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
        #[arg(long)]
        stat: bool,
        #[arg(long)]
        json: bool,
    },
    /// Merge a built-in pull request into the repo's default branch.
    Merge {
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
        #[arg(long)]
        json: bool,
    },
    /// Close a built-in pull request without merging (its branch stays).
    Close {
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
        #[arg(long)]
        json: bool,
    },
}

/// The repo an issue command is about.
pub(super) async fn repo_of(client: &Client, arg: &RepoArg) -> CliResult<String> {
    if let Some(r) = &arg.repo {
        return Ok(r.clone());
    }
    let Some(run) = std::env::var("LAB_RUN_ID").ok().filter(|v| !v.is_empty()) else {
        return Err(CliError::new(
            Exit::Usage,
            "--repo is required (outside a run)",
        ));
    };
    let r = client.get(&format!("/api/v1/runs/{}", seg(&run))).await?;
    Ok(s(&r["repo"]))
}

pub async fn afk(client: &Client, cmd: AfkCommand) -> CliResult<()> {
    match cmd {
        AfkCommand::Start { repo, json } => {
            let r = client
                .patient(LAUNCH_WAIT)
                .post(
                    &format!("/api/v1/repos/{}/afk/start", seg(&repo)),
                    &Value::Null,
                )
                .await?;
            if json {
                output::json(&r);
            } else {
                output::run_started(&r);
            }
        }
        AfkCommand::Status { json } => {
            let v = client.get("/api/v1/afk/status").await?;
            if json {
                output::json(&v);
            } else {
                print_status(&v);
                let l = client.get("/api/v1/afk/ledger").await?;
                print_by_outcome(&l);
            }
        }
        AfkCommand::Pause { repo } => toggle(client, repo, "pause").await?,
        AfkCommand::Resume { repo } => toggle(client, repo, "resume").await?,
    }
    Ok(())
}

async fn toggle(client: &Client, repo: Option<String>, what: &str) -> CliResult<()> {
    match repo {
        Some(r) => {
            client
                .post(
                    &format!("/api/v1/repos/{}/afk/{what}", seg(&r)),
                    &Value::Null,
                )
                .await?;
            println!(
                "AFK runs of {r}: {}",
                if what == "pause" { "paused" } else { "resumed" }
            );
        }
        None => {
            client
                .post(&format!("/api/v1/afk/{what}"), &Value::Null)
                .await?;
            println!(
                "the AFK scheduler is {}",
                if what == "pause" { "paused" } else { "running" }
            );
        }
    }
    Ok(())
}

fn print_status(v: &Value) {
    println!(
        "scheduler: {}; {} of at most {} AFK runs live; a tick every {} s; a run may take {} min",
        if v["paused"] == true {
            "PAUSED"
        } else {
            "running"
        },
        s(&v["live"]),
        s(&v["max_concurrent"]),
        s(&v["tick_seconds"]),
        s(&v["run_timeout_minutes"])
    );
    if let Some(why) = v["admission"].as_str() {
        println!("launches wait: {why}");
    }
    for l in v["limited"].as_array().into_iter().flatten() {
        println!(
            "{} is at its usage limit until {}: no new AFK run for it ({})",
            s(&l["provider"]),
            s(&l["until"]),
            s(&l["reason"])
        );
    }
    let rows: Vec<Vec<String>> = v["repos"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let afk = match (r["enabled"].as_bool(), r["paused"].as_bool()) {
                (Some(true), Some(true)) => "paused",
                (Some(true), _) => "on",
                _ => "off",
            };
            vec![
                s(&r["repo"]),
                afk.to_owned(),
                s(&r["label"]),
                format!("{}/{}", s(&r["live"]), s(&r["max_concurrent"])),
                r["problem"].as_str().unwrap_or("").to_owned(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        println!();
        table(&["REPO", "AFK", "LABEL", "LIVE", "PROBLEM"], &rows);
    }
    let recent: Vec<Vec<String>> = v["recent"]
        .as_array()
        .into_iter()
        .flatten()
        .take(15)
        .map(|c| {
            vec![
                s(&c["repo"]),
                format!("#{}", s(&c["issue"])),
                s(&c["attempt"]),
                s(&c["rounds"]),
                s(&c["run_id"]),
                if c["active"] == true {
                    "live".into()
                } else {
                    s(&c["outcome"])
                },
                c["pr_url"].as_str().unwrap_or("").to_owned(),
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

pub async fn issue(client: &Client, cmd: IssueCommand) -> CliResult<()> {
    match cmd {
        IssueCommand::List {
            repo,
            label,
            state,
            json,
        } => {
            let repo = repo_of(client, &repo).await?;
            let mut q = vec![format!("state={}", state.unwrap_or(IssueState::Open))];
            if let Some(l) = label {
                q.push(format!("label={}", seg(&l)));
            }
            let v = client
                .get(&format!(
                    "/api/v1/repos/{}/issues?{}",
                    seg(&repo),
                    q.join("&")
                ))
                .await?;
            if json {
                output::json(&v);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = v
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| {
                    let labels = i["labels"]
                        .as_array()
                        .map(|a| a.iter().map(s).collect::<Vec<_>>().join(", "))
                        .unwrap_or_default();
                    vec![
                        format!("#{}", s(&i["number"])),
                        s(&i["state"]),
                        s(&i["title"]),
                        labels,
                    ]
                })
                .collect();
            if rows.is_empty() {
                println!("no issues");
            } else {
                table(&["ISSUE", "STATE", "TITLE", "LABELS"], &rows);
            }
        }
        IssueCommand::View { number, repo, json } => {
            let repo = repo_of(client, &repo).await?;
            let v = client
                .get(&format!("/api/v1/repos/{}/issues/{number}", seg(&repo)))
                .await?;
            if json {
                output::json(&v);
                return Ok(());
            }
            println!(
                "#{} {} [{}]",
                s(&v["number"]),
                s(&v["title"]),
                s(&v["state"])
            );
            let labels = v["labels"]
                .as_array()
                .map(|a| a.iter().map(s).collect::<Vec<_>>().join(", "))
                .unwrap_or_default();
            if !labels.is_empty() {
                println!("labels: {labels}");
            }
            if let Some(u) = v["url"].as_str() {
                println!("{u}");
            }
            println!("\n{}", v["body"].as_str().unwrap_or(""));
            for c in v["comments"].as_array().into_iter().flatten() {
                println!(
                    "\n--- {} at {}\n{}",
                    s(&c["author"]),
                    s(&c["created_at"]),
                    c["body"].as_str().unwrap_or("")
                );
            }
        }
        IssueCommand::Create {
            repo,
            title,
            body,
            labels,
            json,
        } => {
            let repo = repo_of(client, &repo).await?;
            let v = client
                .post(
                    &format!("/api/v1/repos/{}/issues", seg(&repo)),
                    &json!({"title": title, "body": body, "labels": labels}),
                )
                .await?;
            if json {
                output::json(&v);
                return Ok(());
            }
            println!("opened issue #{} in {repo}", s(&v["number"]));
        }
        IssueCommand::Close { number, repo } => {
            let repo = repo_of(client, &repo).await?;
            client
                .post(
                    &format!("/api/v1/repos/{}/issues/{number}/close", seg(&repo)),
                    &Value::Null,
                )
                .await?;
            println!("closed issue #{number} of {repo}");
        }
        IssueCommand::Reopen { number, repo } => {
            let repo = repo_of(client, &repo).await?;
            client
                .post(
                    &format!("/api/v1/repos/{}/issues/{number}/reopen", seg(&repo)),
                    &Value::Null,
                )
                .await?;
            println!("reopened issue #{number} of {repo}");
        }
        IssueCommand::Label {
            number,
            repo,
            add,
            remove,
            json,
        } => {
            let repo = repo_of(client, &repo).await?;
            let v = client
                .post(
                    &format!("/api/v1/repos/{}/issues/{number}/labels", seg(&repo)),
                    &json!({"add": add, "remove": remove}),
                )
                .await?;
            if json {
                output::json(&v);
                return Ok(());
            }
            let labels: Vec<String> = v["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .map(s)
                .collect();
            println!("issue #{number} of {repo}: {}", labels.join(", "));
        }
    }
    Ok(())
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
    let v = client
        .patient(LAUNCH_WAIT)
        .post(
            &format!("/api/v1/runs/{run}/pull"),
            &json!({"title": title, "body": body}),
        )
        .await?;
    if json {
        output::json(&v);
    } else {
        println!("opened pull request #{}: {}", s(&v["number"]), s(&v["url"]));
    }
    Ok(())
}

pub async fn ledger(client: &Client, json: bool) -> CliResult<()> {
    let v = client.get("/api/v1/afk/ledger").await?;
    if json {
        output::json(&v);
        return Ok(());
    }
    let secs = |v: &Value| {
        v.as_f64()
            .map(|s| format!("{:.0} s", s))
            .unwrap_or_else(|| "-".into())
    };
    let row = |r: &Value, first: String| {
        vec![
            first,
            s(&r["runs"]),
            s(&r["succeeded"]),
            s(&r["failed"]),
            s(&r["timed_out"]),
            secs(&r["median_seconds"]),
            tokens(r),
            compact_cost(r["cost_usd"].as_f64()),
            compact_cost(r["cost_per_success_usd"].as_f64()),
        ]
    };
    let by_repo: Vec<Vec<String>> = v["by_repo"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| row(r, s(&r["repo"])))
        .collect();
    let by_model: Vec<Vec<String>> = v["by_model"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| row(r, format!("{} · {}", s(&r["model"]), s(&r["effort"]))))
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
        "MEDIAN",
        "TOKENS",
        "COST",
        "PER SUCCESS",
    ];
    table(&[&["REPO"][..], &counts].concat(), &by_repo);
    println!();
    table(&[&["MODEL · EFFORT"][..], &counts].concat(), &by_model);
    print_by_outcome(&v);
    Ok(())
}

/// A ledger row's tokens, compact.
fn tokens(r: &Value) -> String {
    compact_tokens(r["tokens"].as_i64().unwrap_or(0))
}

/// What the AFK runs of each outcome used.
fn print_by_outcome(ledger: &Value) {
    let rows: Vec<Vec<String>> = ledger["by_outcome"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            vec![
                r["outcome"].as_str().unwrap_or("live").to_owned(),
                s(&r["runs"]),
                s(&r["rounds"]),
                s(&r["retries"]),
                tokens(r),
                compact_cost(r["cost_usd"].as_f64()),
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
