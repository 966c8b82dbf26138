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
        &[Phase::Work]
    }

    fn fragment(&self, phase: Phase, value: &Value) -> Option<String> {
        let globs = value.as_list().filter(|l| !l.is_empty())?;
        match phase {
            // Globs are of a narrow alphabet (`check.rs`): no prose can
            // travel in them.
            Phase::Work => Some(format!(
                "Scope of files: change only paths that match {}; leave every other path as it \
                 is.",
                globs
                    .iter()
                    .map(|g| format!("`{g}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
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
