//! Each run's own CLI config (ADR 24): a home of its own
//! (`<data-dir>/runs/<id>/home`) with the CLI's folder in it
//! (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`), seeded by lab before every start:
//! the operator's credentials (bound read-only by the sandbox; copied for a
//! run without one), the account keys of the operator's config, the keys the
//! operator carries (`runs.carry_cli_keys`), the provider's edits (trust,
//! onboarding, notices), and a git identity. Nothing else of the operator's
//! settings reaches a run, and nothing a run writes there reaches another
//! run or the operator's own CLI.
//!
//! Which side of the trust boundary: host side, over a folder the agent
//! writes (on a resume). Every file is reached through descriptors opened
//! without following a link, files are replaced through a temporary file
//! made with `O_EXCL`, and nothing read there is executed.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, Mode, OFlags, mkdirat, openat, renameat, unlinkat};

use crate::provider::ConfigEdit;
use crate::provider::config::{CliHome, FileKind, Format};

mod text;
pub use text::EditError;

/// The most of a config file lab reads.
const MAX_CONFIG: u64 = 4 << 20;

/// Why a run's CLI config could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot make the run's {what}: {source}")]
    Make {
        what: String,
        source: std::io::Error,
    },
    /// The operator's file lab seeds from could not be read (a link, not
    /// the format it should be).
    #[error("{} is not valid {format:?} ({why}); fix or remove it", path.display())]
    Operator {
        path: PathBuf,
        format: Format,
        why: String,
    },
}

/// What a start's CLI config needs from lab.
pub struct Seed<'a> {
    pub cli: &'a CliHome,
    /// The operator's home (where their CLI config lies).
    pub operator_home: &'a Path,
    /// Top-level keys of the operator's config files carried into runs.
    pub carry: &'a [String],
    pub edits: &'a [ConfigEdit],
    /// Whether the run has a sandbox to bind the credentials read-only;
    /// else they are copied.
    pub sandboxed: bool,
    /// The git identity commits in the run get by default.
    pub identity: (&'a str, &'a str),
}

/// A run's CLI folder, seeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seeded {
    /// The run's home.
    pub home: PathBuf,
    /// The CLI's folder in it (the value of `CliHome::env`).
    pub cli_dir: PathBuf,
    /// The operator's credential files to bind read-only, as (source,
    /// destination).
    pub credentials: Vec<(PathBuf, PathBuf)>,
}

fn make(what: &str) -> impl Fn(std::io::Error) -> ConfigError + '_ {
    move |source| ConfigError::Make {
        what: what.to_owned(),
        source,
    }
}

fn dir_flags() -> OFlags {
    OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY
}

/// Opens (making it when missing) the folder `name` in `parent`, without
/// following a link.
fn subdir(parent: &OwnedFd, name: &str) -> std::io::Result<OwnedFd> {
    match openat(parent, name, dir_flags(), Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(rustix::io::Errno::NOENT) => {
            mkdirat(parent, name, Mode::from_raw_mode(0o700))?;
            Ok(openat(parent, name, dir_flags(), Mode::empty())?)
        }
        Err(e) => Err(e.into()),
    }
}

/// A file's text in `dir`, if it is a regular file (no link followed).
fn read_at(dir: &OwnedFd, name: &str) -> std::io::Result<Option<String>> {
    let fd = match openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let f = std::fs::File::from(fd);
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut text = String::new();
    f.take(MAX_CONFIG).read_to_string(&mut text)?;
    Ok(Some(text))
}

/// Replaces `name` in `dir` with `bytes`: a temporary file made with
/// `O_EXCL` (never through a link), then a rename over the old entry (a
/// link there is replaced, not followed).
fn write_at(dir: &OwnedFd, name: &str, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut rnd = [0u8; 6];
    getrandom::fill(&mut rnd).map_err(|e| std::io::Error::other(e.to_string()))?;
    let tmp = format!(".{name}.lab-{}", hex::encode(rnd));
    let fd = openat(
        dir,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )?;
    let mut f = std::fs::File::from(fd);
    // No fsync: the files are made again before every start.
    let wrote = f.write_all(bytes);
    if let Err(e) = wrote.and_then(|()| Ok(renameat(dir, tmp.as_str(), dir, name)?)) {
        let _ = unlinkat(dir, tmp.as_str(), AtFlags::empty());
        return Err(e);
    }
    Ok(())
}

