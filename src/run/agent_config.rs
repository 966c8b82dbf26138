//! Applies what providers ask of their CLIs' own config files (see
//! `provider::config`): merged into the operator's files, never replacing
//! them. A file lab cannot parse is left alone and the launch says why;
//! writes are atomic and keep the file's permissions.
//!
//! Invariant: only keys a provider names are written; nothing else in those
//! files (credentials included) is read for its meaning or changed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::provider::config::Format;
use crate::provider::{ConfigEdit, ConfigEntry, ConfigFile, ConfigValue};

/// Why an agent's config file was not changed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not valid {format:?} ({source}); lab leaves it alone", path.display())]
    Unparsable {
        path: PathBuf,
        format: Format,
        source: EditError,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Why edits do not apply to a file's text.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Toml(#[from] toml_edit::TomlError),
    #[error("empty path")]
    EmptyPath,
    #[error("not an object")]
    NotAnObject,
    /// A key on the path names something else than a table.
    #[error("'{0}' is not a table")]
    NotATable(String),
}

pub struct AgentConfig {
    home: PathBuf,
    /// One change at a time: edits of one file are read-modify-write.
    lock: tokio::sync::Mutex<()>,
}

impl AgentConfig {
    pub fn new(home: PathBuf) -> AgentConfig {
        AgentConfig {
            home,
            lock: tokio::sync::Mutex::new(()),
        }
    }

    /// The agents' home folder.
    pub fn home(&self) -> &Path {
        &self.home
    }

    fn path(&self, f: &ConfigFile) -> PathBuf {
        f.path(&self.home, |v| std::env::var(v).ok())
    }

    /// Applies edits, file by file.
    pub async fn apply(&self, edits: &[ConfigEdit]) -> Result<(), ConfigError> {
        let _one = self.lock.lock().await;
        let mut by_file: BTreeMap<PathBuf, (ConfigFile, Vec<&ConfigEdit>)> = BTreeMap::new();
        for e in edits {
            by_file
                .entry(self.path(&e.file))
                .or_insert_with(|| (e.file, Vec::new()))
                .1
                .push(e);
        }
        for (path, (file, edits)) in by_file {
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(source) => return Err(ConfigError::Read { path, source }),
            };
            let new = match file.format {
                Format::Json => set_json(&text, &edits),
                Format::Toml => set_toml(&text, &edits),
            }
            .map_err(|source| ConfigError::Unparsable {
                path: path.clone(),
                format: file.format,
                source,
            })?;
            if new != text {
                write_config(&path, &new).map_err(|source| ConfigError::Write {
                    path: path.clone(),
                    source,
                })?;
            }
        }
        Ok(())
    }

    /// Removes entries (a removed workspace's trust). Best effort.
    pub async fn forget(&self, entries: &[ConfigEntry]) {
        let _one = self.lock.lock().await;
        for e in entries {
            let path = self.path(&e.file);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let new = match e.file.format {
                Format::Json => remove_json(&text, &e.path),
                Format::Toml => remove_toml(&text, &e.path),
            };
            if let Some(new) = new.filter(|n| *n != text)
                && let Err(err) = write_config(&path, &new)
            {
                tracing::warn!(file = %path.display(), error = %err, "could not remove a workspace's config entry");
            }
        }
    }
}

fn set_json(text: &str, edits: &[&ConfigEdit]) -> Result<String, EditError> {
    let mut root: Value = if text.trim().is_empty() {
        Value::Object(Default::default())
    } else {
        serde_json::from_str(text)?
    };
    for e in edits {
        let (last, parents) = e.path.split_last().ok_or(EditError::EmptyPath)?;
        let mut cur = &mut root;
        for key in parents {
            let obj = cur.as_object_mut().ok_or(EditError::NotAnObject)?;
            cur = obj
                .entry(key.clone())
                .or_insert_with(|| Value::Object(Default::default()));
        }
        let value = match &e.value {
            ConfigValue::Bool(b) => Value::Bool(*b),
            ConfigValue::Str(s) => Value::String(s.clone()),
        };
        cur.as_object_mut()
            .ok_or(EditError::NotAnObject)?
            .insert(last.clone(), value);
    }
    Ok(serde_json::to_string_pretty(&root)? + "\n")
}

