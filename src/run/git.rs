//! Every git lab starts (ADR 24), on one side or the other of the trust
//! boundary:
//!
//! - **Host side**: git over repositories lab or the operator own (the
//!   registered repo, a mirror, a workspace before its agent ever ran).
//! - **Jail side**: git over what a run controls (its workspace and `.git`)
//!   runs in a [`Jail`]: the run's sandbox view with the workspace read-only
//!   and no network. Whatever the agent put in its `.git` (a config that
//!   names programs, a partial clone's lazy fetch, `alternates` that name a
//!   host file, links) acts on nothing but that sandbox.
//!
//! Every git, on either side, starts with a scrubbed environment (no
//! variable of lab's but the few an HTTP or SSH remote needs), no system
//! config, no hooks, no fsmonitor, no lazy fetch, and no transport but the
//! ones its caller names (`protocol.allow=never`).
//!
//! Invariant: this is the only module that starts git.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::workspace::WorkspaceError;

/// How long local git work may take.
pub(super) const LOCAL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long git may take over the network (a mirror, a push).
pub(super) const FETCH_TIMEOUT: Duration = Duration::from_secs(300);

/// Variables of lab's environment a git of lab's keeps: where programs are,
/// the home (the operator's global config: credentials for a mirror), the
/// locale, and what an HTTP or SSH remote needs. Nothing else (no token).
const KEEP: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "SSH_AUTH_SOCK",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
];

/// A run's sandbox for lab's git over its data: bubblewrap and its
/// arguments up to `--` (the run's view, its workspace read-only, no
/// network; see `sandbox.rs`).
#[derive(Debug, Clone)]
pub struct Jail {
    pub bwrap: PathBuf,
    pub args: Vec<String>,
    /// A folder of lab's the jail may write (a live diff's scratch
    /// repository), bound into it; never the agent's to see.
    pub scratch: Option<PathBuf>,
}

impl Jail {
    /// The jail as one shell command that runs `program` (git's
    /// `--upload-pack` is run by `sh -c`, with the repository's path
    /// appended): every word single-quoted.
    pub(super) fn shell_command(&self, program: &[&str]) -> String {
        let mut s = String::from("exec");
        for w in std::iter::once(self.bwrap.to_string_lossy().as_ref())
            .chain(self.args.iter().map(String::as_str))
            .chain(program.iter().copied())
        {
            s.push(' ');
            s.push_str(&quote(w));
        }
        s
    }
}

/// `w` in single quotes for `sh` (a quote inside as `'\''`).
fn quote(w: &str) -> String {
    format!("'{}'", w.replace('\'', "'\\''"))
}

/// git's full path (found once): the one on `PATH`, which a jail must see
/// too (it lies in the system's folders on a normal install).
pub(super) fn git_program() -> PathBuf {
    static GIT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    GIT.get_or_init(|| {
        super::on_path::find("git")
            .and_then(|p| p.canonicalize().ok())
            .unwrap_or_else(|| PathBuf::from("git"))
    })
    .clone()
}

/// One git invocation's setting: where it runs and with what.
#[derive(Clone, Copy)]
pub(super) struct Git<'a> {
    /// `--git-dir`, else git runs in `dir` (`-C`).
    git_dir: Option<&'a Path>,
    dir: &'a Path,
    work_tree: Option<&'a Path>,
    index: Option<&'a Path>,
    /// No global config either (lab's scratch repositories, a run's).
    isolated: bool,
    jail: Option<&'a Jail>,
    /// The transports allowed (none unless named).
    protocols: &'a [&'a str],
    env: &'a [(&'a str, &'a str)],
    timeout: Duration,
}

