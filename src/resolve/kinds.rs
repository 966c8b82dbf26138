//! Plan and review runs (issue 28, ADR 32): the provider a kind runs on and
//! which of the repo's layers apply to it.
//!
//! Invariant: no IO.

use super::{Asked, IssueLayer, Resolved, resolve_layers};
use crate::domain::{Defaults, RunKind};
use crate::provider::ProviderId;
use crate::repo::Repo;
use crate::settings::Settings;
use crate::validate::Invalid;

/// The repo's defaults that apply to a run of `kind` on provider `id`:
/// its base and AFK defaults when they are written for `id` (the repo's
/// provider is `id`), each kind's own when that kind's layer is written for
/// `id` (see [`Repo::layer_provider`]); the others are left out, since a
/// model or option only means something to the provider it was set for.
pub fn repo_layers(repo: &Repo, kind: RunKind, id: ProviderId) -> Defaults {
    let mut d = repo.defaults.clone();
    if repo.provider().ok() != Some(id) {
        d = Defaults {
            plan: d.plan,
            review: d.review,
            ..Defaults::default()
        };
    }
    for k in [RunKind::Plan, RunKind::Review] {
        if (k != kind || repo.layer_provider(k).ok() != Some(id))
            && let Some(slot) = d.kind_mut(k)
        {
            *slot = Default::default();
        }
    }
    d
}

/// A run of any kind of this repo, with no per-run request: its provider
/// is [`Repo::kind_provider`] (a plan or review run's may differ from the
/// repo's), its global layers that provider's, and its repo layers those
/// [`repo_layers`] keeps.
///
/// `issue` is the work's: it applies to the AFK run only (a plan or review
/// run of the same issue runs its kind's defaults), and is ignored for the
/// other kinds.
pub fn resolve_kind(
    repo: &Repo,
    settings: &Settings,
    kind: RunKind,
    issue: Option<&IssueLayer>,
) -> Result<Resolved, Invalid> {
    resolve_kind_request(repo, settings, kind, Asked::default(), issue)
}

/// [`resolve_kind`] for a caller holding a request's model and effort (the
/// explain route): refused for the unattended kinds, which take none.
pub fn resolve_kind_request(
    repo: &Repo,
    settings: &Settings,
    kind: RunKind,
    asked: Asked,
    issue: Option<&IssueLayer>,
) -> Result<Resolved, Invalid> {
    let id = repo.kind_provider(&settings.kinds, kind)?;
    resolve_on(repo, settings, kind, id, asked, issue)
}

/// A run of `kind` on provider `id`: that provider's global layers, and
/// the repo's only where [`repo_layers`] keeps them for it. A manual run a
/// person started on another provider than the repo's (the start form's
/// Provider, `labctl start --provider`) resolves here too.
pub fn resolve_on(
    repo: &Repo,
    settings: &Settings,
    kind: RunKind,
    id: ProviderId,
    asked: Asked,
    issue: Option<&IssueLayer>,
) -> Result<Resolved, Invalid> {
    let global = settings.provider(id);
    let layers = repo_layers(repo, kind, id);
    let issue = issue.filter(|_| kind == RunKind::Afk);
    resolve_layers(id, &global, &layers, repo, kind, asked, issue)
}

#[cfg(test)]
mod tests;
