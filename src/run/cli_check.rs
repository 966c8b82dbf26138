//! Asks a real agent CLI whether it accepts an argv, offline: no terminal,
//! no account, a throw-away home, a clean environment. Used by `lab doctor`
//! and by the contract tests; the provider reads the outcome
//! ([`crate::provider::Provider::check_verdict`]).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::provider::{CheckOutcome, CommandLine, Provider, Verdict};

/// How long a CLI gets to answer one check.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// Runs `bin` with the command line's arguments and environment, and reads
/// the outcome. With a sandbox (`bwrap` and the node's policy), the CLI runs
/// in the view a run would give it: its resolved install (links followed,
/// wherever they lead) read-only, a throw-away home and folder writable.
pub async fn check(
    p: &dyn Provider,
    bin: &Path,
    cl: &CommandLine,
    sandbox: Option<(&Path, &super::sandbox::Policy)>,
) -> Verdict {
    let Ok(home) = tempfile::Builder::new().prefix("lab-check-").tempdir() else {
        return Verdict::Unknown("cannot create a temporary home".into());
    };
    let cwd = home.path().join("work");
    let codex = home.path().join(".codex");
    for d in [&cwd, &codex] {
        if let Err(e) = std::fs::create_dir_all(d) {
            return Verdict::Unknown(format!("cannot prepare {}: {e}", d.display()));
        }
    }
    // No background daemon that would outlive the check.
    let _ = std::fs::write(
        codex.join("config.toml"),
        "[features]\ndaemon_auto_start = false\n",
    );
    let mut cmd = match sandbox {
        Some((bwrap, policy)) => {
            let (real, install) = match super::sandbox::install_of(bin, policy) {
                Ok(found) => found,
                Err(why) => return Verdict::Unknown(why),
            };
            let home = home.path().to_path_buf();
            let mut c = tokio::process::Command::new(bwrap);
            c.args(
                super::sandbox::RunSandbox {
                    policy,
                    workspace: &cwd,
                    workspace_writable: true,
                    read_only: &[install],
                    read_only_files: &[],
                    writable: std::slice::from_ref(&home),
                    network: true,
                    operator_paths: true,
                }
                .args(),
            )
            .arg(real);
            c
        }
        None => tokio::process::Command::new(bin),
    };
    cmd.args(&cl.args)
        .current_dir(&cwd)
        .env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        )
        .env("HOME", home.path())
        .env("TERM", "xterm-256color")
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .envs(cl.env.iter().map(|(k, v)| (k, v)));
    match answer(cmd, bin, "").await {
        Ok(o) => p.check_verdict(&o),
        Err(why) => Verdict::Unknown(why),
    }
}

/// Runs a check's command within [`TIMEOUT`]: what it answered, or why it
/// did not (`asked` names what was asked, after the binary).
async fn answer(
    mut cmd: tokio::process::Command,
    bin: &Path,
    asked: &str,
) -> Result<CheckOutcome, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    match tokio::time::timeout(TIMEOUT, cmd.output()).await {
        Err(_) => Err(format!(
            "{} did not answer{asked} within {} s",
            bin.display(),
            TIMEOUT.as_secs()
        )),
        Ok(Err(e)) => Err(format!("cannot run {}: {e}", bin.display())),
        Ok(Ok(out)) => Ok(CheckOutcome {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }),
    }
}

impl super::Runner {
    /// The CLI's own sign-in check ([`Provider::auth_args`]), run outside
    /// any run in a run's conditions: a throw-away home seeded as a run's
    /// is (the operator's credentials and carried keys, copied), the
    /// variables a run inherits, lab's command line. Nothing of a run's is
    /// read: this is lab's own check, on the operator's side of the trust
    /// boundary.
    pub async fn cli_auth(&self, id: crate::provider::ProviderId) -> crate::provider::Auth {
        use crate::provider::Auth;
        let p = id.provider();
        let Some(args) = p.auth_args() else {
            return Auth::Unknown("lab has no sign-in check for this CLI".into());
        };
        let bin = match self.binary_for(id) {
            Ok(b) => b,
            Err(e) => return Auth::Unknown(e.to_string()),
        };
        let Ok(dir) = tempfile::Builder::new().prefix("lab-auth-").tempdir() else {
            return Auth::Unknown("cannot create a temporary home".into());
        };
        let carry = self.carry_keys().await;
        let identity = self.git_identity().await;
        let mut env = self.passed_env(p);
        let home = match p.cli_home() {
            Some(cli) => match super::agent_config::seed(
                dir.path(),
                &super::agent_config::Seed {
                    cli,
                    operator_home: &self.cfg.agent_home,
                    carry: &carry,
                    edits: &[],
                    sandboxed: false,
                    identity: (&identity.0, &identity.1),
                },
            ) {
                Ok(seeded) => {
                    env.insert(
                        cli.env.into(),
                        seeded.cli_dir.to_string_lossy().into_owned(),
                    );
                    seeded.home
                }
                Err(e) => return Auth::Unknown(e.to_string()),
            },
            None => dir.path().to_path_buf(),
        };
        env.insert("HOME".into(), home.to_string_lossy().into_owned());
        let mut cmd = tokio::process::Command::new(&bin);
        cmd.args(args).current_dir(&home).env_clear().envs(&env);
        match answer(cmd, &bin, &format!(" `{}`", args.join(" "))).await {
            Ok(o) => p.auth_verdict(&o),
            Err(why) => Auth::Unknown(why),
        }
    }
}

/// Why a CLI's version is not known.
#[derive(Debug, thiserror::Error)]
pub enum VersionError {
    #[error("{} did not answer `{args}` within {secs} s", bin.display())]
    NoAnswer {
        bin: PathBuf,
        args: String,
        secs: u64,
    },
    #[error("cannot run {}: {source}", bin.display())]
    Run {
        bin: PathBuf,
        source: std::io::Error,
    },
    #[error("unexpected version output {output:?}")]
    Unexpected { output: String },
}

/// The CLI's version, as it prints it (`claude --version`).
pub async fn version(p: &dyn Provider, bin: &Path) -> Result<String, VersionError> {
    let out = tokio::time::timeout(
        TIMEOUT,
        tokio::process::Command::new(bin)
            .args(p.version_args())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| VersionError::NoAnswer {
        bin: bin.to_owned(),
        args: p.version_args().join(" "),
        secs: TIMEOUT.as_secs(),
    })?
    .map_err(|source| VersionError::Run {
        bin: bin.to_owned(),
        source,
    })?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "2.1.332 (Claude Code)", "codex-cli 0.171.0": the first token with a digit.
    text.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .map(str::to_owned)
        .ok_or_else(|| VersionError::Unexpected {
            output: text.trim().to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_errors_say_what_they_always_said() {
        let run = VersionError::Run {
            bin: "/bin/claude".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let odd = VersionError::Unexpected {
            output: "v\"x\"".into(),
        };
        for (e, want) in [
            (
                VersionError::NoAnswer {
                    bin: "/bin/claude".into(),
                    args: "--version".into(),
                    secs: 20,
                },
                "/bin/claude did not answer `--version` within 20 s",
            ),
            (run, "cannot run /bin/claude: entity not found"),
            (odd, r#"unexpected version output "v\"x\"""#),
        ] {
            assert_eq!(e.to_string(), want);
        }
    }
}
