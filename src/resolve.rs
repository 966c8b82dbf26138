//! The resolver: which model, effort and spawn options a run gets, and where
//! each value came from. The rules are ADR 2's (manual: request, repo base,
//! global base, provider default; AFK: repo AFK, global AFK, repo base,
//! global base, provider default; AFK options key by key); `resolve/tests.rs`
//! writes them out as chains. Nothing else in lab re-implements them.
//!
//! Invariant: this module does no IO. Callers load the layers and pass them in.

use std::collections::BTreeMap;

use crate::domain::{Defaults, KindLayer, Layer, RunKind, Sourced};
use crate::provider::ProviderId;
use crate::repo::Repo;
use crate::validate::{self, Errors, FieldError, Invalid};

/// What the person starting a manual run asked for, already validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub model: Option<String>,
    pub effort: Option<String>,
    /// A manual run's spawn options, checked and canonical (the others take
    /// none from a request).
    pub options: BTreeMap<String, String>,
}

/// What a person asked for when starting a run (or explaining one): a
/// model, an effort and spawn options, each unchecked. Only a manual run
/// takes them; the unattended kinds refuse any.
#[derive(Debug, Clone, Copy, Default)]
pub struct Asked<'a> {
    pub model: Option<&'a str>,
    pub effort: Option<&'a str>,
    pub options: Option<&'a BTreeMap<String, String>>,
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

fn filled(v: Option<&str>) -> Option<&str> {
    v.filter(|s| !s.is_empty())
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

/// The repo's and the global layer of an unattended kind's own defaults.
fn own_layers(kind: RunKind) -> [Layer; 2] {
    match kind {
        RunKind::Plan => [Layer::RepoPlan, Layer::GlobalPlan],
        RunKind::Review => [Layer::RepoReview, Layer::GlobalReview],
        RunKind::Manual | RunKind::Afk => [Layer::RepoAfk, Layer::GlobalAfk],
    }
}

/// The kinds' own layers an unattended run consults, nearest first: a plan
/// or review run its own, then the AFK ones; an AFK run the AFK ones.
fn kind_layers(kind: RunKind) -> Vec<RunKind> {
    match kind {
        RunKind::Manual => Vec::new(),
        RunKind::Afk => vec![RunKind::Afk],
        RunKind::Plan | RunKind::Review => vec![kind, RunKind::Afk],
    }
}

type Pick = for<'a> fn(KindLayer<'a>) -> Option<&'a str>;

/// A model's or effort's layers for a run of `kind`, nearest first.
fn chain<'a>(
    kind: RunKind,
    repo: &'a Defaults,
    global: &'a Defaults,
    pick: Pick,
    req: Option<&'a str>,
    base: fn(&Defaults) -> &Option<String>,
) -> Vec<(Option<&'a str>, Layer)> {
    let mut layers: Vec<(Option<&str>, Layer)> = Vec::new();
    if kind == RunKind::Manual {
        layers.push((req, Layer::Request));
    }
    for k in kind_layers(kind) {
        let [r, g] = own_layers(k);
        layers.push((repo.kind_layer(k).and_then(|l| filled(pick(l))), r));
        layers.push((global.kind_layer(k).and_then(|l| filled(pick(l))), g));
    }
    layers.push((set(base(repo)), Layer::RepoBase));
    layers.push((set(base(global)), Layer::GlobalBase));
    layers
}

