//! Plan and review runs' own settings (issue 28, ADR 32): the provider each
//! kind runs on, and the `plan_*` / `review_*` defaults of one scope, each
//! checked against that kind's provider.
//!
//! Invariant: no IO here.

use std::collections::BTreeMap;

use crate::domain::{Change, KindDefaults, RunKind};
use crate::provider::{Provider, ProviderId};
use crate::validate::{self, Errors, FieldError};

/// The kinds that have their own provider and defaults, with the prefix of
/// their fields.
pub const OWN_KINDS: [(RunKind, &str); 2] = [(RunKind::Plan, "plan"), (RunKind::Review, "review")];

/// The provider of plan and review runs, globally; `None`: each repo's own
/// provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KindProviders {
    pub plan: Option<ProviderId>,
    pub review: Option<ProviderId>,
}

impl KindProviders {
    /// The one set for `kind` (always `None` for manual and AFK runs,
    /// which run on their repo's provider).
    pub fn get(&self, kind: RunKind) -> Option<ProviderId> {
        match kind {
            RunKind::Plan => self.plan,
            RunKind::Review => self.review,
            RunKind::Manual | RunKind::Afk => None,
        }
    }
}

/// A change to the kinds' providers (`plan_provider`, `review_provider`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindProvidersPatch {
    pub plan_provider: Change<String>,
    pub review_provider: Change<String>,
}

/// Applies a change to the global kinds' providers.
pub fn apply_providers(
    current: &KindProviders,
    patch: &KindProvidersPatch,
    errs: &mut Errors,
) -> KindProviders {
    KindProviders {
        plan: provider_change(current.plan, &patch.plan_provider, "plan_provider", errs),
        review: provider_change(
            current.review,
            &patch.review_provider,
            "review_provider",
            errs,
        ),
    }
}

/// One kind's provider after a change: `null` or `""` unsets it.
pub fn provider_change(
    cur: Option<ProviderId>,
    c: &Change<String>,
    field: &str,
    errs: &mut Errors,
) -> Option<ProviderId> {
    match c {
        Change::Keep => cur,
        Change::Clear => None,
        Change::Set(v) if v.trim().is_empty() => None,
        Change::Set(v) => errs.check(validate::provider_id(field, v.trim())).or(cur),
    }
}

/// A change to one kind's own defaults; options are changed key by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindPatch {
    pub model_default: Change<String>,
    pub effort_default: Change<String>,
    pub options: BTreeMap<String, Change<String>>,
}

impl KindPatch {
    pub fn is_empty(&self) -> bool {
        self.model_default.is_keep()
            && self.effort_default.is_keep()
            && self.options.values().all(Change::is_keep)
    }

    /// What of `d` this change leaves as it was.
    pub fn untouched(&self, d: &KindDefaults) -> KindDefaults {
        let keep =
            |v: &Option<String>, c: &Change<String>| if c.is_keep() { v.clone() } else { None };
        KindDefaults {
            model_default: keep(&d.model_default, &self.model_default),
            effort_default: keep(&d.effort_default, &self.effort_default),
            options: d
                .options
                .iter()
                .filter(|(k, _)| self.options.get(*k).is_none_or(Change::is_keep))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

type Check = fn(&dyn Provider, &str, &str) -> Result<String, FieldError>;

/// A model or effort after a change, checked against `p`.
pub fn value_change(
    p: &dyn Provider,
    cur: &Option<String>,
    c: &Change<String>,
    field: &str,
    check: Check,
    errs: &mut Errors,
) -> Option<String> {
    match c {
        Change::Keep => cur.clone(),
        Change::Clear => None,
        Change::Set(v) if v.trim().is_empty() => None,
        Change::Set(v) => errs.check(check(p, field, v)).or_else(|| cur.clone()),
    }
}

/// Options after a key-by-key change, checked against `p`; `field` names
/// the options (`afk_options`, `providers.codex.plan_options`).
pub fn options_change(
    p: &dyn Provider,
    current: &BTreeMap<String, String>,
    patch: &BTreeMap<String, Change<String>>,
    field: &str,
    errs: &mut Errors,
) -> BTreeMap<String, String> {
    let mut next = current.clone();
    for (key, c) in patch {
        let f = format!("{field}.{key}");
        match c {
            Change::Keep => {}
            Change::Set(v) if !v.trim().is_empty() => {
                if let Some(v) = errs.check(validate::option(p, &f, key, v)) {
                    next.insert(key.clone(), v);
                }
            }
            // Clearing: the key must be one the provider declares or one
            // that is stored (a leftover of another provider), so a misspelt
            // key is reported rather than silently ignored.
            Change::Clear | Change::Set(_) => {
                if next.remove(key).is_none() {
                    errs.check(validate::option_key(p, &f, key));
                }
            }
        }
    }
    next
}

/// Applies a change to one kind's own defaults for its provider `p`;
/// `prefix` is the scope's (`providers.codex.`, or empty), `kind` the
/// fields' (`plan`, `review`).
pub fn apply_kind(
    p: &dyn Provider,
    current: &KindDefaults,
    patch: &KindPatch,
    prefix: &str,
    kind: &str,
    errs: &mut Errors,
) -> KindDefaults {
    KindDefaults {
        model_default: value_change(
            p,
            &current.model_default,
            &patch.model_default,
            &format!("{prefix}{kind}_model_default"),
            validate::model,
            errs,
        ),
        effort_default: value_change(
            p,
            &current.effort_default,
            &patch.effort_default,
            &format!("{prefix}{kind}_effort_default"),
            validate::effort,
            errs,
        ),
        options: options_change(
            p,
            &current.options,
            &patch.options,
            &format!("{prefix}{kind}_options"),
            errs,
        ),
    }
}

/// Checks one kind's stored defaults against its provider `p`.
pub fn check_kind(p: &dyn Provider, d: &KindDefaults, prefix: &str, kind: &str, errs: &mut Errors) {
    for (v, name, check) in [
        (&d.model_default, "model_default", validate::model as Check),
        (
            &d.effort_default,
            "effort_default",
            validate::effort as Check,
        ),
    ] {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            errs.check(check(p, &format!("{prefix}{kind}_{name}"), v));
        }
    }
    for (k, v) in &d.options {
        errs.check(validate::option(
            p,
            &format!("{prefix}{kind}_options.{k}"),
            k,
            v,
        ));
    }
}
