//! The resolver: which model, effort and spawn options a run gets, and where
//! each value came from. The rules are ADR 2's (manual: request, repo base,
//! global base, provider default; AFK: repo AFK, global AFK, repo base,
//! global base, provider default; AFK options key by key); `resolve/tests.rs`
//! writes them out as chains. Nothing else in lab re-implements them.
//!
//! Invariant: this module does no IO. Callers load the layers and pass them in.

use std::collections::BTreeMap;

use crate::domain::{Defaults, Layer, RunKind, Sourced};
use crate::provider::ProviderId;
use crate::repo::Repo;
use crate::validate::{self, Errors, FieldError, Invalid};

/// What the person starting a manual run asked for, already validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub model: Option<String>,
    pub effort: Option<String>,
}

/// The effective configuration of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub kind: RunKind,
    pub provider: ProviderId,
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
fn first(layers: &[(Option<&str>, Layer)], fallback: &str) -> Sourced {
    layers
        .iter()
        .find_map(|(v, s)| v.map(|v| (v, *s)))
        .map(|(value, layer)| Sourced {
            value: value.to_owned(),
            layer,
        })
        .unwrap_or_else(|| Sourced {
            value: fallback.to_owned(),
            layer: Layer::ProviderDefault,
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
    id: ProviderId,
    kind: RunKind,
    global: &Defaults,
    repo: &Defaults,
    request: &Request,
) -> Resolved {
    let provider = id.provider();
    let (model, effort) = match kind {
        RunKind::Manual => (
            first(
                &[
                    (set(&request.model), Layer::Request),
                    (set(&repo.model_default), Layer::RepoBase),
                    (set(&global.model_default), Layer::GlobalBase),
                ],
                provider.default_model(),
            ),
            first(
                &[
                    (set(&request.effort), Layer::Request),
                    (set(&repo.effort_default), Layer::RepoBase),
                    (set(&global.effort_default), Layer::GlobalBase),
                ],
                provider.default_effort(),
            ),
        ),
        RunKind::Afk => (
            first(
                &[
                    (set(&repo.afk_model_default), Layer::RepoAfk),
                    (set(&global.afk_model_default), Layer::GlobalAfk),
                    (set(&repo.model_default), Layer::RepoBase),
                    (set(&global.model_default), Layer::GlobalBase),
                ],
                provider.default_model(),
            ),
            first(
                &[
                    (set(&repo.afk_effort_default), Layer::RepoAfk),
                    (set(&global.afk_effort_default), Layer::GlobalAfk),
                    (set(&repo.effort_default), Layer::RepoBase),
                    (set(&global.effort_default), Layer::GlobalBase),
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
                        (afk_option(repo, spec.key), Layer::RepoAfk),
                        (afk_option(global, spec.key), Layer::GlobalAfk),
                    ],
                    spec.default,
                );
                (spec.key.to_owned(), v)
            })
            .collect(),
    };
    Resolved {
        kind,
        provider: id,
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
    resolve_layers(repo, global, kind, model, effort, None)
}

/// An AFK run's configuration for one issue: the repo's AFK layering with
/// the issue's own model, effort and options above it (already checked
/// against the repo by [`IssueLayer::parse`]).
pub fn resolve_afk(
    repo: &Repo,
    global: &Defaults,
    issue: Option<&IssueLayer>,
) -> Result<Resolved, Invalid> {
    resolve_layers(repo, global, RunKind::Afk, None, None, issue)
}

fn resolve_layers(
    repo: &Repo,
    global: &Defaults,
    kind: RunKind,
    model: Option<&str>,
    effort: Option<&str>,
    issue_layer: Option<&IssueLayer>,
) -> Result<Resolved, Invalid> {
    let id = repo.provider()?;
    let p = id.provider();
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
    let mut r = resolve(id, kind, global, &repo.defaults, &request);
    if kind == RunKind::Afk {
        issue::above(&mut r, repo.file(), issue_layer);
    }
    let stale = |what: &str, v: &Sourced, check: Result<String, FieldError>| {
        check.err().map(|e| FieldError {
            message: format!(
                "{} (the {what} comes from {})",
                e.message,
                v.layer.describe()
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

mod issue;
pub use issue::{
    ISSUE_KEYS, IssueBudget, IssueLayer, KnobContext, SourcedBudget, budget, run_knobs,
};

#[cfg(test)]
mod tests;
