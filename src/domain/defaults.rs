//! One scope's base defaults and its overrides for each unattended kind.

use std::collections::BTreeMap;

use super::RunKind;

/// One scope's defaults: the global settings of one provider, or one repo.
/// `None` (or an empty string) means inherit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    pub model_default: Option<String>,
    pub effort_default: Option<String>,
    pub afk_model_default: Option<String>,
    pub afk_effort_default: Option<String>,
    pub afk_options: BTreeMap<String, String>,
    /// Plan runs' own (`plan_*`), over the AFK ones.
    pub plan: KindDefaults,
    /// Review runs' own (`review_*`), over the AFK ones.
    pub review: KindDefaults,
}

/// A plan or review run's own defaults in one scope (`plan_model_default`,
/// `plan_effort_default`, `plan_options`, and `review_*` likewise).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindDefaults {
    pub model_default: Option<String>,
    pub effort_default: Option<String>,
    pub options: BTreeMap<String, String>,
}

impl KindDefaults {
    pub fn is_empty(&self) -> bool {
        *self == KindDefaults::default()
    }
}

/// One kind's own layer of a scope, borrowed: the AFK overrides, or a plan
/// or review run's.
#[derive(Debug, Clone, Copy)]
pub struct KindLayer<'a> {
    pub model: Option<&'a str>,
    pub effort: Option<&'a str>,
    pub options: &'a BTreeMap<String, String>,
}

impl Defaults {
    /// The layer of this scope that only runs of `kind` consult (`None` for
    /// a manual run, which has none).
    pub fn kind_layer(&self, kind: RunKind) -> Option<KindLayer<'_>> {
        let (model, effort, options) = match kind {
            RunKind::Manual => return None,
            RunKind::Afk => (
                &self.afk_model_default,
                &self.afk_effort_default,
                &self.afk_options,
            ),
            RunKind::Plan => (
                &self.plan.model_default,
                &self.plan.effort_default,
                &self.plan.options,
            ),
            RunKind::Review => (
                &self.review.model_default,
                &self.review.effort_default,
                &self.review.options,
            ),
        };
        Some(KindLayer {
            model: model.as_deref(),
            effort: effort.as_deref(),
            options,
        })
    }

    /// The own defaults of a plan or review run (`None` for other kinds).
    pub fn kind(&self, kind: RunKind) -> Option<&KindDefaults> {
        match kind {
            RunKind::Plan => Some(&self.plan),
            RunKind::Review => Some(&self.review),
            RunKind::Manual | RunKind::Afk => None,
        }
    }

    /// [`Defaults::kind`], to change.
    pub fn kind_mut(&mut self, kind: RunKind) -> Option<&mut KindDefaults> {
        match kind {
            RunKind::Plan => Some(&mut self.plan),
            RunKind::Review => Some(&mut self.review),
            RunKind::Manual | RunKind::Afk => None,
        }
    }
}