/// One option of a kind's own layer of a scope.
fn kind_option<'a>(d: &'a Defaults, k: RunKind, key: &str) -> Option<&'a str> {
    d.kind_layer(k)
        .and_then(|l| l.options.get(key))
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// Resolves a run's configuration; `repo` and `global` are both written for
/// provider `id` (see [`resolve_kind`] for a kind on another provider).
///
/// - manual: `request ?? repo.base ?? global.base ?? provider default`, and
///   only the options the request names (the rest are the CLI's own);
/// - AFK: `repo.afk ?? global.afk ?? repo.base ?? global.base ?? provider default`,
///   and each declared option `repo.afk ?? global.afk ?? spec default`;
/// - plan: `repo.plan ?? global.plan ??` then AFK's chain, options too;
/// - review: `repo.review ?? global.review ??` then AFK's chain, options too.
///
/// `request` is ignored for unattended runs: they have no per-run override.
pub fn resolve(
    id: ProviderId,
    kind: RunKind,
    global: &Defaults,
    repo: &Defaults,
    request: &Request,
) -> Resolved {
    let provider = id.provider();
    let own = kind_layers(kind);
    let model = first(
        &chain(
            kind,
            repo,
            global,
            |l| l.model,
            set(&request.model),
            |d| &d.model_default,
        ),
        provider.default_model(),
    );
    let effort = first(
        &chain(
            kind,
            repo,
            global,
            |l| l.effort,
            set(&request.effort),
            |d| &d.effort_default,
        ),
        provider.default_effort(),
    );
    let options = match kind {
        RunKind::Manual => request
            .options
            .iter()
            .map(|(k, v)| {
                let v = Sourced {
                    value: v.clone(),
                    layer: Layer::Request,
                };
                (k.clone(), v)
            })
            .collect(),
        RunKind::Afk | RunKind::Plan | RunKind::Review => provider
            .spawn_options()
            .iter()
            .map(|spec| {
                let option = |d, k| kind_option(d, k, spec.key);
                let layers: Vec<(Option<&str>, Layer)> = own
                    .iter()
                    .flat_map(|k| {
                        let [r, g] = own_layers(*k);
                        [(option(repo, *k), r), (option(global, *k), g)]
                    })
                    .collect();
                (spec.key.to_owned(), first(&layers, spec.default))
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
/// `global` is the global defaults of the repo's provider, so this serves
/// manual and AFK runs; plan and review runs, whose provider may be another,
/// go through [`resolve_kind`].
pub fn resolve_request(
    repo: &Repo,
    global: &Defaults,
    kind: RunKind,
    asked: Asked,
) -> Result<Resolved, Invalid> {
    if matches!(kind, RunKind::Plan | RunKind::Review) {
        return Err(FieldError::new(
            "kind",
            format!("a {kind} run resolves against the global settings of its own provider"),
        )
        .into());
    }
    let id = repo.provider()?;
    resolve_layers(id, global, &repo.defaults, repo, kind, asked, None)
}

/// An AFK run's configuration for one issue: the repo's AFK layering with
/// the issue's own model, effort and options above it (already checked
/// against the repo by [`IssueLayer::parse`]).
pub fn resolve_afk(
    repo: &Repo,
    global: &Defaults,
    issue: Option<&IssueLayer>,
) -> Result<Resolved, Invalid> {
    let id = repo.provider()?;
    resolve_layers(
        id,
        global,
        &repo.defaults,
        repo,
        RunKind::Afk,
        Asked::default(),
        issue,
    )
}

fn resolve_layers(
    id: ProviderId,
    global: &Defaults,
    repo_defaults: &Defaults,
    repo: &Repo,
    kind: RunKind,
    asked: Asked,
    issue_layer: Option<&IssueLayer>,
) -> Result<Resolved, Invalid> {
    let p = id.provider();
    let Asked {
        model,
        effort,
        options,
    } = asked;
    let options = options.filter(|o| !o.is_empty());
    let mut errs = Errors::default();
    if kind.is_unattended() {
        let opts = options.map(|_| "options");
        for (name, v) in [("model", model), ("effort", effort), ("options", opts)] {
            if given(v).is_some() {
                errs.push(FieldError::new(
                    name,
                    match kind {
                        RunKind::Afk => {
                            "AFK runs take no per-run override: they run the AFK defaults".into()
                        }
                        _ => format!(
                            "{kind} runs take no per-run override: they run the {kind} defaults"
                        ),
                    },
                ));
            }
        }
    }
    let mut request = Request {
        model: given(model).and_then(|m| errs.check(validate::model(p, "model", m))),
        effort: given(effort).and_then(|e| errs.check(validate::effort(p, "effort", e))),
        options: BTreeMap::new(),
    };
    if kind == RunKind::Manual {
        for (k, v) in options.into_iter().flatten() {
            let field = format!("options.{k}");
            if let Some(v) = errs.check(validate::manual_option(p, &field, k, v)) {
                request.options.insert(k.clone(), v);
            }
        }
    }
    errs.finish()?;
    let mut r = resolve(id, kind, global, repo_defaults, &request);
    // The issue's directives are for the work: only the AFK run takes them.
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
    // A manual run's options are the request's, checked above.
    for (k, v) in r.options.iter().filter(|_| kind != RunKind::Manual) {
        let field = format!("{kind}_options.{k}");
        if let Some(e) = stale("value", v, validate::option(p, &field, k, &v.value)) {
            errs.push(e);
        }
    }
    errs.finish()?;
    Ok(r)
}

mod issue;
mod kinds;
pub use issue::{
    ISSUE_KEYS, IssueBudget, IssueLayer, KnobContext, SourcedBudget, budget, run_knobs,
};
pub use kinds::{repo_layers, resolve_kind, resolve_kind_request, resolve_on};

#[cfg(test)]
mod tests;
