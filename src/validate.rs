//! Validation: the one place that decides whether a value may be stored or
//! used, and how it is spelled when it is. The rules: a model or effort not
//! in its provider's catalog is refused, naming the value and the allowed
//! ones; catalogs match case-insensitively and store the catalog's casing;
//! an unknown option key names the known keys; a bad option value names the
//! key, the value and what is allowed; bools are `true`/`false` in any case,
//! stored lower-case; an empty AFK model or effort means inherit. Every
//! write path (API, pages, labctl through the API) goes through here, and a
//! request with any wrong value writes nothing.
//!
//! Invariant: this module does no IO.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::provider::{self, OptionType, Provider, ProviderId};

/// One rejected field: what was wrong and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FieldError {
    /// The field, as a dotted path into the request (`afk_options.ultracode`).
    pub field: String,
    /// The rejected value, when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub message: String,
    /// The allowed values, when they form a list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<String>>,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            value: None,
            message: message.into(),
            allowed: None,
        }
    }

    pub fn with_value(mut self, value: impl Into<String>) -> Self {
        self.value = Some(value.into());
        self
    }

    pub fn with_allowed(mut self, allowed: &[&str]) -> Self {
        self.allowed = Some(allowed.iter().map(|s| s.to_string()).collect());
        self
    }
}

/// A rejected request: every field that was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub Vec<FieldError>);

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", e.field, e.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for Invalid {}

impl From<FieldError> for Invalid {
    fn from(e: FieldError) -> Self {
        Invalid(vec![e])
    }
}

/// Collects field errors so one response names all of them.
#[derive(Debug, Default)]
pub struct Errors(Vec<FieldError>);

impl Errors {
    /// Keeps the value, or records the error and returns `None`.
    pub fn check<T>(&mut self, r: Result<T, FieldError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.0.push(e);
                None
            }
        }
    }

    /// Keeps the value, or records every error and returns `None`.
    pub fn check_all<T>(&mut self, r: Result<T, Invalid>) -> Option<T> {
        r.map_err(|e| self.extend(e)).ok()
    }

    pub fn push(&mut self, e: FieldError) {
        self.0.push(e);
    }

    pub fn extend(&mut self, other: Invalid) {
        self.0.extend(other.0);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn finish(self) -> Result<(), Invalid> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Invalid(self.0))
        }
    }
}

fn list(values: &[&str]) -> String {
    values.join(", ")
}

