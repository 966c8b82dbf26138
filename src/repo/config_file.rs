//! A repo's configuration as code (issue 27): `.lab.toml` on its default
//! branch may hold the repo's AFK defaults (`[afk]`: `model`, `effort`, the
//! provider's options), knobs (`[knobs]`), `check_command` and `label`.
//! It is checked with the same validators and registry as the API, and
//! refused whole when anything in it is wrong: lab then keeps the last
//! valid version it read. What it sets sits under the operator's own repo
//! settings (the operator's word wins; provenance says `repo file`).
//!
//! The file comes from the repo's default branch, which the operator's
//! repo owns: it is not run data. Its values still reach a run only as
//! checked values (a catalog's model, a registered knob's value).
//!
//! Invariant: no IO; the bytes are read by `run::repo_file`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::provider::Provider;
use crate::validate::{self, Errors, FieldError, Invalid};

/// The file's name, at the top of the default branch.
pub const FILE: &str = ".lab.toml";

/// The largest file lab reads.
pub const MAX_BYTES: usize = 64 * 1024;

/// What a valid `.lab.toml` says, checked and canonical.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub knobs: crate::knob::Set,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl RepoFile {
    /// What the file sets, each under its own path in the file
    /// (`label`, `afk.model`, `knobs.writes`), in the file's order of
    /// tables: for the repo page and `labctl repo show`.
    pub fn entries(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut put = |k: String, v: &str| out.push((k, v.to_owned()));
        if let Some(l) = &self.label {
            put("label".into(), l);
        }
        if let Some(c) = &self.check_command {
            put("check_command".into(), c);
        }
        if let Some(m) = &self.model {
            put("afk.model".into(), m);
        }
        if let Some(e) = &self.effort {
            put("afk.effort".into(), e);
        }
        for (k, v) in &self.options {
            put(format!("afk.{k}"), v);
        }
        for (k, v) in &self.knobs {
            put(format!("knobs.{k}"), &v.shown());
        }
        out
    }
}

/// What lab last made of a repo's `.lab.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigState {
    /// The commit of the default branch the kept file was read at.
    pub commit: Option<String>,
    /// The last valid file (`None`: there never was one, or the repo has
    /// none now).
    pub file: Option<RepoFile>,
    /// Why the newest read was refused, when it was (the kept file is then
    /// an older one).
    pub error: Option<String>,
}

/// What lab keeps after reading the file again: `read` is the default
/// branch's commit and what its file said (`None`: the branch has no
/// `.lab.toml`). A valid file replaces the kept one; a refused one keeps the
/// last valid version and records why the newer one was refused.
pub fn next_state(
    current: &ConfigState,
    read: Option<(String, Result<RepoFile, Invalid>)>,
) -> ConfigState {
    match read {
        None => ConfigState::default(),
        Some((commit, Ok(file))) => ConfigState {
            commit: Some(commit),
            file: Some(file),
            error: None,
        },
        Some((commit, Err(e))) => ConfigState {
            commit: current.commit.clone(),
            file: current.file.clone(),
            error: Some(format!(
                "{FILE} at {} is refused: {e}",
                commit.chars().take(12).collect::<String>()
            )),
        },
    }
}

/// The file's bytes as its text, checked: not UTF-8, or longer than
/// [`MAX_BYTES`], is refused like a wrong value.
pub fn read(provider: &dyn Provider, bytes: &[u8], cut: bool) -> Result<RepoFile, Invalid> {
    if cut || bytes.len() > MAX_BYTES {
        return Err(FieldError::new(FILE, format!("is longer than {MAX_BYTES} bytes")).into());
    }
    let text =
        std::str::from_utf8(bytes).map_err(|_| FieldError::new(FILE, "is not UTF-8 text"))?;
    parse(provider, text)
}

const TOP_KEYS: &[&str] = &["afk", "knobs", "check_command", "label"];

/// The file's text checked against the repo's provider: every wrong key and
/// value, named as `.lab.toml`'s own paths (`afk.model`, `knobs.writes`).
pub fn parse(provider: &dyn Provider, text: &str) -> Result<RepoFile, Invalid> {
    if text.len() > MAX_BYTES {
        return Err(FieldError::new(
            FILE,
            format!("is {} bytes; at most {MAX_BYTES} are read", text.len()),
        )
        .into());
    }
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        FieldError::new(FILE, format!("is not valid TOML: {}", e.message().trim()))
    })?;
    let mut errs = Errors::default();
    let mut out = RepoFile::default();
    for (key, item) in doc.as_table().iter() {
        match key {
            "afk" => match item.as_table_like() {
                Some(t) => afk(provider, t, &mut out, &mut errs),
                None => errs.push(FieldError::new("afk", "must be a table ([afk])")),
            },
            "knobs" => match item.as_table_like() {
                Some(t) => {
                    let object = t
                        .iter()
                        .map(|(k, v)| (k.to_owned(), json(v)))
                        .collect::<serde_json::Map<_, _>>();
                    if let Some(set) = errs.check_all(crate::knob::parse(
                        "knobs",
                        &crate::knob::Input::Json(object),
                    )) {
                        out.knobs = set;
                    }
                }
                None => errs.push(FieldError::new("knobs", "must be a table ([knobs])")),
            },
            "check_command" => match item.as_str() {
                Some(s) if s.trim().is_empty() => {}
                Some(s) => {
                    out.check_command = errs.check(validate::check_command("check_command", s))
                }
                None => errs.push(FieldError::new("check_command", "must be a string")),
            },
            "label" => match item.as_str() {
                Some(s) => out.label = errs.check(validate::label("label", s)),
                None => errs.push(FieldError::new("label", "must be a string")),
            },
            other => errs.push(
                FieldError::new(
                    other,
                    format!(
                        "unknown key '{}'; known keys: {}",
                        validate::shown(other),
                        TOP_KEYS.join(", ")
                    ),
                )
                .with_allowed(TOP_KEYS),
            ),
        }
    }
    errs.finish()?;
    Ok(out)
}

