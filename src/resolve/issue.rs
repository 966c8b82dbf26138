//! The issue layer (issue 27): an AFK run's issue may set its own model,
//! effort, provider options and budgets, and knobs, in one flat object (the
//! built-in tracker's `knobs`, or the `key: value` lines of a forge issue's
//! ```` ```lab ```` block). It sits above the repo's AFK layering, and it
//! can narrow what the repo allows but never widen it: budgets only lower,
//! models only from the repo's allowed list, `writes` only within the
//! repo's own.
//!
//! Invariant: no IO; every value is checked here against the repo and the
//! settings as they are when it is set and again when the issue is claimed.

use std::collections::BTreeMap;

use super::Resolved;
use crate::domain::{Layer, Sourced};
use crate::knob::{self, Input, Knob};
use crate::repo::Repo;
use crate::repo::config_file::RepoFile;
use crate::settings::{self, Settings};
use crate::validate::{self, Errors, FieldError, Invalid};

/// The issue layer's keys beside the registered knobs and the repo's
/// provider's options.
pub const ISSUE_KEYS: &[&str] = &[
    "model",
    "effort",
    "max_tokens",
    "max_cost_usd",
    "run_timeout_minutes",
];

pub use crate::domain::IssueBudget;

/// An issue's directives, checked against its repo.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IssueLayer {
    pub knobs: knob::Set,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub options: BTreeMap<String, String>,
    pub budget: IssueBudget,
}

/// What an issue's directives are checked against: its repo and the global
/// settings.
#[derive(Clone, Copy)]
pub struct KnobContext<'a> {
    pub repo: &'a Repo,
    pub settings: &'a Settings,
}

impl KnobContext<'_> {
    /// The repo's `writes` before any issue: its own, its file's, the
    /// settings'.
    pub fn repo_writes(&self) -> Vec<String> {
        self.repo_value(&knob::Writes)
            .as_list()
            .map(<[String]>::to_vec)
            .unwrap_or_default()
    }

    /// A knob's value before any issue: the repo's own, its file's, the
    /// settings', else its default.
    pub fn repo_value(&self, k: &dyn knob::Knob) -> knob::Value {
        [
            Some(&self.repo.knobs),
            self.repo.file().map(|f| &f.knobs),
            Some(&self.settings.knobs),
        ]
        .into_iter()
        .flatten()
        .find_map(|s| s.get(k.key()))
        .cloned()
        .unwrap_or_else(|| k.default())
    }

    /// The budgets the repo allows before any issue.
    pub fn budget(&self) -> crate::repo::Budget {
        self.repo.budget.over(&self.settings.afk)
    }
}

impl IssueLayer {
    pub fn is_empty(&self) -> bool {
        *self == IssueLayer::default()
    }