fn catalog_match(catalog: &[&'static str], value: &str) -> Option<&'static str> {
    catalog
        .iter()
        .copied()
        .find(|c| c.eq_ignore_ascii_case(value))
}

/// The provider with this id.
pub fn provider_id(field: &str, id: &str) -> Result<ProviderId, FieldError> {
    id.parse().map_err(|_| {
        let ids = provider::ids();
        FieldError::new(
            field,
            format!("unknown provider '{}'; allowed: {}", shown(id), list(&ids)),
        )
        .with_value(id)
        .with_allowed(&ids)
    })
}

/// A model of this provider, in the catalog's casing.
pub fn model(p: &dyn Provider, field: &str, value: &str) -> Result<String, FieldError> {
    catalog_match(p.models(), value.trim())
        .map(str::to_owned)
        .ok_or_else(|| {
            FieldError::new(
                field,
                format!(
                    "unknown model '{}' for provider {}; allowed: {}",
                    shown(value),
                    p.id(),
                    list(p.models())
                ),
            )
            .with_value(value)
            .with_allowed(p.models())
        })
}

/// An effort of this provider, in the catalog's casing.
pub fn effort(p: &dyn Provider, field: &str, value: &str) -> Result<String, FieldError> {
    catalog_match(p.efforts(), value.trim())
        .map(str::to_owned)
        .ok_or_else(|| {
            FieldError::new(
                field,
                format!(
                    "unknown effort '{}' for provider {}; allowed: {}",
                    shown(value),
                    p.id(),
                    list(p.efforts())
                ),
            )
            .with_value(value)
            .with_allowed(p.efforts())
        })
}

/// A spawn option key the provider declares.
pub fn option_key(
    p: &dyn Provider,
    field: &str,
    key: &str,
) -> Result<&'static crate::provider::OptionSpec, FieldError> {
    p.option_spec(key).ok_or_else(|| {
        let keys: Vec<&str> = p.spawn_options().iter().map(|o| o.key).collect();
        FieldError::new(
            field,
            format!(
                "unknown option '{}' for provider {}; known options: {}",
                shown(key),
                p.id(),
                list(&keys)
            ),
        )
        .with_value(key)
        .with_allowed(&keys)
    })
}

/// A spawn option's value, canonical: bools lower case, enums in the
/// catalog's casing. For the AFK defaults and the kinds run with nobody to
/// answer; [`manual_option`] for a manual run.
pub fn option(p: &dyn Provider, field: &str, key: &str, value: &str) -> Result<String, FieldError> {
    let spec = option_key(p, field, key)?;
    option_in(spec, spec.values, field, value)
}

/// A manual run's spawn option: the values that ask a person allowed too.
pub fn manual_option(
    p: &dyn Provider,
    field: &str,
    key: &str,
    value: &str,
) -> Result<String, FieldError> {
    let spec = option_key(p, field, key)?;
    option_in(spec, &spec.manual_values(), field, value)
}

fn option_in(
    spec: &crate::provider::OptionSpec,
    values: &[&'static str],
    field: &str,
    value: &str,
) -> Result<String, FieldError> {
    catalog_match(values, value.trim())
        .map(str::to_owned)
        .ok_or_else(|| {
            let what = match spec.ty {
                OptionType::Bool => "a bool",
                OptionType::Enum => "one of the listed values",
            };
            FieldError::new(
                field,
                format!(
                    "invalid value '{}' for option '{}': must be {what}; allowed: {}",
                    shown(value),
                    spec.key,
                    list(values)
                ),
            )
            .with_value(value)
            .with_allowed(values)
        })
}

/// A run's prompt: any text, but no NUL (it cannot travel in argv) and at
/// most [`MAX_PROMPT`] bytes.
pub fn prompt(field: &str, value: &str) -> Result<String, FieldError> {
    if value.contains('\0') {
        return Err(FieldError::new(field, "must not contain a NUL character"));
    }
    if value.len() > MAX_PROMPT {
        return Err(FieldError::new(
            field,
            format!("is {} bytes; at most {MAX_PROMPT} are allowed", value.len()),
        ));
    }
    Ok(value.to_owned())
}

/// The largest prompt lab passes: one argv element may not exceed 128 KiB on
/// Linux, and a directive line may be added in front.
pub const MAX_PROMPT: usize = 120 * 1024;

/// A repo name: it appears in URLs, session names and folder names.
pub fn repo_name(field: &str, value: &str) -> Result<String, FieldError> {
    let ok_chars = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    let starts_ok = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    let all_digits = value.chars().all(|c| c.is_ascii_digit());
    if value.is_empty() || value.len() > 64 || !ok_chars || !starts_ok || all_digits {
        return Err(FieldError::new(
            field,
            "must be 1-64 characters of letters, digits, '.', '_' and '-', start with a letter \
             or digit, and not be only digits (ids are numbers)",
        )
        .with_value(shown(value)));
    }
    Ok(value.to_owned())
}

/// A local repository path: absolute, printable.
pub fn repo_path(field: &str, value: &str) -> Result<String, FieldError> {
    if !value.starts_with('/') || value.len() > 4096 || has_control(value) {
        return Err(FieldError::new(
            field,
            "must be an absolute path (starting with '/') of at most 4096 printable characters",
        )
        .with_value(shown(value)));
    }
    let trimmed = value.trim_end_matches('/');
    Ok(if trimmed.is_empty() { "/" } else { trimmed }.to_owned())
}

/// A clone URL git understands, which git cannot mistake for an option.
pub fn repo_url(field: &str, value: &str) -> Result<String, FieldError> {
    let schemes = ["https://", "http://", "ssh://", "git://", "file://"];
    // A URL with a scheme must also parse as one (`http://[` does not).
    let has_scheme = schemes
        .iter()
        .any(|s| value.starts_with(s) && value.len() > s.len())
        && reqwest::Url::parse(value).is_ok();
    let scp_like = {
        // user@host:path, the form ssh remotes often take
        let (head, rest) = value.split_once(':').unwrap_or(("", ""));
        head.contains('@') && !head.contains('/') && !rest.is_empty()
    };
    if value.starts_with('-')
        || value.len() > 2048
        || has_control(value)
        || value.contains(' ')
        || !(has_scheme || scp_like)
    {
        return Err(FieldError::new(
            field,
            "must be a clone URL (https://, http://, ssh://, git://, file:// or user@host:path) \
             without spaces, at most 2048 characters",
        )
        .with_value(shown(value)));
    }
    Ok(value.to_owned())
}

/// The web origin of an http(s) URL (`scheme://host[:port]`, the host in
/// lower case, a default port left out): what a browser sends as `Origin`.
pub fn web_origin(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    matches!(u.scheme(), "http" | "https")
        .then(|| u.origin().ascii_serialization())
        .filter(|o| o != "null")
}

/// A redirect target on this site: a path that starts with one `/`, with no
/// `\`, whitespace, control or non-ASCII character (which a browser may
/// drop or read otherwise, or a header cannot carry).
pub fn local_path(value: &str) -> bool {
    value.starts_with('/')
        && !value.starts_with("//")
        && value.chars().all(|c| c.is_ascii_graphic() && c != '\\')
}

/// A branch name git accepts (the rules of `git check-ref-format --branch`).
pub fn branch(field: &str, value: &str) -> Result<String, FieldError> {
    let bad = value.is_empty()
        || value.len() > 200
        || value.starts_with('-')
        || value.starts_with('/')
        || value.ends_with('/')
        || value.starts_with('.')
        || value.ends_with('.')
        || value.ends_with(".lock")
        || value.contains("..")
        || value.contains("@{")
        || value.contains("//")
        || value == "@"
        || value.contains("/.")
        || value
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c));
    if bad {
        return Err(FieldError::new(
            field,
            "must be a valid git branch name (no spaces, '..', '~', '^', ':', '?', '*', '[', '\\', \
             not starting with '-' or '.')",
        )
        .with_value(shown(value)));
    }
    Ok(value.to_owned())
}

