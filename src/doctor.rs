//! `lab doctor`: is this machine ready to run agents? tmux, git, the data
//! dir, the database, for each provider: its CLI, its version against the
//! one lab was checked with, and whether it accepts lab's argv; and for
//! each forge repo: the account lab's token acts as and the permissions it
//! has of those lab needs.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use tokio::time::{Instant, timeout_at};

use serde::{Deserialize, Serialize};

use crate::domain::{Defaults, RunKind};
use crate::issues::{ForgeIdentity, SourceError, Sources, TokenNeed};
use crate::provider::{Provider, ProviderId, SpawnSpec, Verdict};
use crate::repo::Repo;
use crate::resolve::{Request, resolve};
use crate::run::{Runner, cli_check};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    Warn,
    Error,
}

/// One thing checked.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Finding {
    /// What was checked: `tmux`, `git`, `data dir`, `database`, a provider
    /// id, `forge <repo>`.
    pub area: String,
    pub level: Level,
    pub message: String,
    /// What to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// A forge repo's: each permission lab needs of its token, and whether
    /// the token has it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<TokenNeed>,
}

fn finding(area: &str, level: Level, message: impl Into<String>, fix: Option<String>) -> Finding {
    Finding {
        area: area.to_owned(),
        level,
        message: message.into(),
        fix,
        permissions: Vec::new(),
    }
}

/// The longest the doctor takes. Its checks run side by side and a CLI gets
/// [`cli_check::TIMEOUT`] per check, so this is a backstop: whatever has not
/// answered by then (tmux, git, the database, a CLI) is reported as such.
pub const LIMIT: Duration = Duration::from_secs(cli_check::TIMEOUT.as_secs() + 5);

/// Everything, in a stable order, within [`LIMIT`].
pub async fn diagnose(runner: &Runner, sources: &Sources) -> Vec<Finding> {
    let deadline = Instant::now() + LIMIT;
    let repos: Vec<Repo> = timeout_at(deadline, runner.store().repos())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let providers = async {
        let each = ProviderId::all().map(|id| {
            let in_use = repos.iter().any(|r| id == r.provider.as_str());
            provider_findings(runner, id, in_use, deadline)
        });
        futures_util::future::join_all(each).await.concat()
    };
    let forges = async {
        let each = repos
            .iter()
            .filter(|r| r.issues.source != crate::repo::issue_source::SourceKind::Builtin)
            .map(|r| async move {
                let area = format!("forge {}", r.name);
                let what = format!("the forge of {}", r.name);
                within(deadline, &area, &what, forge(sources, r)).await
            });
        futures_util::future::join_all(each).await.concat()
    };
    let (tmux, git, database, providers, forges) = tokio::join!(
        within(deadline, "tmux", "tmux", async { vec![tmux(runner).await] }),
        within(deadline, "git", "git", async { vec![git().await] }),
        within(deadline, "database", "the database", async {
            vec![database(runner).await]
        }),
        providers,
        forges,
    );
    let mut out = [
        tmux,
        git,
        vec![
            sandbox(&runner.cfg().sandbox, runner.cfg().sandbox_policy.userns),
            limits(&runner.cfg().cgroups),
        ],
        data_dir(&runner.cfg().data_dir),
        database,
    ]
    .concat();
    out.extend(providers);
    out.extend(forges);
    out.extend(repos.iter().filter_map(config_file));
    out
}

/// A repo whose newest `.lab.toml` lab refused (issue 27): what it uses
/// instead, and what to fix.
fn config_file(repo: &Repo) -> Option<Finding> {
    let error = repo.config.error.as_deref()?;
    let kept = match &repo.config.commit {
        Some(c) => format!(
            "lab uses the last valid version (commit {})",
            c.chars().take(12).collect::<String>()
        ),
        None => "lab uses none (no valid version was ever read)".to_owned(),
    };
    Some(finding(
        &format!("config {}", repo.name),
        Level::Warn,
        format!("{error}; {kept}"),
        Some(format!(
            "fix .lab.toml on {}'s default branch ({}): it is read again at the next tick",
            repo.name, repo.default_branch
        )),
    ))
}

/// A forge repo: the account lab acts as, and its token's permissions.
async fn forge(sources: &Sources, repo: &Repo) -> Vec<Finding> {
    let source = sources.of(repo);
    let (identity, access) = tokio::join!(sources.identity(repo), source.access());
    vec![forge_finding(repo, identity, access)]
}

