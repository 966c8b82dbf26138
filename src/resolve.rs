//! The resolver: which model, effort and spawn options a run gets, and where
//! each value came from. The rules are SPEC section 2; nothing else in lab
//! re-implements them.
//!
//! Invariant: this module does no IO. Callers load the layers and pass them in.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::provider::Provider;
use crate::repo::Repo;
use crate::validate::{self, Errors, FieldError, Invalid};

/// Whether an operator started the run or the AFK scheduler did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    Manual,
    Afk,
}

impl RunKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Manual => "manual",
            RunKind::Afk => "afk",
        }
    }
}

impl fmt::Display for RunKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "manual" => Ok(RunKind::Manual),
            "afk" => Ok(RunKind::Afk),
            other => Err(format!("unknown run kind '{other}'; allowed: manual, afk")),
        }
    }
}

/// One scope's defaults: the global settings of one provider, or one repo.
/// `None` (or an empty string) means inherit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    pub model_default: Option<String>,
    pub effort_default: Option<String>,
    pub afk_model_default: Option<String>,
    pub afk_effort_default: Option<String>,
    pub afk_options: BTreeMap<String, String>,
}

/// What the person starting a manual run asked for, already validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub model: Option<String>,
    pub effort: Option<String>,
}

/// The layer a resolved value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum Source {
    #[serde(rename = "request")]
    Request,
    #[serde(rename = "repo.afk")]
    RepoAfk,
    #[serde(rename = "global.afk")]
    GlobalAfk,
    #[serde(rename = "repo.base")]
    RepoBase,
    #[serde(rename = "global.base")]
    GlobalBase,
    #[serde(rename = "provider.default")]
    ProviderDefault,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Request => "request",
            Source::RepoAfk => "repo.afk",
            Source::GlobalAfk => "global.afk",
            Source::RepoBase => "repo.base",
            Source::GlobalBase => "global.base",
            Source::ProviderDefault => "provider.default",
        }
    }

    /// Words for people: "the repo's AFK defaults".
    pub fn describe(self) -> &'static str {
        match self {
            Source::Request => "this request",
            Source::RepoAfk => "the repo's AFK defaults",
            Source::GlobalAfk => "the global AFK defaults",
            Source::RepoBase => "the repo's defaults",
            Source::GlobalBase => "the global defaults",
            Source::ProviderDefault => "the provider's default",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A resolved value and its provenance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Sourced {
    pub value: String,
    pub source: Source,
}

/// The effective configuration of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub kind: RunKind,
    pub provider: &'static str,
    pub model: Sourced,
    pub effort: Sourced,
    pub options: BTreeMap<String, Sourced>,
}

impl Resolved {
    /// The options as the provider takes them in a spawn spec.
    pub fn option_values(&self) -> BTreeMap<String, String> {
        self.options
            .iter()
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect()
    }
}

fn set(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.is_empty())
}

fn afk_option<'a>(d: &'a Defaults, key: &str) -> Option<&'a str> {
    d.afk_options
        .get(key)
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

fn given(v: Option<&str>) -> Option<&str> {
    v.filter(|s| !s.trim().is_empty())
}

/// The first layer that has a value, else the provider default.
fn first(layers: &[(Option<&str>, Source)], fallback: &str) -> Sourced {
    layers
        .iter()
        .find_map(|(v, s)| v.map(|v| (v, *s)))
        .map(|(value, source)| Sourced {
            value: value.to_owned(),
            source,
        })
        .unwrap_or_else(|| Sourced {
            value: fallback.to_owned(),
            source: Source::ProviderDefault,
        })
}