fn remove_json(text: &str, path: &[String]) -> Option<String> {
    let mut root: Value = serde_json::from_str(text).ok()?;
    let (last, parents) = path.split_last()?;
    let mut cur = &mut root;
    for key in parents {
        cur = cur.get_mut(key)?;
    }
    cur.as_object_mut()?.remove(last)?;
    serde_json::to_string_pretty(&root).ok().map(|s| s + "\n")
}

fn set_toml(text: &str, edits: &[&ConfigEdit]) -> Result<String, EditError> {
    let mut doc: toml_edit::DocumentMut = text.parse()?;
    for e in edits {
        let (key, tables) = e.path.split_last().ok_or(EditError::EmptyPath)?;
        let mut cur = doc.as_table_mut();
        for t in tables {
            let item = cur.entry(t).or_insert_with(|| {
                let mut t = toml_edit::Table::new();
                t.set_implicit(true);
                toml_edit::Item::Table(t)
            });
            cur = item
                .as_table_mut()
                .ok_or_else(|| EditError::NotATable(t.clone()))?;
        }
        cur[key.as_str()] = match &e.value {
            ConfigValue::Bool(b) => toml_edit::value(*b),
            ConfigValue::Str(s) => toml_edit::value(s.as_str()),
        };
    }
    Ok(doc.to_string())
}

fn remove_toml(text: &str, path: &[String]) -> Option<String> {
    let mut doc: toml_edit::DocumentMut = text.parse().ok()?;
    let (last, parents) = path.split_last()?;
    let mut cur = doc.as_table_mut();
    for t in parents {
        cur = cur.get_mut(t)?.as_table_mut()?;
    }
    cur.remove(last)?;
    Some(doc.to_string())
}

