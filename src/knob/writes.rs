//! `writes`: the workspace paths the run may change, as globs. Empty (the
//! default) is unrestricted. lab enforces it on what the run's branch
//! changes (`afk/scope.rs`): nothing out of it is pushed or proposed.

use super::{Knob, Phase, Type, Value};

pub struct Writes;

impl Knob for Writes {
    fn key(&self) -> &'static str {
        "writes"
    }

    fn description(&self) -> &'static str {
        "The paths the run may change, as workspace-relative globs (src/**, docs/*.md); \
         empty means unrestricted. An issue's list may only narrow its repo's."
    }

    fn ty(&self) -> Type {
        Type::Globs
    }

    fn default(&self) -> Value {
        Value::List(Vec::new())
    }

    fn phases(&self) -> &'static [Phase] {
        &Phase::ALL
    }

    fn fragment(&self, phase: Phase, value: &Value) -> Option<String> {
        let globs = value.as_list().filter(|l| !l.is_empty())?;
        // Globs are of a narrow alphabet (`check.rs`): no prose can travel
        // in them.
        let listed = globs
            .iter()
            .map(|g| format!("`{g}`"))
            .collect::<Vec<_>>()
            .join(", ");
        Some(match phase {
            Phase::Work => format!(
                "Scope of files: change only paths that match {listed}; leave every other path as \
                 it is."
            ),
            Phase::Plan => format!(
                "Scope of files: the work may change only paths that match {listed}; plan within \
                 them."
            ),
            Phase::Review => format!(
                "Scope of files: only paths that match {listed} may change; a change to any other \
                 path is a blocking finding."
            ),
        })
    }
}

/// A run's `writes` globs (empty: unrestricted): what its launch hands the
/// CLI's live check and what `afk::scope` checks its branch against.
pub fn globs(knobs: &[super::Resolved]) -> Vec<String> {
    knobs
        .iter()
        .find(|k| k.key == Writes.key())
        .and_then(|k| k.value.as_list())
        .map(<[String]>::to_vec)
        .unwrap_or_default()
}