    /// An issue's directives checked against its repo: every key known (a
    /// knob's, one of [`ISSUE_KEYS`], an option of the repo's provider),
    /// every value of its type, and none widening what the repo allows.
    /// Every wrong entry is reported, under `field.key`.
    pub fn parse(field: &str, input: &Input, cx: KnobContext<'_>) -> Result<IssueLayer, Invalid> {
        let p = cx.repo.provider()?.provider();
        let mut errs = Errors::default();
        let mut out = IssueLayer::default();
        let mut knobs = Vec::new();
        let entries: Vec<(String, Entry)> = match input {
            Input::Json(m) => m
                .iter()
                .map(|(k, v)| (k.clone(), Entry::Json(v.clone())))
                .collect(),
            Input::Text(t) => t
                .iter()
                .map(|(k, v)| (k.clone(), Entry::Text(v.clone())))
                .collect(),
        };
        let budget = cx.budget();
        for (key, value) in entries {
            let known = knob::get(&key).is_some()
                || ISSUE_KEYS.contains(&key.as_str())
                || p.option_spec(&key).is_some();
            // An unknown key is wrong even when it says nothing.
            if known && value.is_blank() {
                continue;
            }
            let at = format!("{field}.{key}");
            match key.as_str() {
                k if knob::get(k).is_some() => knobs.push((key, value)),
                "model" => {
                    let Some(m) =
                        errs.check(value.text(&at).and_then(|t| validate::model(p, &at, &t)))
                    else {
                        continue;
                    };
                    if cx.repo.allows_model(&m) {
                        out.model = Some(m);
                    } else {
                        let allowed: Vec<&str> =
                            cx.repo.allowed_models.iter().map(String::as_str).collect();
                        errs.push(
                            FieldError::new(
                                &at,
                                format!(
                                    "model '{m}' is not one this repo's issues may ask for; allowed: {}",
                                    allowed.join(", ")
                                ),
                            )
                            .with_value(m.clone())
                            .with_allowed(&allowed),
                        );
                    }
                }
                "effort" => {
                    out.effort =
                        errs.check(value.text(&at).and_then(|t| validate::effort(p, &at, &t)));
                }
                "max_tokens" => {
                    let (lo, hi) = settings::MAX_TOKENS;
                    out.budget.max_tokens = errs.check(
                        value
                            .int(&at)
                            .and_then(|n| validate::int_range(&at, n, lo, hi))
                            .and_then(|n| at_most(&at, n, budget.max_tokens, |n| n.to_string())),
                    );
                }
                "max_cost_usd" => {
                    out.budget.max_cost_nano_usd = errs.check(
                        value
                            .dollars(&at)
                            .and_then(|n| validate::dollars(&at, n, settings::MAX_COST_NANO_USD))
                            .and_then(|n| {
                                at_most(&at, n, budget.max_cost_nano_usd, |n| {
                                    format!("${:.2}", crate::domain::nano_to_usd(n))
                                })
                            }),
                    );
                }
                "run_timeout_minutes" => {
                    let (lo, hi) = settings::RUN_TIMEOUT_MINUTES;
                    out.budget.run_timeout_minutes = errs.check(
                        value
                            .int(&at)
                            .and_then(|n| validate::int_range(&at, n, lo, hi))
                            .and_then(|n| {
                                at_most(&at, n, Some(budget.run_timeout_minutes), |n| {
                                    format!("{n} minutes")
                                })
                            }),
                    );
                }
                option if p.option_spec(option).is_some() => {
                    if let Some(v) = errs.check(
                        value
                            .text(&at)
                            .and_then(|t| validate::option(p, &at, option, &t)),
                    ) {
                        out.options.insert(option.to_owned(), v);
                    }
                }
                other => {
                    let mut known: Vec<&str> = knob::keys();
                    known.extend(ISSUE_KEYS);
                    known.extend(p.spawn_options().iter().map(|o| o.key));
                    errs.push(
                        FieldError::new(
                            &at,
                            format!(
                                "unknown key '{}'; known keys: {}",
                                validate::shown(other),
                                known.join(", ")
                            ),
                        )
                        .with_value(validate::shown(other))
                        .with_allowed(&known),
                    );
                }
            }
        }
        let knob_input = match input {
            Input::Json(_) => {
                Input::Json(knobs.into_iter().map(|(k, v)| (k, v.into_json())).collect())
            }
            Input::Text(_) => {
                Input::Text(knobs.into_iter().map(|(k, v)| (k, v.into_text())).collect())
            }
        };
        if let Some(set) = errs.check_all(knob::parse(field, &knob_input)) {
            out.knobs = set;
        }
        if let Some(w) = out
            .knobs
            .get(knob::Writes.key())
            .and_then(knob::Value::as_list)
        {
            let repo = cx.repo_writes();
            if let Err(g) = knob::narrows(w, &repo) {
                let at = format!("{field}.writes");
                let why = if g == "unrestricted" {
                    "an empty list is unrestricted, which widens the repo's".to_owned()
                } else {
                    format!("'{}' is not within the repo's globs", validate::shown(&g))
                };
                errs.push(FieldError::new(
                    &at,
                    format!(
                        "may only narrow the repo's writes ({}): {why}",
                        repo.join(", ")
                    ),
                ));
            }
        }
        for k in knob::oversight() {
            let Some(v) = out.knobs.get(k.key()) else {
                continue;
            };
            let repo = cx.repo_value(k);
            if knob::rank(k, v) < knob::rank(k, &repo) {
                errs.push(FieldError::new(
                    format!("{field}.{}", k.key()),
                    format!(
                        "may only raise the repo's {} ({}), never lower it",
                        k.key(),
                        repo.shown()
                    ),
                ));
            }
        }
        errs.finish()?;
        Ok(out)
    }