/// Makes sure `name` in `dir` is an empty regular file of lab's making,
/// for a read-only bind over it (a link or a folder there is removed).
fn placeholder(dir: &OwnedFd, name: &str) -> std::io::Result<()> {
    match read_at(dir, name) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => write_at(dir, name, b"", 0o600),
        Err(_) => {
            let _ = unlinkat(dir, name, AtFlags::empty());
            let _ = unlinkat(dir, name, AtFlags::REMOVEDIR);
            write_at(dir, name, b"", 0o600)
        }
    }
}

/// The operator's copy of a file: its text, if it is a regular file (never
/// read through a link).
fn operator_text(path: &Path) -> std::io::Result<Option<String>> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(None);
    };
    let dir = match openat(
        CWD,
        dir,
        OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::RDONLY,
        Mode::empty(),
    ) {
        Ok(d) => d,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    read_at(&dir, &name.to_string_lossy())
}

/// Makes and seeds run `run_dir`'s home and CLI folder for a start.
pub fn seed(run_dir: &Path, s: &Seed<'_>) -> Result<Seeded, ConfigError> {
    let run = openat(CWD, run_dir, dir_flags(), Mode::empty()).map_err(|e| ConfigError::Make {
        what: "folder".into(),
        source: e.into(),
    })?;
    let home_fd = subdir(&run, "home").map_err(make("home"))?;
    let cli_fd = subdir(&home_fd, s.cli.dir).map_err(make(s.cli.dir))?;
    let home = run_dir.join("home");
    let cli_dir = home.join(s.cli.dir);
    // git's identity for the run's commits (the agent may change it in its
    // own run): the operator's name and address, nothing else of theirs.
    if read_at(&home_fd, ".gitconfig").ok().flatten().is_none() {
        let (name, email) = s.identity;
        let text = format!(
            "[user]\n\tname = {}\n\temail = {}\n",
            text::git_quote(name),
            text::git_quote(email)
        );
        write_at(&home_fd, ".gitconfig", text.as_bytes(), 0o600).map_err(make(".gitconfig"))?;
    }
    let env = |k: &str| std::env::var(k).ok();
    let mut credentials = Vec::new();
    for f in s.cli.files {
        let operator = s.cli.operator_file(f, s.operator_home, env);
        match f.kind {
            FileKind::Credential => {
                if operator.symlink_metadata().is_err() {
                    continue;
                }
                if s.sandboxed {
                    placeholder(&cli_fd, f.name).map_err(make(f.name))?;
                    credentials.push((operator, cli_dir.join(f.name)));
                } else if let Ok(Some(text)) = operator_text(&operator) {
                    write_at(&cli_fd, f.name, text.as_bytes(), 0o600).map_err(make(f.name))?;
                }
            }
            FileKind::Config {
                format,
                credential_keys,
            } => {
                let edits: Vec<&ConfigEdit> =
                    s.edits.iter().filter(|e| e.file.name == f.name).collect();
                let mine = read_at(&cli_fd, f.name).ok().flatten();
                let base = match mine {
                    Some(t) => t,
                    None => {
                        let keys: Vec<&str> = credential_keys
                            .iter()
                            .copied()
                            .chain(s.carry.iter().map(String::as_str))
                            .collect();
                        match operator_text(&operator) {
                            Ok(Some(text)) if !keys.is_empty() => {
                                text::carried(format, &text, &keys).map_err(|why| {
                                    ConfigError::Operator {
                                        path: operator.clone(),
                                        format,
                                        why,
                                    }
                                })?
                            }
                            _ => String::new(),
                        }
                    }
                };
                if edits.is_empty() && base.is_empty() {
                    continue;
                }
                // A file the agent broke in its own run starts again from lab's.
                let new = text::edited(format, &base, &edits)
                    .or_else(|_| text::edited(format, "", &edits))
                    .map_err(|e| ConfigError::Make {
                        what: f.name.to_owned(),
                        source: std::io::Error::other(e.to_string()),
                    })?;
                write_at(&cli_fd, f.name, new.as_bytes(), 0o600).map_err(make(f.name))?;
            }
        }
    }
    Ok(Seeded {
        home,
        cli_dir,
        credentials,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{self, SpawnSpec};
    use serde_json::Value;

    fn spec(ws: &str, model: &str) -> SpawnSpec {
        SpawnSpec {
            model: model.into(),
            working_dir: ws.into(),
            ..SpawnSpec::default()
        }
    }

    fn seed_for(
        p: &dyn provider::Provider,
        run: &Path,
        home: &Path,
        carry: &[String],
        sandboxed: bool,
    ) -> Seeded {
        std::fs::create_dir_all(run).unwrap();
        seed(
            run,
            &Seed {
                cli: p.cli_home().unwrap(),
                operator_home: home,
                carry,
                edits: &p.prepare(&spec("/ws/1", "gpt-5.5")),
                sandboxed,
                identity: ("Ann \"A\"", "ann@example.com"),
            },
        )
        .unwrap()
    }

    /// The API key lab passes on is approved as Claude Code records it (its
    /// last 20 characters), over an operator's earlier "No".
    #[test]
    fn lab_s_api_key_is_approved_in_the_run_s_own_config() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("op");
        std::fs::create_dir_all(&home).unwrap();
        let key = "sk-ant-api03-0123456789abcdefghijKLMNOPQRST";
        std::fs::write(
            home.join(".claude.json"),
            r#"{"customApiKeyResponses":{"approved":["old"],"rejected":["KLMNOPQRST"]}}"#,
        )
        .unwrap();
        let p = provider::get("claude-code").unwrap();
        let env = std::collections::BTreeMap::from([("ANTHROPIC_API_KEY".to_owned(), key.into())]);
        let approval = p.approvals(&env).expect("a key to approve");
        assert!(
            !approval.what.contains("KLMNOPQRST"),
            "the page never shows the key"
        );
        let mut edits = p.prepare(&spec("/ws/1", "sonnet"));
        edits.extend(approval.edits);
        let run = dir.path().join("runs/1");
        std::fs::create_dir_all(&run).unwrap();
        let s = seed(
            &run,
            &Seed {
                cli: p.cli_home().unwrap(),
                operator_home: &home,
                carry: &[],
                edits: &edits,
                sandboxed: true,
                identity: ("a", "a@example.com"),
            },
        )
        .unwrap();
        let cfg: Value =
            serde_json::from_str(&std::fs::read_to_string(s.cli_dir.join(".claude.json")).unwrap())
                .unwrap();
        let tail = "abcdefghijKLMNOPQRST";
        assert_eq!(
            cfg["customApiKeyResponses"],
            serde_json::json!({"approved": [tail], "rejected": []}),
            "{cfg}"
        );
        assert_eq!(cfg["projects"]["/ws/1"]["hasTrustDialogAccepted"], true);
        // No key, nothing to approve; Codex has no such dialog.
        assert!(p.approvals(&Default::default()).is_none());
        let blank =
            std::collections::BTreeMap::from([("ANTHROPIC_API_KEY".to_owned(), " ".into())]);
        assert!(p.approvals(&blank).is_none());
        assert!(provider::get("codex").unwrap().approvals(&env).is_none());
    }

    #[test]
    fn a_claude_run_gets_the_account_and_lab_s_edits_but_none_of_the_operator_s_settings() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("op");
        std::fs::create_dir_all(home.join(".claude")).unwrap();
        std::fs::write(
            home.join(".claude.json"),
            r#"{"oauthAccount":{"email":"me@example.com"},"mcpServers":{"x":{"command":"evil"}},"theme":"dark"}"#,
        )
        .unwrap();
        std::fs::write(
            home.join(".claude/settings.json"),
            r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"evil"}]}]},"env":{"A":"1"}}"#,
        )
        .unwrap();
        std::fs::write(home.join(".claude/.credentials.json"), "{\"secret\":1}").unwrap();
        let p = provider::get("claude-code").unwrap();
        let run = dir.path().join("runs/1");
        let s = seed_for(p, &run, &home, &[], true);
        assert_eq!(s.cli_dir, run.join("home/.claude"));
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(s.cli_dir.join(".claude.json")).unwrap())
                .unwrap();
        assert_eq!(v["oauthAccount"]["email"], "me@example.com");
        assert!(v.get("mcpServers").is_none(), "{v}");
        assert!(v.get("theme").is_none(), "{v}");
        assert_eq!(v["hasCompletedOnboarding"], true);
        assert_eq!(v["projects"]["/ws/1"]["hasTrustDialogAccepted"], true);
        assert!(!s.cli_dir.join("settings.json").exists());
        // The credentials are bound, never copied, for a sandboxed run.
        assert_eq!(
            s.credentials,
            vec![(
                home.join(".claude/.credentials.json"),
                s.cli_dir.join(".credentials.json")
            )]
        );
        assert_eq!(
            std::fs::read_to_string(s.cli_dir.join(".credentials.json")).unwrap(),
            ""
        );
        let git = std::fs::read_to_string(run.join("home/.gitconfig")).unwrap();
        assert!(git.contains("name = \"Ann \\\"A\\\"\""), "{git}");

        // Carried keys come along; the operator chose them.
        let run2 = dir.path().join("runs/2");
        let s = seed_for(p, &run2, &home, &["env".into(), "mcpServers".into()], false);
        let set: Value = serde_json::from_str(
            &std::fs::read_to_string(s.cli_dir.join("settings.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(set["env"]["A"], "1");
        assert!(set.get("hooks").is_none());
        // Without a sandbox, the credentials are copied.
        assert!(s.credentials.is_empty());
        assert_eq!(
            std::fs::read_to_string(s.cli_dir.join(".credentials.json")).unwrap(),
            "{\"secret\":1}"
        );
    }

    #[test]
    fn a_codex_run_gets_lab_s_config_and_keeps_its_own_on_resume() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("op");
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::fs::write(
            home.join(".codex/config.toml"),
            "notify = [\"evil\"]\nmodel = \"x\"\n",
        )
        .unwrap();
        let p = provider::get("codex").unwrap();
        let run = dir.path().join("runs/1");
        let s = seed_for(p, &run, &home, &[], true);
        let text = std::fs::read_to_string(s.cli_dir.join("config.toml")).unwrap();
        assert!(!text.contains("evil"), "{text}");
        let doc: toml_edit::DocumentMut = text.parse().unwrap();
        assert_eq!(
            doc["projects"]["/ws/1"]["trust_level"].as_str(),
            Some("trusted")
        );
        assert_eq!(
            doc["notice"]["model_migrations"]["gpt-5.5"].as_str(),
            Some("gpt-6-sol")
        );
        // A resume keeps what the run wrote in its own file.
        std::fs::write(s.cli_dir.join("config.toml"), "mine = 1\n").unwrap();
        let s = seed_for(p, &run, &home, &[], true);
        let text = std::fs::read_to_string(s.cli_dir.join("config.toml")).unwrap();
        assert!(
            text.contains("mine = 1") && text.contains("trusted"),
            "{text}"
        );
    }

    #[test]
    fn links_a_run_planted_are_replaced_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("op");
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::fs::write(home.join(".codex/auth.json"), "{}").unwrap();
        let target = dir.path().join("host-file");
        std::fs::write(&target, "keep me").unwrap();
        let p = provider::get("codex").unwrap();
        let run = dir.path().join("runs/1");
        let s = seed_for(p, &run, &home, &[], true);
        // The run links its config and its credential placeholder to a
        // host file, and leaves a link at a temporary name.
        for name in ["config.toml", "auth.json"] {
            std::fs::remove_file(s.cli_dir.join(name)).unwrap();
            std::os::unix::fs::symlink(&target, s.cli_dir.join(name)).unwrap();
        }
        seed_for(p, &run, &home, &[], true);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        assert!(
            !s.cli_dir
                .join("config.toml")
                .symlink_metadata()
                .unwrap()
                .file_type()
                .is_symlink()
        );
        // Its CLI folder itself a link: refused, nothing written there.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::remove_dir_all(&s.cli_dir).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &s.cli_dir).unwrap();
        let e = seed(
            &run,
            &Seed {
                cli: p.cli_home().unwrap(),
                operator_home: &home,
                carry: &[],
                edits: &[],
                sandboxed: true,
                identity: ("a", "b"),
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains(".codex"), "{e}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }

    #[test]
    fn an_operator_file_lab_cannot_parse_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("op");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join(".claude.json"), "{ not json").unwrap();
        let p = provider::get("claude-code").unwrap();
        let run = dir.path().join("runs/1");
        std::fs::create_dir_all(&run).unwrap();
        let e = seed(
            &run,
            &Seed {
                cli: p.cli_home().unwrap(),
                operator_home: &home,
                carry: &[],
                edits: &[],
                sandboxed: true,
                identity: ("a", "b"),
            },
        )
        .unwrap_err();
        assert!(
            e.to_string().contains(".claude.json is not valid Json"),
            "{e}"
        );
    }
}
