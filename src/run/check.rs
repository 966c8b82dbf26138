//! A repo's check command, run in a run's workspace after a round of its
//! agent (issue 14): in the run's sandbox when the run has one (the command
//! is the operator's, the code it checks is the agent's), bounded in time,
//! with the tail of what it printed kept for the agent's next round.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::runner::Runner;
use super::sandbox;
use crate::domain::Run;
use crate::repo::Repo;

/// The most of a check's output lab keeps (its end).
pub const OUTPUT_TAIL: usize = 8 * 1024;

/// How a check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// Its exit status; `None` when it did not exit on its own (killed at
    /// the time limit, or it could not start).
    pub status: Option<i32>,
    /// The last [`OUTPUT_TAIL`] bytes of what it printed (stdout and stderr
    /// together), as text.
    pub output: String,
}

impl CheckResult {
    pub fn passed(&self) -> bool {
        self.status == Some(0)
    }

    /// One line saying how it ended.
    pub fn summary(&self) -> String {
        match self.status {
            Some(0) => "passed".to_owned(),
            Some(n) => format!("failed with exit status {n}"),
            None => "did not finish".to_owned(),
        }
    }
}

impl Runner {
    /// Runs `command` with `sh -c` in `run`'s workspace, in a sandbox like
    /// its agent's (without the CLI's state), for at most `limit`.
    pub async fn check(
        &self,
        run: &Run,
        repo: &Repo,
        command: &str,
        limit: Duration,
    ) -> CheckResult {
        let Some(ws) = run
            .workspace
            .as_deref()
            .map(Path::new)
            .filter(|p| p.is_dir())
        else {
            return CheckResult {
                status: None,
                output: "the run's workspace is gone".to_owned(),
            };
        };
        let shell = Path::new("/bin/sh");
        let mut cmd = match self.cfg.sandbox.bwrap().filter(|_| run.sandboxed) {
            Some(bwrap) => {
                let args = self.check_sandbox_args(repo, ws);
                let mut c = tokio::process::Command::new(bwrap);
                c.args(args).arg(shell);
                c.envs(sandbox::ENV.iter().copied());
                c
            }
            None => tokio::process::Command::new(shell),
        };
        cmd.arg("-c")
            .arg(command)
            .current_dir(ws)
            .env_clear()
            .envs(super::env::inherited(
                std::env::vars(),
                &[],
                &self.cfg.run_env,
            ))
            .env("HOME", ws)
            .env("LAB_RUN_ID", run.id.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return CheckResult {
                    status: None,
                    output: format!("could not start the check: {e}"),
                };
            }
        };
        let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
        let read = async {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let read_out = async {
                if let Some(o) = out.as_mut() {
                    let _ = o.read_to_end(&mut a).await;
                }
            };
            let read_err = async {
                if let Some(e) = err.as_mut() {
                    let _ = e.read_to_end(&mut b).await;
                }
            };
            tokio::join!(read_out, read_err);
            a.extend_from_slice(&b);
            a
        };
        let waited = tokio::time::timeout(limit, async {
            let (bytes, status) = tokio::join!(read, child.wait());
            (bytes, status)
        })
        .await;
        match waited {
            Ok((bytes, status)) => CheckResult {
                status: status.ok().and_then(|s| s.code()),
                output: tail(&bytes),
            },
            Err(_) => CheckResult {
                status: None,
                output: format!(
                    "the check ran longer than {} s and was ended",
                    limit.as_secs()
                ),
            },
        }
    }
}

/// The last [`OUTPUT_TAIL`] bytes of `bytes` as text, escapes stripped.
fn tail(bytes: &[u8]) -> String {
    let text = strip_ansi_escapes::strip(bytes);
    let from = text.len().saturating_sub(OUTPUT_TAIL);
    String::from_utf8_lossy(&text[from..]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_bounded_and_plain() {
        let long = "x".repeat(OUTPUT_TAIL * 2) + "\x1b[31mend\x1b[0m";
        let t = tail(long.as_bytes());
        assert!(t.len() <= OUTPUT_TAIL);
        assert!(t.ends_with("end"), "{}", &t[t.len() - 10..]);
        let r = CheckResult {
            status: Some(2),
            output: String::new(),
        };
        assert_eq!(
            (r.passed(), r.summary().as_str()),
            (false, "failed with exit status 2")
        );
    }
}