/// What a forge repo's identity and permissions come to.
fn forge_finding(
    repo: &Repo,
    identity: Result<Option<ForgeIdentity>, SourceError>,
    access: Result<Vec<TokenNeed>, SourceError>,
) -> Finding {
    let area = format!("forge {}", repo.name);
    let on = repo.issues.forge_repo.as_deref().unwrap_or("?");
    let fix_token = format!(
        "give lab a token for {on} with the permissions the \"Forge tokens\" table of docs/afk.md \
         lists, then: labctl repo set {} --forge-token - (reads it from standard input), or the repo page",
        repo.name
    );
    let (identity, needs) = match (identity, access) {
        (Ok(i), Ok(n)) => (i, n),
        (Err(e), _) | (_, Err(e)) => {
            return finding(
                &area,
                Level::Error,
                format!("lab cannot use its token on {on}: {e}"),
                Some(fix_token),
            );
        }
    };
    let who = identity
        .as_ref()
        .map_or("an account lab could not read".to_owned(), |i| {
            format!("@{}", i.login)
        });
    let missing: Vec<&TokenNeed> = needs.iter().filter(|n| n.missing()).collect();
    let unsaid: Vec<&str> = needs
        .iter()
        .filter(|n| n.granted.is_none() && !n.optional)
        .map(|n| n.permission.as_str())
        .collect();
    let mut level = Level::Ok;
    let mut message = format!("lab acts as {who} on {on}");
    let mut fix = None;
    if !missing.is_empty() {
        level = if missing.iter().any(|n| !n.optional) {
            Level::Error
        } else {
            Level::Warn
        };
        let list: Vec<String> = missing
            .iter()
            .map(|n| format!("{} ({})", n.permission, n.used_for))
            .collect();
        message.push_str(&format!("; its token lacks {}", list.join(", ")));
        fix = Some(fix_token);
    } else {
        message.push_str("; its token has every permission lab could check");
    }
    if !unsaid.is_empty() {
        message.push_str(&format!(
            " (the forge does not show a token's {}: make sure it has them)",
            unsaid.join(", ")
        ));
    }
    if identity.as_ref().is_some_and(|i| i.is_operator) {
        level = level.max(Level::Warn);
        message.push_str(
            ". It is the repo owner's own account: lab takes that account's comments on its pull \
             requests as a person's, and no forge lets an author request changes on their own pull request",
        );
        fix.get_or_insert_with(|| {
            "give lab an account of its own (a machine user or a bot) and its token, so reviews \
             can request changes"
                .to_owned()
        });
    }
    Finding {
        permissions: needs,
        ..finding(&area, level, message, fix)
    }
}

/// Whether runs are sandboxed here (probed when lab started).
fn sandbox(a: &crate::run::sandbox::Availability, userns: bool) -> Finding {
    use crate::run::sandbox::Availability;
    match a {
        Availability::Ready(bwrap) => finding(
            "sandbox",
            if userns { Level::Ok } else { Level::Warn },
            format!(
                "runs start in a bubblewrap sandbox ({}) that shows them the system's folders, \
                 their CLI, their repo's objects and their own folders, nothing else of the host \
                 (ADR 24); {}",
                bwrap.display(),
                if userns {
                    format!(
                        "agents are user {} of a user namespace of their own, with no capabilities",
                        crate::run::sandbox::AGENT_UID
                    )
                } else {
                    "this kernel refuses user namespaces, so agents have lab's own user id".into()
                }
            ),
            (!userns).then(|| {
                "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)"
                    .to_owned()
            }),
        ),
        Availability::Missing { why, fix } => finding(
            "sandbox",
            Level::Error,
            format!(
                "runs cannot be sandboxed: {why}; a run that would ask nobody (an AFK run, \
                 Claude's bypassPermissions or dontAsk, Codex's never) is refused"
            ),
            Some(fix.clone()),
        ),
    }
}

/// Whether runs' memory and processes are capped here (probed when lab
/// started).
fn limits(c: &crate::run::cgroup::Cgroups) -> Finding {
    use crate::run::cgroup::Cgroups;
    match c {
        Cgroups::None { why } => finding(
            "limits",
            Level::Error,
            format!(
                "runs cannot be limited here ({why}): no memory or process cap applies, and a run \
                 that would ask nobody is refused unless unsandboxed runs are allowed"
            ),
            Some(
                "run lab as root, or where the cgroup v2 memory and pids controllers are \
                 delegated to it (systemd: Delegate=yes); or allow such runs with \
                 labctl settings set --allow-unsandboxed true"
                    .to_owned(),
            ),
        ),
        c => finding(
            "limits",
            Level::Ok,
            format!(
                "each run has a control group of its own (cgroup {}): runs.memory_max_mb and \
                 runs.pids_max apply",
                c.kind()
            ),
            None,
        ),
    }
}