/// Writes a CLI's config file. A file that exists is rewritten in place,
/// keeping its inode: a sandboxed run has that very file bind-mounted (so
/// its CLI stays logged in and keeps its state), and a rename would both
/// leave running sandboxes holding the old file and, mid-rename, make a
/// starting sandbox fail to find the path. The new text is written over the
/// old and the file then cut to its length, so a reader never sees it empty.
/// A new file is made through a temporary file and a rename (mode 0600).
fn write_config(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Never through a link: the CLI's state folders are writable from inside
    // a run, and a link planted there must not make lab (outside the
    // sandbox) write another of its user's files.
    match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(mut f) => {
            f.seek(SeekFrom::Start(0))?;
            f.write_all(text.as_bytes())?;
            f.set_len(text.len() as u64)?;
            f.sync_all()
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let tmp = path.with_file_name(format!(
                ".{}.lab-{}",
                path.file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("config"),
                std::process::id()
            ));
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{self, SpawnSpec};

    fn spec(ws: &str, model: &str) -> SpawnSpec {
        SpawnSpec {
            model: model.into(),
            working_dir: ws.into(),
            ..SpawnSpec::default()
        }
    }

    #[tokio::test]
    async fn claude_edits_merge_into_the_operators_file_and_go_with_the_workspace() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join(".claude.json");
        std::fs::write(&file, r#"{"oauthAccount":{"email":"me@example.com"},"theme":"dark","projects":{"/mine":{"x":1}}}"#)
            .unwrap();
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let cfg = AgentConfig::new(home.path().to_path_buf());
        let p = provider::get("claude-code").unwrap();
        cfg.apply(&p.prepare(&spec("/ws/1", "opus"))).await.unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(
            v["oauthAccount"]["email"], "me@example.com",
            "credentials untouched"
        );
        assert_eq!(v["theme"], "dark");
        assert_eq!(v["projects"]["/mine"]["x"], 1);
        assert_eq!(v["hasCompletedOnboarding"], true);
        assert_eq!(v["projects"]["/ws/1"]["hasTrustDialogAccepted"], true);
        let mode = std::fs::metadata(&file).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );

        cfg.forget(&p.workspace_entries(Path::new("/ws/1"))).await;
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert!(v["projects"].get("/ws/1").is_none());
        assert_eq!(v["projects"]["/mine"]["x"], 1);
    }

    #[tokio::test]
    async fn codex_edits_keep_the_operators_toml() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join(".codex/config.toml");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            &file,
            "# mine\nmodel = \"gpt-6-sol\"\n\n[mcp_servers.x]\ncommand = \"y\"\n",
        )
        .unwrap();
        let cfg = AgentConfig::new(home.path().to_path_buf());
        let p = provider::get("codex").unwrap();
        cfg.apply(&p.prepare(&spec("/ws/a b", "gpt-5.5")))
            .await
            .unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("# mine\nmodel = \"gpt-6-sol\""), "{text}");
        let doc: toml_edit::DocumentMut = text.parse().unwrap();
        assert_eq!(
            doc["projects"]["/ws/a b"]["trust_level"].as_str(),
            Some("trusted")
        );
        assert_eq!(
            doc["notice"]["model_migrations"]["gpt-5.5"].as_str(),
            Some("gpt-6-sol")
        );
        assert_eq!(doc["mcp_servers"]["x"]["command"].as_str(), Some("y"));
        cfg.forget(&p.workspace_entries(Path::new("/ws/a b"))).await;
        let doc: toml_edit::DocumentMut = std::fs::read_to_string(&file).unwrap().parse().unwrap();
        assert!(doc.get("projects").and_then(|p| p.get("/ws/a b")).is_none());
        assert_eq!(doc["mcp_servers"]["x"]["command"].as_str(), Some("y"));
    }

    #[tokio::test]
    async fn a_file_lab_cannot_parse_is_left_alone() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join(".claude.json");
        std::fs::write(&file, "{ not json").unwrap();
        let cfg = AgentConfig::new(home.path().to_path_buf());
        let e = cfg
            .apply(
                &provider::get("claude-code")
                    .unwrap()
                    .prepare(&spec("/ws", "opus")),
            )
            .await
            .unwrap_err();
        assert!(e.to_string().contains("leaves it alone"), "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{ not json");
    }

    #[test]
    fn errors_say_what_they_always_said() {
        let io = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let path = PathBuf::from("/h/.codex/config.toml");
        for (e, want) in [
            (
                ConfigError::Read {
                    path: path.clone(),
                    source: io(),
                },
                "cannot read /h/.codex/config.toml: permission denied",
            ),
            (
                ConfigError::Write {
                    path: path.clone(),
                    source: io(),
                },
                "cannot write /h/.codex/config.toml: permission denied",
            ),
            (
                ConfigError::Unparsable {
                    path,
                    format: Format::Toml,
                    source: EditError::NotATable("projects".into()),
                },
                "/h/.codex/config.toml is not valid Toml ('projects' is not a table); lab leaves it alone",
            ),
        ] {
            assert_eq!(e.to_string(), want);
        }
        assert_eq!(EditError::EmptyPath.to_string(), "empty path");
        assert_eq!(EditError::NotAnObject.to_string(), "not an object");
    }
}

#[cfg(test)]
mod link_tests {
    use super::write_config;

    /// A run can plant a link where the CLI's config is; lab must not write
    /// through it.
    #[test]
    fn a_config_file_that_is_a_link_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("secret");
        std::fs::write(&target, "keep me").unwrap();
        let link = dir.path().join("config.toml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(write_config(&link, "[projects]\n").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        write_config(&dir.path().join("new.toml"), "x = 1\n").unwrap();
    }
}
