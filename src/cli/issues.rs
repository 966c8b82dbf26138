//! `labctl issue …`: the issues of a repo's source (the built-in tracker or
//! its forge), from outside a run or inside one (its run token reaches its
//! repo's issues).

use clap::{Args, Subcommand};

use super::client::{CliError, CliResult, Client, Exit, seg};
use super::output::{self, table};
use crate::http::issues::{IssuePatchBody, LabelsBody, NewIssueBody};
use crate::http::runs::RunBody;
use crate::issues::Issue;

#[derive(Subcommand)]
pub enum IssueCommand {
    /// List issues (open ones, unless --state).
    List {
        #[command(flatten)]
        repo: RepoArg,
        /// Only issues with this label.
        #[arg(long)]
        label: Option<String>,
        /// Which issues: open (the default), closed or all.
        #[arg(long, value_parser = ["open", "closed", "all"], default_value = "open")]
        state: String,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Show an issue and its comments.
    View {
        /// The issue's number.
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Open an issue.
    Create {
        #[command(flatten)]
        repo: RepoArg,
        /// The issue's title.
        #[arg(long)]
        title: String,
        /// Its description (Markdown).
        #[arg(long, default_value = "")]
        body: String,
        /// Repeatable.
        #[arg(long = "label")]
        labels: Vec<String>,
        /// A directive for its AFK run, KEY=VALUE (repeatable; built-in
        /// tracker only): a knob (`labctl knobs`), model, effort, a provider
        /// option, max_tokens, max_cost_usd or run_timeout_minutes. VALUE is
        /// read as JSON when it is JSON (true, 3, 2.5, ["src/**"]), else as
        /// text.
        #[arg(long = "knob", value_name = "KEY=VALUE", value_parser = super::knob_args::knob_arg)]
        knobs: Vec<(String, serde_json::Value)>,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Set a built-in issue's directives for its AFK run, replacing the ones
    /// set (refused once an AFK run has claimed it).
    Knobs {
        /// The issue's number.
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
        /// KEY=VALUE, as for `issue create --knob` (repeatable).
        #[arg(long = "knob", value_name = "KEY=VALUE", value_parser = super::knob_args::knob_arg, required_unless_present = "clear")]
        knobs: Vec<(String, serde_json::Value)>,
        /// Clear every directive.
        #[arg(long, conflicts_with = "knobs")]
        clear: bool,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Close an issue.
    Close {
        /// The issue's number.
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
    },
    /// Reopen a closed issue.
    Reopen {
        /// The issue's number.
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
    },
    /// Put labels on an issue and take others off (the repo's ready label
    /// gives it to the AFK scheduler).
    Label {
        /// The issue's number.
        number: i64,
        #[command(flatten)]
        repo: RepoArg,
        /// A label to put on (repeatable).
        #[arg(long)]
        add: Vec<String>,
        /// A label to take off (repeatable).
        #[arg(long)]
        remove: Vec<String>,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub struct RepoArg {
    /// Repo name or id (inside a run: the run's repo).
    #[arg(long)]
    pub(super) repo: Option<String>,
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
    let r: RunBody = client.get(&format!("/api/v1/runs/{}", seg(&run))).await?;
    Ok(r.repo)
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
            let mut q = vec![format!("state={state}")];
            if let Some(l) = label {
                q.push(format!("label={}", seg(&l)));
            }
            let v: Vec<Issue> = client
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
                .iter()
                .map(|i| {
                    vec![
                        format!("#{}", i.number),
                        i.state.to_string(),
                        i.title.clone(),
                        i.labels.join(", "),
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
            let v: Issue = client
                .get(&format!("/api/v1/repos/{}/issues/{number}", seg(&repo)))
                .await?;
            if json {
                output::json(&v);
                return Ok(());
            }
            println!("#{} {} [{}]", v.number, v.title, v.state);
            let labels = v.labels.join(", ");
            if !labels.is_empty() {
                println!("labels: {labels}");
            }
            if let Some(u) = &v.url {
                println!("{u}");
            }
            if !v.knobs.is_empty() {
                println!("knobs: {}", super::knob_args::knobs_line(&v.knobs));
            }
            println!("\n{}", v.body);
            for c in &v.comments {
                println!("\n--- {} at {}\n{}", c.author, c.created_at, c.body);
            }
        }
        IssueCommand::Create {
            repo,
            title,
            body,
            labels,
            knobs,
            json,
        } => {
            let repo = repo_of(client, &repo).await?;
            let v: Issue = client
                .post(
                    &format!("/api/v1/repos/{}/issues", seg(&repo)),
                    &NewIssueBody {
                        title,
                        body,
                        labels,
                        knobs: (!knobs.is_empty()).then(|| knobs.into_iter().collect()),
                    },
                )
                .await?;
            if json {
                output::json(&v);
                return Ok(());
            }
            println!("opened issue #{} in {repo}", v.number);
        }
        IssueCommand::Knobs {
            number,
            repo,
            knobs,
            clear: _,
            json,
        } => {
            let repo = repo_of(client, &repo).await?;
            let v: Issue = client
                .patch(
                    &format!("/api/v1/repos/{}/issues/{number}", seg(&repo)),
                    &IssuePatchBody {
                        knobs: knobs.into_iter().collect(),
                    },
                )
                .await?;
            if json {
                output::json(&v);
                return Ok(());
            }
            println!(
                "issue #{number} of {repo}: {}",
                super::knob_args::knobs_line(&v.knobs)
            );
        }
        IssueCommand::Close { number, repo } => {
            let repo = repo_of(client, &repo).await?;
            let _: Issue = client
                .post_empty(&format!(
                    "/api/v1/repos/{}/issues/{number}/close",
                    seg(&repo)
                ))
                .await?;
            println!("closed issue #{number} of {repo}");
        }
        IssueCommand::Reopen { number, repo } => {
            let repo = repo_of(client, &repo).await?;
            let _: Issue = client
                .post_empty(&format!(
                    "/api/v1/repos/{}/issues/{number}/reopen",
                    seg(&repo)
                ))
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
            let v: Issue = client
                .post(
                    &format!("/api/v1/repos/{}/issues/{number}/labels", seg(&repo)),
                    &LabelsBody { add, remove },
                )
                .await?;
            if json {
                output::json(&v);
                return Ok(());
            }
            println!("issue #{number} of {repo}: {}", v.labels.join(", "));
        }
    }
    Ok(())
}