/// `check`'s findings, or one error saying `what` did not answer in time.
async fn within(
    deadline: Instant,
    area: &str,
    what: &str,
    check: impl Future<Output = Vec<Finding>>,
) -> Vec<Finding> {
    timeout_at(deadline, check).await.unwrap_or_else(|_| {
        vec![finding(
            area,
            Level::Error,
            format!("{what} did not answer within {} s", LIMIT.as_secs()),
            None,
        )]
    })
}

/// The worst level found.
pub fn worst(findings: &[Finding]) -> Level {
    findings.iter().map(|f| f.level).max().unwrap_or(Level::Ok)
}

async fn tmux(runner: &Runner) -> Finding {
    match runner.tmux().version().await {
        Ok(v) => {
            let number = v.trim_start_matches("tmux ").to_owned();
            let (major, minor) = parse_version(&number);
            if (major, minor) < (3, 2) {
                finding(
                    "tmux",
                    Level::Error,
                    format!(
                        "{v} is too old: lab needs tmux 3.2 or newer (it was checked with 3.3a)"
                    ),
                    Some("install a newer tmux".into()),
                )
            } else {
                finding(
                    "tmux",
                    Level::Ok,
                    format!("{v}; lab's socket is {}", runner.tmux().socket().display()),
                    None,
                )
            }
        }
        Err(e) => finding(
            "tmux",
            Level::Error,
            e.to_string(),
            Some("install tmux (apt-get install tmux)".into()),
        ),
    }
}

fn parse_version(v: &str) -> (u32, u32) {
    let mut parts = v
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty());
    let major = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let minor = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    (major, minor)
}

async fn git() -> Finding {
    match tokio::process::Command::new("git")
        .arg("--version")
        .output()
        .await
    {
        Ok(o) if o.status.success() => finding(
            "git",
            Level::Ok,
            String::from_utf8_lossy(&o.stdout).trim().to_owned(),
            None,
        ),
        _ => finding(
            "git",
            Level::Error,
            "git is not on PATH: lab makes a git workspace for every run",
            Some("install git".into()),
        ),
    }
}

fn data_dir(dir: &Path) -> Vec<Finding> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    match std::fs::metadata(dir) {
        Err(e) => out.push(finding(
            "data dir",
            Level::Error,
            format!("{}: {e}", dir.display()),
            Some("start `lab serve` once, or pass --data-dir".into()),
        )),
        Ok(m) if m.permissions().mode() & 0o077 != 0 => out.push(finding(
            "data dir",
            Level::Warn,
            format!(
                "{} is readable by others (mode {:o})",
                dir.display(),
                m.permissions().mode() & 0o777
            ),
            Some(format!("chmod 700 {}", dir.display())),
        )),
        Ok(_) => out.push(finding(
            "data dir",
            Level::Ok,
            dir.display().to_string(),
            None,
        )),
    }
    let token = dir.join("token");
    if let Ok(m) = std::fs::metadata(&token)
        && m.permissions().mode() & 0o077 != 0
    {
        out.push(finding(
            "data dir",
            Level::Error,
            format!("the admin token {} is readable by others", token.display()),
            Some(format!("chmod 600 {}", token.display())),
        ));
    }
    out
}

async fn database(runner: &Runner) -> Finding {
    match runner.store().pending_migrations().await {
        Ok(0) => finding(
            "database",
            Level::Ok,
            format!("{}, migrations applied", runner.store().backend()),
            None,
        ),
        Ok(n) => finding(
            "database",
            Level::Warn,
            format!(
                "{}: {n} migration(s) not applied yet",
                runner.store().backend()
            ),
            Some("`lab serve` applies them when it starts".into()),
        ),
        Err(e) => finding(
            "database",
            Level::Error,
            e.to_string(),
            Some("check --database-url".into()),
        ),
    }
}

