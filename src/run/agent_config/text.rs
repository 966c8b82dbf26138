//! What lab writes into a run's CLI config files, as text: the operator's
//! keys carried over, lab's edits applied, git's quoting. Pure: text in,
//! text out; the files themselves are `agent_config`'s (descriptors that
//! never follow a link).
//!
//! Which side of the trust boundary: host side, over text the agent may
//! have written (its own config on a resume): parsed as data, never run; a
//! text that does not parse is the caller's to replace.

use serde_json::Value;

use crate::provider::config::Format;
use crate::provider::{ConfigEdit, ConfigValue};

/// A value for git's config file, quoted.
pub(super) fn git_quote(v: &str) -> String {
    let clean: String = v.chars().filter(|c| !c.is_control()).collect();
    format!("\"{}\"", clean.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Only `keys` (top level) of a config file's text, in the same format.
pub(super) fn carried(format: Format, text: &str, keys: &[&str]) -> Result<String, String> {
    match format {
        Format::Json => {
            let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
            let obj = v.as_object().ok_or("not an object")?;
            let kept: serde_json::Map<String, Value> = obj
                .iter()
                .filter(|(k, _)| keys.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if kept.is_empty() {
                return Ok(String::new());
            }
            Ok(
                serde_json::to_string_pretty(&Value::Object(kept)).map_err(|e| e.to_string())?
                    + "\n",
            )
        }
        Format::Toml => {
            let doc: toml_edit::DocumentMut = text
                .parse()
                .map_err(|e: toml_edit::TomlError| e.to_string())?;
            let mut out = toml_edit::DocumentMut::new();
            for (k, item) in doc.iter() {
                if keys.contains(&k) {
                    out.insert(k, item.clone());
                }
            }
            Ok(out.to_string())
        }
    }
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
            ConfigValue::List(l) => Value::Array(l.iter().cloned().map(Value::String).collect()),
        };
        cur.as_object_mut()
            .ok_or(EditError::NotAnObject)?
            .insert(last.clone(), value);
    }
    Ok(serde_json::to_string_pretty(&root)? + "\n")
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
            ConfigValue::List(l) => toml_edit::value(l.iter().collect::<toml_edit::Array>()),
        };
    }
    Ok(doc.to_string())
}

/// `text` with `edits` applied, in its format.
pub(super) fn edited(
    format: Format,
    text: &str,
    edits: &[&ConfigEdit],
) -> Result<String, EditError> {
    match format {
        Format::Json => set_json(text, edits),
        Format::Toml => set_toml(text, edits),
    }
}
