//! A knob's value checked against its type: the same rules wherever it is
//! set (an issue, a repo, a `.lab.toml`, the settings), the same error
//! shape as every other value (`validate::FieldError`: the field, the
//! value, what is allowed).

use super::{Knob, Type, Value};
use crate::validate::{FieldError, shown};

/// The most globs a `writes` list may hold.
pub const MAX_GLOBS: usize = 64;
/// The longest glob.
pub const MAX_GLOB_LEN: usize = 200;
/// The longest free text.
pub const MAX_TEXT: usize = 2000;

/// The characters a glob may use: path characters and glob syntax, no
/// spaces, quotes or backticks, so no prose can reach a prompt in one.
fn glob_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._-/*?[]{}!+@=~,".contains(c)
}

/// `raw` as a value of `knob`, canonical; `field` names it in the error.
/// JSON types are strict (a bool is `true`, a number `3`, globs a list):
/// what the API's schema says. Text sources go through [`check_text`].
pub fn check(knob: &dyn Knob, field: &str, raw: &serde_json::Value) -> Result<Value, FieldError> {
    use serde_json::Value as J;
    let key = knob.key();
    let wrong = |what: &str, allowed: Option<&[&str]>| {
        let e = FieldError::new(
            field,
            format!(
                "invalid value '{}' for knob '{key}': must be {what}",
                shown(&raw_text(raw))
            ),
        )
        .with_value(shown(&raw_text(raw)));
        match allowed {
            Some(a) => e.with_allowed(a),
            None => e,
        }
    };
    match knob.ty() {
        Type::Choice(words) => raw
            .as_str()
            .and_then(|s| words.iter().find(|w| w.eq_ignore_ascii_case(s.trim())))
            .map(|w| Value::Text((*w).to_owned()))
            .ok_or_else(|| wrong(&format!("one of: {}", words.join(", ")), Some(words))),
        Type::Bool => match raw {
            J::Bool(b) => Ok(Value::Bool(*b)),
            _ => Err(wrong("true or false", Some(&["true", "false"]))),
        },
        Type::Int { min, max } => match raw.as_i64() {
            Some(n) if (min..=max).contains(&n) => Ok(Value::Int(n)),
            _ => Err(wrong(&format!("a whole number from {min} to {max}"), None)),
        },
        Type::Globs => {
            let J::Array(items) = raw else {
                return Err(wrong("a list of globs", None));
            };
            let mut list = Vec::new();
            for i in items {
                match i.as_str() {
                    Some(s) => list.push(s.to_owned()),
                    None => return Err(wrong("a list of globs (strings)", None)),
                }
            }
            if list.len() > MAX_GLOBS {
                return Err(wrong(&format!("at most {MAX_GLOBS} globs"), None));
            }
            for g in &list {
                glob(g).map_err(|why| {
                    FieldError::new(
                        field,
                        format!("invalid glob '{}' for knob '{key}': {why}", shown(g)),
                    )
                    .with_value(shown(g))
                })?;
            }
            Ok(Value::List(list))
        }
        Type::Text => {
            let s = raw
                .as_str()
                .ok_or_else(|| wrong(&format!("text of at most {MAX_TEXT} characters"), None))?;
            if s.chars().count() > MAX_TEXT
                || s.chars().any(|c| c.is_control() && c != '\n' && c != '\t')
            {
                return Err(wrong(
                    &format!("text of at most {MAX_TEXT} characters without control characters"),
                    None,
                ));
            }
            Ok(Value::Text(s.to_owned()))
        }
    }
}

/// A value written as text (a form field, a line of an issue's fenced
/// block): `true`, `3`, `src/**, docs/**` become the JSON [`check`] takes.
pub fn check_text(knob: &dyn Knob, field: &str, text: &str) -> Result<Value, FieldError> {
    use serde_json::Value as J;
    let t = text.trim();
    let raw = match knob.ty() {
        Type::Bool if t.eq_ignore_ascii_case("true") => J::Bool(true),
        Type::Bool if t.eq_ignore_ascii_case("false") => J::Bool(false),
        Type::Int { .. } => t
            .parse::<i64>()
            .map(J::from)
            .unwrap_or_else(|_| J::String(t.to_owned())),
        Type::Globs => J::Array(split_globs(t).into_iter().map(J::String).collect()),
        _ => J::String(text.to_owned()),
    };
    check(knob, field, &raw)
}

fn raw_text(raw: &serde_json::Value) -> String {
    match raw {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Globs written as one text: separated by commas outside braces
/// (`src/{a,b}/**, docs/**`), blanks dropped.
fn split_globs(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter()
        .map(|g| g.trim().to_owned())
        .filter(|g| !g.is_empty())
        .collect()
}

/// One glob: workspace-relative, of the narrow alphabet, no `.` or `..`
/// part, and one globset compiles.
fn glob(g: &str) -> Result<globset::Glob, String> {
    if g.is_empty() {
        return Err("it is empty".to_owned());
    }
    if g.len() > MAX_GLOB_LEN {
        return Err(format!("it is longer than {MAX_GLOB_LEN} characters"));
    }
    if let Some(c) = g.chars().find(|c| !glob_char(*c)) {
        return Err(format!(
            "'{}' is not allowed (letters, digits and . _ - / * ? [ ] {{ }} ! + @ = ~ , are)",
            c.escape_debug()
        ));
    }
    if g.starts_with('/') {
        return Err("it must be relative to the workspace (no leading /)".to_owned());
    }
    if g.split('/').any(|part| part == "." || part == "..") {
        return Err("it must not have a . or .. part".to_owned());
    }
    globset::GlobBuilder::new(g)
        .literal_separator(true)
        .build()
        .map_err(|e| format!("it does not parse as a glob ({})", e.kind()))
}

/// The globs of a checked `writes` value as one matcher (a path matches
/// when any glob does; `*` stays within one path part, `**` crosses them).
pub fn glob_set(globs: &[String]) -> Result<globset::GlobSet, String> {
    let mut b = globset::GlobSetBuilder::new();
    for g in globs {
        b.add(glob(g)?);
    }
    b.build().map_err(|e| e.to_string())
}

/// Knobs as a [`Set`](super::Set): every key must be a registered knob's,
/// every value fit its type; `""` and `null` leave the knob unset (it
/// inherits). Every wrong key and value is reported, under `field.key`.
pub fn parse(field: &str, input: &super::Input) -> Result<super::Set, crate::validate::Invalid> {
    let mut errs = crate::validate::Errors::default();
    let mut set = super::Set::new();
    let mut one = |key: &str, value: Result<&serde_json::Value, &str>| {
        let blank = match value {
            // JSON as its schema says: exactly `""` or `null`.
            Ok(raw) => raw.is_null() || raw.as_str() == Some(""),
            Err(text) => text.trim().is_empty(),
        };
        let at = format!("{field}.{key}");
        // An unknown key is wrong even when it says nothing.
        let Some(knob) = super::get(key) else {
            errs.push(unknown(&at, key));
            return;
        };
        if blank {
            return;
        }
        let checked = match value {
            Ok(raw) => check(knob, &at, raw),
            Err(text) => check_text(knob, &at, text),
        };
        if let Some(v) = errs.check(checked) {
            set.insert(key.to_owned(), v);
        }
    };
    match input {
        super::Input::Json(object) => {
            for (key, raw) in object {
                one(key, Ok(raw));
            }
        }
        super::Input::Text(fields) => {
            for (key, text) in fields {
                one(key, Err(text));
            }
        }
    }
    errs.finish()?;
    Ok(set)
}

/// An unknown knob key, naming the known ones.
pub(super) fn unknown(field: &str, key: &str) -> FieldError {
    let keys = super::keys();
    FieldError::new(
        field,
        format!(
            "unknown knob '{}'; known knobs: {}",
            shown(key),
            keys.join(", ")
        ),
    )
    .with_value(shown(key))
    .with_allowed(&keys)
}

/// Whether the globs `narrower` stay within `wider` (an empty `wider` is
/// unrestricted; an empty `narrower` is unrestricted too, so it does not
/// narrow a restricted `wider`). A glob stays within when it is one of
/// `wider`'s, or lies under one of them that ends in `/**` (or is `**`):
/// decided on the text alone, so a doubtful glob is refused, never guessed.
/// `Err` names the first glob that does not.
pub fn narrows(narrower: &[String], wider: &[String]) -> Result<(), String> {
    if wider.is_empty() {
        return Ok(());
    }
    if narrower.is_empty() {
        return Err("unrestricted".to_owned());
    }
    for g in narrower {
        let within = wider.iter().any(|w| {
            w == g
                || w == "**"
                || w.strip_suffix("**")
                    .filter(|prefix| prefix.ends_with('/'))
                    .is_some_and(|prefix| g.starts_with(prefix) && !g[prefix.len()..].is_empty())
        });
        if !within {
            return Err(g.clone());
        }
    }
    Ok(())
}