async fn provider_findings(
    runner: &Runner,
    id: ProviderId,
    in_use: bool,
    deadline: Instant,
) -> Vec<Finding> {
    let p = id.provider();
    let area = p.id();
    let bin = match runner.binary_for(id) {
        Ok(b) => b,
        Err(e) => {
            // Broken only when a repo needs it.
            let (level, fix) = if in_use {
                (Level::Error, format!("repos use {}: install it", p.name()))
            } else {
                (
                    Level::Warn,
                    format!("needed only by repos that use {}", p.name()),
                )
            };
            return vec![finding(area, level, e.to_string(), Some(fix))];
        }
    };
    let cli = format!("{} at {}", p.binary(), bin.display());
    let (version, argv) = tokio::join!(
        within(deadline, area, &cli, version_finding(p, &bin)),
        within(deadline, area, &cli, argv_finding(runner, id, &bin)),
    );
    [version, argv].concat()
}

/// The CLI's version against the one lab was checked with.
async fn version_finding(p: &dyn Provider, bin: &Path) -> Vec<Finding> {
    let area = p.id();
    vec![match cli_check::version(p, bin).await {
        Ok(v) if v == p.checked_version() => finding(
            area,
            Level::Ok,
            format!(
                "{} {v} at {} (the version lab was checked with)",
                p.binary(),
                bin.display()
            ),
            None,
        ),
        Ok(v) => finding(
            area,
            Level::Warn,
            format!(
                "{} {v} at {}: lab was checked with {}; its models, flags and first-run dialogs may differ",
                p.binary(),
                bin.display(),
                p.checked_version()
            ),
            Some(format!(
                "install {} {} to match",
                p.binary(),
                p.checked_version()
            )),
        ),
        Err(e) => finding(area, Level::Error, e.to_string(), None),
    }]
}

/// Would the CLI take what lab gives it? An AFK run with every default.
async fn argv_finding(runner: &Runner, id: ProviderId, bin: &Path) -> Vec<Finding> {
    let p = id.provider();
    let area = p.id();
    let r = resolve(
        id,
        RunKind::Afk,
        &Defaults::default(),
        &Defaults::default(),
        &Request::default(),
    );
    let spec = SpawnSpec {
        session_name: "lab-doctor".into(),
        model: r.model.value.clone(),
        effort: r.effort.value.clone(),
        options: r.option_values(),
        initial_prompt: "Say hello.".into(),
        working_dir: runner.cfg().data_dir.clone(),
        sandboxed: true,
        hook_command: runner.hook_command(p),
        session_id: p.takes_session_id().then(crate::run::new_session_id),
        // A scope, so the check covers the live scope hook's settings too,
        // and a read-only run's deny rules.
        writes: vec!["src/**".into()],
        read_only: true,
    };
    let verdict = cli_check::check(
        p,
        bin,
        &p.command_line(&spec),
        runner
            .cfg()
            .sandbox
            .bwrap()
            .map(|b| (b, &runner.cfg().sandbox_policy)),
    )
    .await;
    vec![match verdict {
        Verdict::Accepted => finding(area, Level::Ok, "accepts lab's command line", None),
        Verdict::Warning(w) => finding(
            area,
            Level::Warn,
            format!("accepts lab's command line with a warning: {w}"),
            Some(format!(
                "lab's catalog may be stale for this version; install {}",
                p.checked_version()
            )),
        ),
        Verdict::Rejected(why) => finding(
            area,
            Level::Error,
            format!("rejects lab's command line: {why}"),
            Some(format!("install {} {}", p.binary(), p.checked_version())),
        ),
        Verdict::Unknown(why) => finding(
            area,
            Level::Warn,
            format!("could not tell whether it accepts lab's command line: {why}"),
            None,
        ),
    }]
}

/// Prints findings for a terminal; returns the worst level.
pub fn print(findings: &[Finding]) -> Level {
    for f in findings {
        let mark = match f.level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Error => "FAIL",
        };
        println!("{mark}  {:<11} {}", f.area, f.message);
        for n in &f.permissions {
            let has = match n.granted {
                Some(true) => "has    ",
                Some(false) => "LACKS  ",
                None => "unknown",
            };
            let optional = if n.optional { ", optional" } else { "" };
            println!(
                "      {:<11} {has} {}: {}{optional}",
                "", n.permission, n.used_for
            );
        }
        if let Some(fix) = &f.fix {
            println!("      {:<11} fix: {fix}", "");
        }
    }
    worst(findings)
}

#[cfg(test)]
mod tests;