fn afk(
    provider: &dyn Provider,
    table: &dyn toml_edit::TableLike,
    out: &mut RepoFile,
    errs: &mut Errors,
) {
    for (key, item) in table.iter() {
        let field = format!("afk.{key}");
        let text = match item.as_value() {
            Some(toml_edit::Value::String(s)) => s.value().clone(),
            Some(toml_edit::Value::Boolean(b)) => b.value().to_string(),
            _ => {
                errs.push(FieldError::new(
                    &field,
                    "must be a string (or a bool for a bool option)",
                ));
                continue;
            }
        };
        match key {
            "model" => out.model = errs.check(validate::model(provider, &field, &text)),
            "effort" => out.effort = errs.check(validate::effort(provider, &field, &text)),
            option => {
                if let Some(v) = errs.check(validate::option(provider, &field, option, &text)) {
                    out.options.insert(option.to_owned(), v);
                }
            }
        }
    }
}

/// A TOML value as the JSON a knob's check takes.
fn json(item: &toml_edit::Item) -> serde_json::Value {
    use serde_json::Value as J;
    match item.as_value() {
        Some(toml_edit::Value::String(s)) => J::String(s.value().clone()),
        Some(toml_edit::Value::Boolean(b)) => J::Bool(*b.value()),
        Some(toml_edit::Value::Integer(i)) => J::from(*i.value()),
        Some(toml_edit::Value::Array(a)) => J::Array(
            a.iter()
                .map(|v| match v {
                    toml_edit::Value::String(s) => J::String(s.value().clone()),
                    other => J::String(other.to_string()),
                })
                .collect(),
        ),
        Some(other) => J::String(other.to_string()),
        None => J::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claude() -> &'static dyn Provider {
        crate::provider::get("claude-code").unwrap()
    }

    #[test]
    fn a_whole_file_is_read_in_canonical_casing() {
        let f = parse(
            claude(),
            r#"
check_command = "cargo test"
label = "agent"

[afk]
model = "OPUS"
effort = "High"
ultracode = true

[knobs]
changeScope = "Surgical"
writes = ["src/**"]
"#,
        )
        .unwrap();
        assert_eq!(f.model.as_deref(), Some("opus"));
        assert_eq!(f.effort.as_deref(), Some("high"));
        assert_eq!(f.options["ultracode"], "true");
        assert_eq!(
            f.knobs["changeScope"],
            crate::knob::Value::Text("surgical".into())
        );
        assert_eq!(f.check_command.as_deref(), Some("cargo test"));
        assert_eq!(f.label.as_deref(), Some("agent"));
    }

    #[test]
    fn every_error_is_named_and_the_file_refused_whole() {
        let e = parse(
            claude(),
            "colour = 1\n[afk]\nmodel = \"gpt-5.5\"\nsandbox = \"read-only\"\n[knobs]\nchangeScope = \"huge\"\n",
        )
        .unwrap_err();
        let fields: Vec<&str> = e.0.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            ["colour", "afk.model", "afk.sandbox", "knobs.changeScope"]
        );
        assert!(
            e.0[0]
                .message
                .contains("known keys: afk, knobs, check_command, label")
        );
    }

    #[test]
    fn a_refused_file_keeps_the_last_valid_one() {
        let good = parse(claude(), "label = \"a\"").unwrap();
        let s1 = next_state(
            &ConfigState::default(),
            Some(("c1".into(), Ok(good.clone()))),
        );
        assert_eq!(
            (s1.commit.as_deref(), s1.file.as_ref(), s1.error.as_deref()),
            (Some("c1"), Some(&good), None)
        );
        let bad = parse(claude(), "label = 3");
        let s2 = next_state(&s1, Some(("c2".into(), bad)));
        assert_eq!(
            s2.commit.as_deref(),
            Some("c1"),
            "the last valid version stays"
        );
        assert_eq!(s2.file.as_ref(), Some(&good));
        assert!(
            s2.error
                .as_deref()
                .unwrap()
                .starts_with(".lab.toml at c2 is refused: label"),
            "{s2:?}"
        );
        assert_eq!(
            next_state(&s2, None),
            ConfigState::default(),
            "a removed file is none"
        );
        assert!(read(claude(), b"\xff", false).is_err());
        assert!(read(claude(), b"label = \"x\"", true).is_err(), "cut short");
    }

    #[test]
    fn broken_or_huge_files_are_refused() {
        let e = parse(claude(), "[afk\nmodel=").unwrap_err();
        assert!(
            e.0[0].message.starts_with("is not valid TOML"),
            "{}",
            e.0[0].message
        );
        let big = format!("label = \"{}\"", "x".repeat(MAX_BYTES));
        assert!(parse(claude(), &big).is_err());
        assert_eq!(parse(claude(), "").unwrap(), RepoFile::default());
    }
}
