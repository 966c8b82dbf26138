//! `changeScope`: how broad a change the issue wants.

use super::{Knob, Phase, Type, Value};

pub struct ChangeScope;

const WORDS: &[&str] = &["surgical", "moderate", "refactor"];

impl Knob for ChangeScope {
    fn key(&self) -> &'static str {
        "changeScope"
    }

    fn description(&self) -> &'static str {
        "How broad the change may be: surgical (the smallest change that resolves the issue), \
         moderate (the default: what a careful reviewer expects), or refactor (restructuring \
         nearby code is welcome)."
    }

    fn ty(&self) -> Type {
        Type::Choice(WORDS)
    }

    fn default(&self) -> Value {
        Value::Text("moderate".to_owned())
    }

    fn phases(&self) -> &'static [Phase] {
        &Phase::ALL
    }

    fn fragment(&self, phase: Phase, value: &Value) -> Option<String> {
        match (phase, value.as_str()?) {
            (Phase::Work, "surgical") => Some(
                "Scope: surgical. Make the smallest change that resolves the issue: touch only \
                 the lines it needs, do not rename, reformat or restructure anything else, and \
                 leave unrelated problems you notice alone (mention them in the pull request)."
                    .to_owned(),
            ),
            (Phase::Work, "refactor") => Some(
                "Scope: refactor. Restructuring the code around the change is welcome where it \
                 makes the result clearer; keep behaviour the same outside what the issue asks, \
                 and say in the pull request what you restructured and why."
                    .to_owned(),
            ),
            (Phase::Plan, "surgical") => Some(
                "Scope: surgical. Plan the smallest change that resolves the issue: no renames, \
                 reformatting or restructuring beyond what it needs."
                    .to_owned(),
            ),
            (Phase::Plan, "refactor") => Some(
                "Scope: refactor. The plan may restructure the code around the change where that \
                 makes the result clearer; say what and why."
                    .to_owned(),
            ),
            (Phase::Review, "surgical") => Some(
                "Scope: surgical. A change broader than the issue needs (renames, reformatting, \
                 restructuring, unrelated fixes) is a blocking finding."
                    .to_owned(),
            ),
            (Phase::Review, "refactor") => Some(
                "Scope: refactor. Restructuring around the change was welcome: breadth alone is \
                 not a finding."
                    .to_owned(),
            ),
            _ => None,
        }
    }
}