/// A variable of lab's environment the operator passes to every run
/// (`--run-env`): a variable name, never one of lab's own `LAB_*` (its
/// secrets live there) nor `TMUX`/`TMUX_PANE` (lab's tmux server).
pub fn run_env_name(field: &str, name: &str) -> Result<String, FieldError> {
    let is_name = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    let why = if !is_name {
        "must be a variable name (letters, digits and '_', not starting with a digit)"
    } else if name.starts_with("LAB_") {
        "lab's own LAB_* variables never reach a run (they hold its secrets)"
    } else if name == "TMUX" || name == "TMUX_PANE" {
        "would point a run at lab's tmux server"
    } else {
        return Ok(name.to_owned());
    };
    Err(FieldError::new(field, why).with_value(shown(name)))
}

/// A whole number in `lo..=hi`.
pub fn int_range(field: &str, value: i64, lo: i64, hi: i64) -> Result<i64, FieldError> {
    if value < lo || value > hi {
        return Err(
            FieldError::new(field, format!("must be a whole number from {lo} to {hi}"))
                .with_value(value.to_string()),
        );
    }
    Ok(value)
}

/// An amount of US dollars held as billionths, within `lo..=hi` (also
/// billionths); the error names dollars.
pub fn dollars(field: &str, nano: i64, (lo, hi): (i64, i64)) -> Result<i64, FieldError> {
    if nano < lo || nano > hi {
        let usd = |n: i64| n as f64 / 1e9;
        return Err(FieldError::new(
            field,
            format!(
                "must be an amount of US dollars from {} to {}",
                usd(lo),
                usd(hi)
            ),
        )
        .with_value(format!("{}", usd(nano))));
    }
    Ok(nano)
}

/// A closed set of values lab spells one way each (an issue state, an
/// output format; see `domain`): every value, and its spelling.
pub trait Choice: Copy + 'static {
    const ALL: &'static [Self];
    fn as_str(self) -> &'static str;

    /// The value spelled exactly `s`.
    fn spelled(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.as_str() == s)
    }

    /// Every spelling, in order.
    fn spellings() -> Vec<&'static str> {
        Self::ALL.iter().map(|c| c.as_str()).collect()
    }
}

/// One of a closed set's values, spelled exactly: "must be open or closed".
pub fn choice<T: Choice>(field: &str, value: &str) -> Result<T, FieldError> {
    T::spelled(value).ok_or_else(|| {
        let all = T::spellings();
        let either = match all.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => all.join(""),
        };
        FieldError::new(field, format!("must be {either}")).with_value(shown(value))
    })
}

fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// A value as it may be echoed in a message: bounded, with control
/// characters escaped.
pub fn shown(value: &str) -> String {
    const MAX: usize = 80;
    let mut out: String = value
        .chars()
        .take(MAX)
        .flat_map(char::escape_debug)
        .collect();
    if value.chars().count() > MAX {
        out.push('…');
    }
    out
}

mod input;
mod issues;
pub use input::*;
pub use issues::*;

#[cfg(test)]
mod tests;
