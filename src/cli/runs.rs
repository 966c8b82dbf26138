//! `labctl start | ps | attach | stop | logs | rm`.

use std::io::{IsTerminal, Write};
use std::os::unix::process::CommandExt;
use std::time::Duration;

use clap::Args;

use super::client::{CliError, CliResult, Client, Exit, LAUNCH_WAIT};
use super::output::{self, opt};
use crate::domain::{OutputFormat, RunState};
use crate::http::runs::{RunBody, StartRunBody};
use crate::http::screen::{InputBody, ScreenBody};
use crate::run::screen::SCROLLBACK;

#[derive(Args)]
pub struct StartArgs {
    /// Repo name or id.
    repo: String,
    /// Provider for this run (`labctl providers`; default: the repo's).
    #[arg(long)]
    provider: Option<String>,
    /// Model for this run (default: the repo's resolved manual default).
    #[arg(long)]
    model: Option<String>,
    /// Effort for this run.
    #[arg(long)]
    effort: Option<String>,
    /// A spawn option of the run's provider, KEY=VALUE (repeatable; `labctl
    /// providers` lists them), e.g. `--option permission_mode=acceptEdits`.
    /// An option not given is the CLI's own default.
    #[arg(long = "option", value_name = "KEY=VALUE", value_parser = option_arg)]
    options: Vec<(String, String)>,
    /// The lab node to run it on (labctl node ls); default: the node
    /// labctl talks to, or while it drains, one that takes new runs.
    #[arg(long)]
    node: Option<String>,
    /// First message to the agent.
    #[arg(long, conflicts_with = "prompt_file")]
    prompt: Option<String>,
    /// Read the first message from a file ("-" for standard input).
    #[arg(long)]
    prompt_file: Option<String>,
    /// Attach to the run's tmux session once it runs.
    #[arg(long)]
    attach: bool,
    /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct PsArgs {
    /// Show ended runs too.
    #[arg(long, short)]
    all: bool,
    /// Only this repo's runs.
    #[arg(long)]
    repo: Option<String>,
    /// Only runs in this state.
    #[arg(long)]
    state: Option<String>,
    /// Only this kind of run (manual, afk).
    #[arg(long)]
    kind: Option<String>,
    /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct LogsArgs {
    /// Run id.
    run: String,
    /// Keep printing as the run goes, until it ends: the screen redrawn in
    /// place on a terminal, each new screen after the last otherwise (with
    /// --raw, the bytes as they come).
    #[arg(long, short)]
    follow: bool,
    /// Print the log's raw bytes (colours, cursor moves) instead of the
    /// screen the CLI drew.
    #[arg(long)]
    raw: bool,
    /// With --raw: the text of the bytes, terminal escapes removed (the
    /// output before lab rendered screens).
    #[arg(long, requires = "raw")]
    strip: bool,
}

#[derive(Args)]
pub struct SendArgs {
    /// Run id.
    run: String,
    /// Text to type, as it is (nothing is read as a key name).
    text: Option<String>,
    /// A key to press after the text, in order (repeat it): Enter, Escape,
    /// Tab, BTab, Up, Down, Left, Right, Backspace, Space, PageUp, PageDown,
    /// C-c, C-d, 0-9.
    #[arg(long = "key", short = 'k', value_name = "KEY")]
    keys: Vec<String>,
    /// Do not press Enter after the text (by default a text with no --key
    /// is followed by Enter, like a person answering).
    #[arg(long)]
    no_enter: bool,
}

pub(super) fn run_path(run: &str) -> CliResult<String> {
    let id: i64 = run.parse().map_err(|_| {
        CliError::new(
            Exit::NotFound,
            format!("'{run}' is not a run id (run ids are numbers; see labctl ps)"),
        )
    })?;
    Ok(format!("/api/v1/runs/{id}"))
}

/// The prompt, checked here against lab's own rule (its size above all), so
/// that a prompt too large is named as such, not as a request body too
/// large, and is not sent.
fn read_prompt(a: &StartArgs) -> CliResult<String> {
    let (prompt, from) = match (&a.prompt, a.prompt_file.as_deref()) {
        (Some(p), _) => (p.clone(), "--prompt".to_owned()),
        (None, Some("-")) => (
            std::io::read_to_string(std::io::stdin()).map_err(|e| {
                CliError::failure(format!("reading the prompt from standard input: {e}"))
            })?,
            "the prompt from standard input".to_owned(),
        ),
        (None, Some(f)) => (
            std::fs::read_to_string(f)
                .map_err(|e| CliError::failure(format!("reading {f}: {e}")))?,
            format!("the prompt in {f}"),
        ),
        (None, None) => return Ok(String::new()),
    };
    crate::validate::prompt("prompt", &prompt)
        .map_err(|e| CliError::invalid(format!("{from} {}", e.message)))
}

/// A spinner on stderr while `fut` runs, when stderr is a terminal.
pub(super) async fn with_spinner<T>(
    message: String,
    fut: impl std::future::Future<Output = T>,
) -> T {
    if !std::io::stderr().is_terminal() {
        return fut.await;
    }
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_message(message);
    pb.enable_steady_tick(Duration::from_millis(100));
    let out = fut.await;
    pb.finish_and_clear();
    out
}

/// `KEY=VALUE`, both non-empty.
fn option_arg(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => {
            Ok((k.trim().to_owned(), v.trim().to_owned()))
        }
        _ => Err(format!("'{s}' is not KEY=VALUE")),
    }
}

pub async fn start(client: &Client, a: StartArgs) -> CliResult<()> {
    let prompt = read_prompt(&a)?;
    let body = StartRunBody {
        repo: a.repo.clone(),
        provider: a.provider.clone(),
        model: a.model.clone(),
        effort: a.effort.clone(),
        options: a.options.iter().cloned().collect(),
        prompt: Some(prompt),
        node: a.node.clone(),
    };
    let run: RunBody = with_spinner(
        format!("starting a run of {} (workspace, tmux session)…", a.repo),
        client.patient(LAUNCH_WAIT).post("/api/v1/runs", &body),
    )
    .await?;
    if a.json {
        output::json(&run);
    } else {
        output::run_started(&run);
    }
    if run.state == RunState::Failed {
        return Err(CliError::failure(format!(
            "run {} failed to start: {}",
            run.id,
            opt(&run.state_reason)
        )));
    }
    if a.attach {
        return attach_to(&run);
    }
    Ok(())
}

pub async fn ps(client: &Client, a: PsArgs) -> CliResult<()> {
    let mut q = Vec::new();
    for (k, v) in [("repo", &a.repo), ("state", &a.state), ("kind", &a.kind)] {
        if let Some(v) = v {
            q.push(format!("{k}={}", super::client::seg(v)));
        }
    }
    let path = if q.is_empty() {
        "/api/v1/runs".to_owned()
    } else {
        format!("/api/v1/runs?{}", q.join("&"))
    };
    let mut runs: Vec<RunBody> = client.get(&path).await?;
    runs.retain(|r| a.all || a.state.is_some() || is_live(r.state));
    output::runs(&runs, a.json, a.all);
    Ok(())
}

/// Whether a run state is a live one, or `lost` (a run that awaits a resume
/// is listed with the live ones).
fn is_live(state: RunState) -> bool {
    state.is_active() || state == RunState::Lost
}

pub async fn show(client: &Client, run: &str, as_json: bool) -> CliResult<()> {
    let r: RunBody = client.get(&run_path(run)?).await?;
    output::run_detail(&r, as_json);
    Ok(())
}

pub async fn receipt(client: &Client, run: &str, as_json: bool) -> CliResult<()> {
    let r: crate::http::receipt::ReceiptBody =
        client.get(&format!("{}/receipt", run_path(run)?)).await?;
    output::receipt(&r, as_json);
    Ok(())
}

pub async fn attach(client: &Client, run: &str) -> CliResult<()> {
    let run: RunBody = client.get(&run_path(run)?).await?;
    attach_to(&run)
}

/// Replaces labctl with `tmux attach` to the run's session.
fn attach_to(run: &RunBody) -> CliResult<()> {
    if !is_live(run.state) {
        return Err(CliError::new(
            Exit::Conflict,
            format!(
                "run {} is {}: nothing to attach to (labctl logs {} shows its output)",
                run.id, run.state, run.id
            ),
        ));
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::new(
            Exit::Usage,
            "attach needs a terminal; run it from one (labctl logs and labctl send work without)",
        ));
    }
    let socket = &run.tmux_socket;
    if !std::path::Path::new(socket).exists() {
        // Its node's tmux server is on another machine (issue 29).
        return Err(CliError::new(
            Exit::Conflict,
            format!(
                "run {} lives on lab node '{}', whose tmux server is not on this machine: \
                 attach there, or use labctl send and labctl logs --follow, which work through any node",
                run.id, run.node
            ),
        ));
    }
    let session = format!("={}", run.session);
    let err = std::process::Command::new("tmux")
        .args(["-S", socket, "attach-session", "-t", &session])
        .env_remove("TMUX")
        .exec();
    Err(CliError::failure(format!("cannot run tmux: {err}")))
}

