//! A repo's providers of plan and review runs (issue 28, ADR 32): unset,
//! a kind runs on the global choice, else on the repo's provider; the
//! repo's own `plan_*` / `review_*` defaults are written for (and checked
//! against) its own choice for the kind, else its provider.
//!
//! Invariant: no IO here.

use super::{Repo, RepoPatch};
use crate::domain::{Change, Defaults, RunKind};
use crate::provider::ProviderId;
use crate::settings::{self, KindProviders};
use crate::validate::{self, Errors, FieldError};

impl Repo {
    /// The provider this repo names for runs of `kind`, if it names one
    /// (only plan and review runs can).
    pub fn own_provider(&self, kind: RunKind) -> Option<&str> {
        match kind {
            RunKind::Plan => self.plan_provider.as_deref(),
            RunKind::Review => self.review_provider.as_deref(),
            RunKind::Manual | RunKind::Afk => None,
        }
    }

    /// The provider the repo's own defaults for `kind` are written for:
    /// its own for the kind, else its provider.
    pub fn layer_provider(&self, kind: RunKind) -> Result<ProviderId, FieldError> {
        match self.own_provider(kind) {
            Some(id) => validate::provider_id(&format!("{kind}_provider"), id),
            None => self.provider(),
        }
    }

    /// The provider runs of `kind` get: the repo's own for the kind, else
    /// the global one, else the repo's provider.
    pub fn kind_provider(
        &self,
        global: &KindProviders,
        kind: RunKind,
    ) -> Result<ProviderId, FieldError> {
        match (self.own_provider(kind), global.get(kind)) {
            (Some(_), _) => self.layer_provider(kind),
            (None, Some(id)) => Ok(id),
            (None, None) => self.provider(),
        }
    }
}

/// The repo's own providers of plan and review runs after a change.
pub(super) fn apply_providers(
    current: &Repo,
    patch: &RepoPatch,
    next: &mut Repo,
    errs: &mut Errors,
) {
    let one = |cur: &Option<String>, c: &Change<String>, field: &str, errs: &mut Errors| {
        let cur_id = cur.as_deref().and_then(|s| s.parse().ok());
        match c {
            Change::Keep => cur.clone(),
            _ => settings::kinds::provider_change(cur_id, c, field, errs)
                .map(|p: ProviderId| p.as_str().to_owned()),
        }
    };
    next.plan_provider = one(
        &current.plan_provider,
        &patch.plan_provider,
        "plan_provider",
        errs,
    );
    next.review_provider = one(
        &current.review_provider,
        &patch.review_provider,
        "review_provider",
        errs,
    );
}

/// Applies the defaults part of a repo change, each kind's own checked
/// against the provider it is written for, and reports stored values the
/// change leaves alone that no longer fit a changed provider.
pub(super) fn apply_defaults(
    current: &Repo,
    patch: &RepoPatch,
    next: &mut Repo,
    errs: &mut Errors,
) {
    let Ok(base) = next.provider() else {
        return;
    };
    // A kind's provider that left lab's catalog is reported (set another),
    // as the repo's own provider would be; its values are checked against
    // the repo's provider meanwhile.
    let mut of_kind = |k: RunKind| {
        next.layer_provider(k).unwrap_or_else(|e| {
            errs.push(e);
            base
        })
    };
    let (plan, review) = (of_kind(RunKind::Plan), of_kind(RunKind::Review));
    let of = |k: RunKind| if k == RunKind::Plan { plan } else { review };
    let kind_p = |k: RunKind| of(k).provider();
    next.defaults = settings::apply_defaults_with(
        base.provider(),
        &kind_p,
        &current.defaults,
        &patch.defaults,
        "",
        errs,
    );
    // Stored values that the patch leaves alone must fit a new provider:
    // report them, never drop them silently.
    let mut kept = super::untouched(&next.defaults, &patch.defaults);
    let was = |k: RunKind| current.layer_provider(k).ok();
    if current.provider().ok() == Some(base) {
        let (plan, review) = (kept.plan.clone(), kept.review.clone());
        kept = Defaults {
            plan,
            review,
            ..Defaults::default()
        };
    }
    for (k, _) in settings::kinds::OWN_KINDS {
        if was(k) == Some(of(k))
            && let Some(slot) = kept.kind_mut(k)
        {
            *slot = Default::default();
        }
    }
    if let Err(e) = settings::check_defaults_with(base.provider(), &kind_p, &kept, "") {
        for mut fe in e.0 {
            let new = match fe.field.split('_').next() {
                Some("plan") => plan,
                Some("review") => review,
                _ => base,
            };
            fe.message = format!(
                "{}; it does not fit the new provider {new}: clear it or set a {new} value in \
                 the same request",
                fe.message
            );
            errs.push(fe);
        }
    }
}
