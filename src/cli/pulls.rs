//! `labctl diff RUN` and `labctl pr list|view|merge|close`: a run's changes
//! and the built-in tracker's pull requests. Text goes to a terminal
//! coloured (unless `NO_COLOR`), with every control character an agent may
//! have put in a file name or a line shown as `\xNN`, never sent.

use std::io::IsTerminal;

use clap::Args;

use super::afk::PrCommand;
use super::client::{CliResult, Client, LAUNCH_WAIT, seg};
use super::issues::repo_of;
use super::output::{self, opt, table};
use crate::diff::{Diff, FileDiff};
use crate::issues::PullRequest;
use crate::service::pulls::{MergeDone, PullView};

#[derive(Args)]
pub struct DiffArgs {
    /// Run id.
    pub run: String,
    /// Files and their +/- counts only.
    #[arg(long)]
    pub stat: bool,
    /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
    #[arg(long)]
    pub json: bool,
}

use super::output::clean;

struct Paint(bool);

impl Paint {
    fn new() -> Paint {
        Paint(std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none())
    }
    fn on(&self, code: &str, t: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{t}\x1b[0m")
        } else {
            t.to_owned()
        }
    }
}

fn name(f: &FileDiff) -> String {
    match &f.old_path {
        Some(old) => format!("{} → {}", clean(old), clean(&f.path)),
        None => clean(&f.path),
    }
}

/// `path | +A -R (status)` per file, then the totals.
fn print_stat(d: &Diff, p: &Paint) {
    let (mut add, mut del, mut n) = (0, 0, 0);
    for f in &d.files {
        let (a, r) = (f.added, f.removed);
        add += a;
        del += r;
        n += 1;
        let bin = if f.binary { " binary" } else { "" };
        println!(
            " {} | {} {} ({}{bin})",
            name(f),
            p.on("32", &format!("+{a}")),
            p.on("31", &format!("-{r}")),
            f.status.as_str()
        );
    }
    println!(
        " {n} file{} changed, {} {}{}",
        if n == 1 { "" } else { "s" },
        p.on("32", &format!("+{add}")),
        p.on("31", &format!("-{del}")),
        if d.work_tree {
            " (uncommitted and untracked files included)"
        } else {
            ""
        }
    );
}

/// The whole diff, git-like.
fn print_diff(d: &Diff, p: &Paint) {
    for f in &d.files {
        let path = clean(&f.path);
        let old = f.old_path.as_deref().map_or(path.clone(), clean);
        println!("{}", p.on("1", &format!("--- a/{old}")));
        println!("{}", p.on("1", &format!("+++ b/{path}")));
        if f.binary {
            println!("Binary file ({})", f.status.as_str());
        }
        for line in f.patch.lines() {
            let l = clean(line);
            let code = match line.as_bytes().first() {
                Some(b'+') => "32",
                Some(b'-') => "31",
                Some(b'@') => "36",
                _ => "",
            };
            println!("{}", if code.is_empty() { l } else { p.on(code, &l) });
        }
        if f.truncated {
            println!("{}", p.on("33", "… cut short: larger than lab shows"));
        }
    }
}

pub async fn diff(client: &Client, a: DiffArgs) -> CliResult<()> {
    let d: Diff = client
        .get(&format!("/api/v1/runs/{}/diff", seg(&a.run)))
        .await?;
    if a.json {
        output::json(&d);
        return Ok(());
    }
    let p = Paint::new();
    if a.stat {
        print_stat(&d, &p);
    } else {
        print_diff(&d, &p);
    }
    Ok(())
}

fn pull_line(v: &PullRequest) -> String {
    format!(
        "#{} {} ({}): {} → {}",
        v.number,
        clean(&v.title),
        v.state,
        clean(&v.head),
        v.base
    )
}

/// `labctl pr list|view|merge|close` (`create` is in `afk.rs`).
pub async fn pr(client: &Client, cmd: PrCommand) -> CliResult<()> {
    let p = Paint::new();
    match cmd {
        PrCommand::Create { .. } => unreachable!("handled in afk.rs"),
        PrCommand::List { repo, json } => {
            let r = repo_of(client, &repo).await?;
            let v: Vec<PullRequest> = client
                .get(&format!("/api/v1/repos/{}/pulls", seg(&r)))
                .await?;
            if json {
                output::json(&v);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = v
                .iter()
                .map(|x| {
                    vec![
                        x.number.to_string(),
                        x.state.clone(),
                        clean(&x.title),
                        clean(&x.head),
                        opt(&x.run_id),
                    ]
                })
                .collect();
            table(&["#", "STATE", "TITLE", "BRANCH", "RUN"], &rows);
        }
        PrCommand::View {
            number,
            repo,
            stat,
            json,
        } => {
            let r = repo_of(client, &repo).await?;
            let v: PullView = client
                .get(&format!("/api/v1/repos/{}/pulls/{number}", seg(&r)))
                .await?;
            if json {
                output::json(&v);
                return Ok(());
            }
            println!("{}", pull_line(&v.pull));
            println!("{}", v.pull.url);
            if let Some(run) = v.pull.run_id {
                println!("run {run}");
            }
            if let Some(sha) = &v.merged_sha {
                println!("merged as {sha}");
            }
            let body = &v.pull.body;
            if !body.is_empty() {
                println!(
                    "\n{}\n",
                    body.lines().map(clean).collect::<Vec<_>>().join("\n")
                );
            }
            if let Some(e) = &v.diff_error {
                println!("(no diff: {})", clean(e));
            }
            if let Some(d) = &v.diff {
                print_stat(d, &p);
                if !stat {
                    print_diff(d, &p);
                }
            }
        }
        PrCommand::Merge { number, repo, json } => {
            let r = repo_of(client, &repo).await?;
            let v: MergeDone = client
                .patient(LAUNCH_WAIT)
                .post_empty(&format!("/api/v1/repos/{}/pulls/{number}/merge", seg(&r)))
                .await?;
            if json {
                output::json(&v);
            } else {
                println!(
                    "merged #{number} into {} as {}{}",
                    v.pull.pull.base,
                    v.sha,
                    if v.fast_forward {
                        " (fast-forward)"
                    } else {
                        ""
                    }
                );
            }
        }
        PrCommand::Close { number, repo, json } => {
            let r = repo_of(client, &repo).await?;
            let v: PullView = client
                .post_empty(&format!("/api/v1/repos/{}/pulls/{number}/close", seg(&r)))
                .await?;
            if json {
                output::json(&v);
            } else {
                println!("closed #{number} (its branch stays)");
            }
        }
    }
    Ok(())
}