impl<'a> Git<'a> {
    /// Host side: git in a repository lab or the operator owns.
    pub(super) fn host(dir: &'a Path) -> Git<'a> {
        Git {
            git_dir: None,
            dir,
            work_tree: None,
            index: None,
            isolated: false,
            jail: None,
            protocols: &[],
            env: &[],
            timeout: LOCAL_TIMEOUT,
        }
    }

    /// Host side, by the repository's git folder (`--git-dir`).
    pub(super) fn host_git_dir(git_dir: &'a Path) -> Git<'a> {
        Git {
            git_dir: Some(git_dir),
            ..Git::host(git_dir)
        }
    }

    /// Jail side: git over a run's `.git`, in `jail` (none only for a run
    /// that was never sandboxed, whose agent had lab's reach anyway: then
    /// on the host with every hardening but the sandbox). No system or
    /// global config.
    pub(super) fn agents(git_dir: &'a Path, jail: Option<&'a Jail>) -> Git<'a> {
        Git {
            isolated: true,
            jail,
            ..Git::host_git_dir(git_dir)
        }
    }

    pub(super) fn work_tree(self, w: &'a Path) -> Self {
        Git {
            work_tree: Some(w),
            ..self
        }
    }

    pub(super) fn index(self, i: &'a Path) -> Self {
        Git {
            index: Some(i),
            ..self
        }
    }

    pub(super) fn isolated(self) -> Self {
        Git {
            isolated: true,
            ..self
        }
    }

    pub(super) fn jail(self, jail: Option<&'a Jail>) -> Self {
        Git { jail, ..self }
    }

    pub(super) fn protocols(self, p: &'a [&'a str]) -> Self {
        Git {
            protocols: p,
            ..self
        }
    }

    pub(super) fn env(self, env: &'a [(&'a str, &'a str)]) -> Self {
        Git { env, ..self }
    }

    pub(super) fn timeout(self, t: Duration) -> Self {
        Git { timeout: t, ..self }
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let git = git_program();
        let mut cmd = match self.jail {
            Some(j) => {
                let mut c = tokio::process::Command::new(&j.bwrap);
                c.args(&j.args).arg(&git);
                c
            }
            None => tokio::process::Command::new(&git),
        };
        match self.git_dir {
            Some(g) => cmd.arg("--git-dir").arg(g),
            None => cmd.arg("-C").arg(self.dir),
        };
        if let Some(w) = self.work_tree {
            cmd.arg("--work-tree").arg(w);
        }
        cmd.current_dir(self.work_tree.unwrap_or(self.dir));
        cmd.args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "protocol.allow=never",
        ]);
        let allows: Vec<String> = self
            .protocols
            .iter()
            .map(|p| format!("protocol.{p}.allow=always"))
            .collect();
        for a in &allows {
            cmd.arg("-c").arg(a);
        }
        cmd.args(args);
        cmd.env_clear();
        if self.jail.is_some() {
            // The jail's own environment: no variable of lab's, not even
            // its home.
            cmd.env(
                "PATH",
                std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
            )
            .env("HOME", "/tmp")
            .env("LANG", "C.UTF-8");
        } else {
            for (k, v) in std::env::vars_os() {
                if k.to_str().is_some_and(|k| KEEP.contains(&k)) {
                    cmd.env(k, v);
                }
            }
        }
        cmd.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "/bin/false")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .envs(self.env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(i) = self.index {
            cmd.env("GIT_INDEX_FILE", i);
        }
        if self.isolated {
            cmd.env("GIT_CONFIG_GLOBAL", "/dev/null");
        }
        cmd
    }

    /// Runs git; its output, at most `cap` bytes of it (git is stopped
    /// there), and whether it was cut.
    pub(super) async fn bytes(
        &self,
        args: &[&str],
        cap: usize,
    ) -> Result<(Vec<u8>, bool), WorkspaceError> {
        let (out, cut, failed) = self.capture(args, cap).await?;
        if let Some((_, err)) = failed {
            return Err(failure(args, &err));
        }
        Ok((out, cut))
    }

    /// Runs git: its output (up to `cap`), whether it was cut, and when it
    /// failed, its exit code and what it printed on stderr.
    #[allow(clippy::type_complexity)]
    pub(super) async fn capture(
        &self,
        args: &[&str],
        cap: usize,
    ) -> Result<(Vec<u8>, bool, Option<(Option<i32>, Vec<u8>)>), WorkspaceError> {
        let mut child = self
            .command(args)
            .spawn()
            .map_err(|e| WorkspaceError(format!("cannot run git: {e}")))?;
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let work = async {
            let mut out = Vec::new();
            let mut buf = vec![0u8; 64 * 1024];
            let mut cut = false;
            // stderr is drained beside stdout (git blocks on a full pipe);
            // its first 64 KiB are kept.
            let read_err = async {
                let mut e = Vec::new();
                let mut b = [0u8; 8192];
                while let Ok(n) = stderr.read(&mut b).await {
                    if n == 0 {
                        break;
                    }
                    let room = (64 * 1024usize).saturating_sub(e.len());
                    e.extend_from_slice(&b[..n.min(room)]);
                }
                e
            };
            let read_out = async {
                loop {
                    let n = stdout.read(&mut buf).await?;
                    if n == 0 {
                        break;
                    }
                    let room = cap - out.len();
                    if n > room {
                        out.extend_from_slice(&buf[..room]);
                        cut = true;
                        // Stopped here: git goes too (its stderr then ends).
                        let _ = child.start_kill();
                        break;
                    }
                    out.extend_from_slice(&buf[..n]);
                }
                Ok::<_, std::io::Error>(())
            };
            let (read, err) = tokio::join!(read_out, read_err);
            read?;
            let status = child.wait().await?;
            if cut {
                return Ok::<_, std::io::Error>((out, true, None));
            }
            Ok((
                out,
                false,
                (!status.success()).then_some((status.code(), err)),
            ))
        };
        tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| {
                WorkspaceError(format!(
                    "git {} took longer than {} s",
                    verb(args),
                    self.timeout.as_secs()
                ))
            })?
            .map_err(|e| WorkspaceError(format!("cannot read git's output: {e}")))
    }

    /// Runs git and returns what it printed, trimmed.
    pub(super) async fn out(&self, args: &[&str]) -> Result<String, WorkspaceError> {
        let (out, _) = self.bytes(args, 16 * 1024 * 1024).await?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// Runs git for its effect.
    pub(super) async fn run(&self, args: &[&str]) -> Result<(), WorkspaceError> {
        self.bytes(args, 1024 * 1024).await.map(|_| ())
    }

    /// A revision's commit id, or `None` when it names none (only an id
    /// made of hexadecimal digits is taken: on the jail side the answer is
    /// the agent's).
    pub(super) async fn commit(&self, rev: &str) -> Option<String> {
        let spec = format!("{rev}^{{commit}}");
        self.bytes(
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &spec,
            ],
            1024,
        )
        .await
        .ok()
        .map(|(o, _)| String::from_utf8_lossy(&o).trim().to_owned())
        .filter(|s| is_object_id(s))
    }
}