    /// The layer as it is stored and shown: one flat object, canonical.
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::Value as J;
        let mut m = serde_json::Map::new();
        for (k, v) in &self.knobs {
            m.insert(k.clone(), serde_json::to_value(v).unwrap_or(J::Null));
        }
        if let Some(v) = &self.model {
            m.insert("model".into(), J::String(v.clone()));
        }
        if let Some(v) = &self.effort {
            m.insert("effort".into(), J::String(v.clone()));
        }
        for (k, v) in &self.options {
            let v = match v.as_str() {
                "true" => J::Bool(true),
                "false" => J::Bool(false),
                _ => J::String(v.clone()),
            };
            m.insert(k.clone(), v);
        }
        if let Some(n) = self.budget.max_tokens {
            m.insert("max_tokens".into(), J::from(n));
        }
        if let Some(n) = self.budget.max_cost_nano_usd {
            m.insert(
                "max_cost_usd".into(),
                serde_json::Number::from_f64(crate::domain::nano_to_usd(n))
                    .map_or(J::Null, J::Number),
            );
        }
        if let Some(n) = self.budget.run_timeout_minutes {
            m.insert("run_timeout_minutes".into(), J::from(n));
        }
        m
    }
}

/// A value at most `cap` (the repo's or the global budget), when there is
/// one.
fn at_most(
    field: &str,
    n: i64,
    cap: Option<i64>,
    shown: impl Fn(i64) -> String,
) -> Result<i64, FieldError> {
    match cap {
        Some(cap) if n > cap => Err(FieldError::new(
            field,
            format!(
                "{} is more than the repo allows ({}): an issue may only lower a budget",
                shown(n),
                shown(cap)
            ),
        )
        .with_value(n.to_string())),
        _ => Ok(n),
    }
}

/// One entry as given: JSON (the API) or text (a fenced block).
#[derive(Clone)]
enum Entry {
    Json(serde_json::Value),
    Text(String),
}

impl Entry {
    fn is_blank(&self) -> bool {
        match self {
            // JSON as its schema says: exactly `""` or `null`.
            Entry::Json(v) => v.is_null() || v.as_str() == Some(""),
            Entry::Text(t) => t.trim().is_empty(),
        }
    }

    fn shown(&self) -> String {
        match self {
            Entry::Json(serde_json::Value::String(s)) | Entry::Text(s) => validate::shown(s),
            Entry::Json(v) => validate::shown(&v.to_string()),
        }
    }

    /// A string (a bool is taken as its word, for a bool option).
    fn text(&self, field: &str) -> Result<String, FieldError> {
        match self {
            Entry::Text(t) => Ok(t.trim().to_owned()),
            Entry::Json(serde_json::Value::String(s)) => Ok(s.clone()),
            Entry::Json(serde_json::Value::Bool(b)) => Ok(b.to_string()),
            Entry::Json(_) => {
                Err(FieldError::new(field, "must be a string").with_value(self.shown()))
            }
        }
    }

    fn int(&self, field: &str) -> Result<i64, FieldError> {
        let n = match self {
            Entry::Text(t) => t.trim().parse().ok(),
            Entry::Json(v) => v.as_i64(),
        };
        n.ok_or_else(|| FieldError::new(field, "must be a whole number").with_value(self.shown()))
    }

    /// US dollars (`2.5`, or `$2.50` as text) as billionths.
    fn dollars(&self, field: &str) -> Result<i64, FieldError> {
        let usd = match self {
            Entry::Text(t) => t.trim().trim_start_matches('$').parse::<f64>().ok(),
            Entry::Json(v) => v.as_f64(),
        };
        usd.filter(|u| u.is_finite())
            .map(settings::usd_to_nano)
            .ok_or_else(|| {
                FieldError::new(field, "must be an amount of US dollars").with_value(self.shown())
            })
    }