/// `labctl stop`: stopping a run that already ended is no error (the run
/// is where it was asked to be); it says so.
pub async fn stop(client: &Client, run: &str, as_json: bool) -> CliResult<()> {
    let path = format!("{}/stop", run_path(run)?);
    let r: RunBody =
        match with_spinner(format!("stopping run {run}…"), client.post_empty(&path)).await {
            Ok(r) => r,
            Err(e) if e.code == Exit::Conflict => {
                let r: RunBody = client.get(&run_path(run)?).await?;
                if is_live(r.state) {
                    return Err(e);
                }
                if as_json {
                    output::json(&r);
                } else {
                    println!("run {} already ended ({})", r.id, r.state);
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
    if as_json {
        output::json(&r);
    } else {
        println!("run {} {}", r.id, r.state);
    }
    Ok(())
}

pub async fn rm(client: &Client, run: &str) -> CliResult<()> {
    client.delete(&run_path(run)?).await?;
    println!(
        "removed run {run} and its workspace (its branch stays in the repo when it has commits)"
    );
    Ok(())
}

pub async fn logs(client: &Client, a: LogsArgs) -> CliResult<()> {
    if a.raw {
        return raw_logs(client, a).await;
    }
    let unbounded = client.unbounded();
    let client = if a.follow { &unbounded } else { client };
    let base = format!("{}/screen", run_path(&a.run)?);
    // The whole history first, then (following) each screen as it changes.
    let v: ScreenBody = client.get(&format!("{base}?history={SCROLLBACK}")).await?;
    let mut out = std::io::stdout();
    let tty = out.is_terminal();
    let mut offset = v.offset;
    print_screen(&mut out, &v, Head::None)?;
    if !a.follow {
        return Ok(());
    }
    loop {
        if !is_live(v.state) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        let v: ScreenBody = client.get(&base).await?;
        let next = v.offset;
        let live = is_live(v.state);
        if next != offset {
            offset = next;
            print_screen(&mut out, &v, if tty { Head::Redraw } else { Head::Rule })?;
        }
        if !live {
            return Ok(());
        }
    }
}

/// What comes before a screen printed after another.
enum Head {
    None,
    /// Clear the terminal: the screen is redrawn in place.
    Redraw,
    /// A line that says where in the log the next screen is.
    Rule,
}

/// Prints a screen's text without its blank rows at the bottom.
fn print_screen(out: &mut std::io::Stdout, v: &ScreenBody, head: Head) -> CliResult<()> {
    let text = v
        .text
        .as_deref()
        .unwrap_or_default()
        .trim_end_matches(['\n', ' ']);
    let head = match head {
        Head::None => String::new(),
        Head::Redraw => "\x1b[H\x1b[2J".to_owned(),
        Head::Rule => format!("---- run {} at byte {} ----\n", v.run, v.offset),
    };
    writeln!(out, "{head}{text}")
        .and_then(|()| out.flush())
        .map_err(|e| CliError::failure(format!("writing the screen: {e}")))
}

/// The log's bytes, from the start (and as they come, following).
async fn raw_logs(client: &Client, a: LogsArgs) -> CliResult<()> {
    let unbounded = client.unbounded();
    let client = if a.follow { &unbounded } else { client };
    let base = format!("{}/output", run_path(&a.run)?);
    let format = if a.strip {
        OutputFormat::Text
    } else {
        OutputFormat::Raw
    };
    let mut offset: u64 = 0;
    let mut out = std::io::stdout();
    loop {
        let resp = client
            .raw(client.request_get(&format!("{base}?offset={offset}&format={format}")))
            .await?;
        let next = header(&resp, "x-lab-log-offset")
            .and_then(|v| v.parse().ok())
            .unwrap_or(offset);
        let state = header(&resp, "x-lab-run-state").unwrap_or_default();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| client.reading(&e, "reading the output"))?;
        out.write_all(&bytes)
            .and_then(|()| out.flush())
            .map_err(|e| CliError::failure(format!("writing the output: {e}")))?;
        let more = next > offset;
        offset = next;
        if !a.follow {
            return Ok(());
        }
        let live = state.parse::<RunState>().is_ok_and(is_live);
        if !live && !more {
            return Ok(());
        }
        if !more {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// `labctl send`: types into a live run.
pub async fn send(client: &Client, a: SendArgs) -> CliResult<()> {
    let mut keys = a.keys;
    if keys.is_empty() && a.text.is_some() && !a.no_enter {
        keys.push("Enter".into());
    }
    let body = InputBody { text: a.text, keys };
    // lab answers 202 with nothing to read.
    let () = client
        .post(&format!("{}/input", run_path(&a.run)?), &body)
        .await?;
    Ok(())
}

fn header(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers().get(name)?.to_str().ok().map(str::to_owned)
}