/// Resolves a run's configuration.
///
/// - manual: `request ?? repo.base ?? global.base ?? provider default`, no options;
/// - AFK: `repo.afk ?? global.afk ?? repo.base ?? global.base ?? provider default`,
///   and each declared option `repo.afk ?? global.afk ?? spec default`.
///
/// `request` is ignored for AFK runs: they have no per-run override.
pub fn resolve(
    provider: &dyn Provider,
    kind: RunKind,
    global: &Defaults,
    repo: &Defaults,
    request: &Request,
) -> Resolved {
    let (model, effort) = match kind {
        RunKind::Manual => (
            first(
                &[
                    (set(&request.model), Source::Request),
                    (set(&repo.model_default), Source::RepoBase),
                    (set(&global.model_default), Source::GlobalBase),
                ],
                provider.default_model(),
            ),
            first(
                &[
                    (set(&request.effort), Source::Request),
                    (set(&repo.effort_default), Source::RepoBase),
                    (set(&global.effort_default), Source::GlobalBase),
                ],
                provider.default_effort(),
            ),
        ),
        RunKind::Afk => (
            first(
                &[
                    (set(&repo.afk_model_default), Source::RepoAfk),
                    (set(&global.afk_model_default), Source::GlobalAfk),
                    (set(&repo.model_default), Source::RepoBase),
                    (set(&global.model_default), Source::GlobalBase),
                ],
                provider.default_model(),
            ),
            first(
                &[
                    (set(&repo.afk_effort_default), Source::RepoAfk),
                    (set(&global.afk_effort_default), Source::GlobalAfk),
                    (set(&repo.effort_default), Source::RepoBase),
                    (set(&global.effort_default), Source::GlobalBase),
                ],
                provider.default_effort(),
            ),
        ),
    };
    let options = match kind {
        RunKind::Manual => BTreeMap::new(),
        RunKind::Afk => provider
            .spawn_options()
            .iter()
            .map(|spec| {
                let v = first(
                    &[
                        (afk_option(repo, spec.key), Source::RepoAfk),
                        (afk_option(global, spec.key), Source::GlobalAfk),
                    ],
                    spec.default,
                );
                (spec.key.to_owned(), v)
            })
            .collect(),
    };
    Resolved {
        kind,
        provider: provider.id(),
        model,
        effort,
        options,
    }
}

/// Checks a run request against the repo's provider, resolves it, and checks
/// that every resolved value is still in the provider's catalog (a stored
/// value can outlive a catalog change). The entry to the resolver for every
/// caller that starts from a request: the API, the pages, the launch path.
pub fn resolve_request(
    repo: &Repo,
    global: &Defaults,
    kind: RunKind,
    model: Option<&str>,
    effort: Option<&str>,
) -> Result<Resolved, Invalid> {
    let p = repo.provider()?;
    let mut errs = Errors::default();
    if kind == RunKind::Afk {
        for (name, v) in [("model", model), ("effort", effort)] {
            if given(v).is_some() {
                errs.push(FieldError::new(
                    name,
                    "AFK runs take no per-run override: they run the AFK defaults",
                ));
            }
        }
    }
    let request = Request {
        model: given(model).and_then(|m| errs.check(validate::model(p, "model", m))),
        effort: given(effort).and_then(|e| errs.check(validate::effort(p, "effort", e))),
    };
    errs.finish()?;
    let r = resolve(p, kind, global, &repo.defaults, &request);
    let stale = |what: &str, v: &Sourced, check: Result<String, FieldError>| {
        check.err().map(|e| FieldError {
            message: format!(
                "{} (the {what} comes from {})",
                e.message,
                v.source.describe()
            ),
            ..e
        })
    };
    let mut errs = Errors::default();
    if let Some(e) = stale(
        "model",
        &r.model,
        validate::model(p, "model", &r.model.value),
    ) {
        errs.push(e);
    }
    if let Some(e) = stale(
        "effort",
        &r.effort,
        validate::effort(p, "effort", &r.effort.value),
    ) {
        errs.push(e);
    }
    for (k, v) in &r.options {
        let field = format!("afk_options.{k}");
        if let Some(e) = stale("value", v, validate::option(p, &field, k, &v.value)) {
            errs.push(e);
        }
    }
    errs.finish()?;
    Ok(r)
}

#[cfg(test)]
mod tests;