    fn into_json(self) -> serde_json::Value {
        match self {
            Entry::Json(v) => v,
            Entry::Text(t) => serde_json::Value::String(t),
        }
    }

    fn into_text(self) -> String {
        match self {
            Entry::Text(t) => t,
            Entry::Json(v) => v
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| v.to_string()),
        }
    }
}

/// Puts the repo's `.lab.toml` (under the operator's repo AFK defaults) and
/// the issue (above everything) into an AFK resolution.
pub(super) fn above(r: &mut Resolved, file: Option<&RepoFile>, issue: Option<&IssueLayer>) {
    let below_repo = |s: &Sourced| s.layer != Layer::RepoAfk;
    if let Some(f) = file {
        if let Some(m) = f.model.as_ref().filter(|_| below_repo(&r.model)) {
            r.model = sourced(m, Layer::RepoFile);
        }
        if let Some(e) = f.effort.as_ref().filter(|_| below_repo(&r.effort)) {
            r.effort = sourced(e, Layer::RepoFile);
        }
        for (k, v) in &f.options {
            if let Some(cur) = r.options.get_mut(k).filter(|c| below_repo(c)) {
                *cur = sourced(v, Layer::RepoFile);
            }
        }
    }
    if let Some(i) = issue {
        if let Some(m) = &i.model {
            r.model = sourced(m, Layer::Issue);
        }
        if let Some(e) = &i.effort {
            r.effort = sourced(e, Layer::Issue);
        }
        for (k, v) in &i.options {
            if let Some(cur) = r.options.get_mut(k) {
                *cur = sourced(v, Layer::Issue);
            }
        }
    }
}

fn sourced(v: &str, layer: Layer) -> Sourced {
    Sourced {
        value: v.to_owned(),
        layer,
    }
}

/// An AFK run's budgets, each with where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourcedBudget {
    pub max_tokens: (Option<i64>, knob::Source),
    pub max_cost_nano_usd: (Option<i64>, knob::Source),
    pub run_timeout_minutes: (i64, knob::Source),
}

/// The budgets of a repo's AFK runs, lowered by an issue's, each with its
/// source: the issue where its value is the lower one, else the repo's own
/// override, else the global settings.
pub fn budget(cx: KnobContext<'_>, issue: Option<&IssueBudget>) -> SourcedBudget {
    use knob::Source;
    let i = issue.copied().unwrap_or_default();
    let b = cx.budget().lowered(&i);
    let src = |own: Option<i64>, lowered: Option<i64>, repo: Option<i64>| match own {
        Some(o) if Some(o) == lowered => Source::Issue,
        _ if repo.is_some() => Source::Repo,
        _ => Source::Settings,
    };
    let r = cx.repo.budget;
    SourcedBudget {
        max_tokens: (b.max_tokens, src(i.max_tokens, b.max_tokens, r.max_tokens)),
        max_cost_nano_usd: (
            b.max_cost_nano_usd,
            src(
                i.max_cost_nano_usd,
                b.max_cost_nano_usd,
                r.max_cost_nano_usd,
            ),
        ),
        run_timeout_minutes: (
            b.run_timeout_minutes,
            src(
                i.run_timeout_minutes,
                Some(b.run_timeout_minutes),
                r.run_timeout_minutes,
            ),
        ),
    }
}

/// Every registered knob's value for an AFK run of this repo and issue.
pub fn run_knobs(cx: KnobContext<'_>, issue: Option<&IssueLayer>) -> Vec<knob::Resolved> {
    knob::resolve(knob::Layers {
        issue: issue.map(|i| &i.knobs),
        repo: Some(&cx.repo.knobs),
        repo_file: cx.repo.file().map(|f| &f.knobs),
        settings: Some(&cx.settings.knobs),
    })
}

#[cfg(test)]
mod tests;