/// A full object id (SHA-1 or SHA-256), in hexadecimal.
pub(super) fn is_object_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The subcommand of an argument list, for messages.
fn verb<'a>(args: &[&'a str]) -> &'a str {
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
        } else if *a == "-c" {
            skip = true;
        } else if !a.starts_with('-') {
            return a;
        }
    }
    "?"
}

fn failure(args: &[&str], stderr: &[u8]) -> WorkspaceError {
    WorkspaceError(format!(
        "git {} failed: {}",
        verb(args),
        String::from_utf8_lossy(stderr).trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jail_s_command_is_quoted_word_by_word() {
        let j = Jail {
            bwrap: "/usr/bin/bwrap".into(),
            args: vec!["--bind".into(), "/a b".into(), "/it's".into(), "--".into()],
            scratch: None,
        };
        let s = j.shell_command(&["/usr/bin/git", "upload-pack"]);
        assert_eq!(
            s,
            "exec '/usr/bin/bwrap' '--bind' '/a b' '/it'\\''s' '--' '/usr/bin/git' 'upload-pack'"
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "set -- {}; printf '%s|' \"$@\"",
                s.trim_start_matches("exec ")
            ))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "/usr/bin/bwrap|--bind|/a b|/it's|--|/usr/bin/git|upload-pack|"
        );
    }

    #[test]
    fn verbs_and_ids() {
        assert_eq!(verb(&["-c", "a=b", "rev-parse", "--verify"]), "rev-parse");
        assert!(is_object_id(&"a".repeat(40)));
        assert!(!is_object_id("HEAD"));
        assert!(!is_object_id(&"g".repeat(40)));
    }

    #[tokio::test]
    async fn no_variable_of_lab_s_reaches_git() {
        // SAFETY of the test: the variable is only read by the git started here.
        let dir = tempfile::tempdir().unwrap();
        std::process::Command::new("git")
            .args(["init", "-q"])
            .arg(dir.path())
            .status()
            .unwrap();
        let g = Git::host(dir.path());
        let cmd = g.command(&["var", "-l"]);
        let std = cmd.as_std();
        let envs: Vec<String> = std
            .get_envs()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert!(
            envs.iter()
                .all(|k| KEEP.contains(&k.as_str()) || k.starts_with("GIT_")),
            "{envs:?}"
        );
        assert!(envs.contains(&"GIT_NO_LAZY_FETCH".to_owned()));
        let args: Vec<String> = std
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.windows(2).any(|w| w == ["-c", "protocol.allow=never"]));
        assert!(
            args.windows(2)
                .any(|w| w == ["-c", "core.hooksPath=/dev/null"])
        );
    }
}
