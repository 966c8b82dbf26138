//! `plan` and `review`: which phases an AFK issue goes through around its
//! work (issue 28 §2, §3). They add nothing to a prompt: they decide which
//! runs lab starts. A level is oversight; an issue may raise its repo's
//! level, never lower it (anyone who can write an issue could otherwise
//! skip the review the operator asked for).

use super::{Knob, Type, Value};

/// `plan`: `off` (the default), `on` (a person approves the plan) or
/// `auto` (a review run judges it).
pub struct Plan;

/// `review`: `off` (the default) or `on` (a review run reads the pull
/// request before a person does).
pub struct Review;

const PLAN: &[&str] = &["off", "auto", "on"];
const REVIEW: &[&str] = &["off", "on"];

impl Knob for Plan {
    fn key(&self) -> &'static str {
        "plan"
    }

    fn description(&self) -> &'static str {
        "Whether a planning run comes first: off (the default), on (a person approves or rejects \
         the plan before any code is written) or auto (a review run judges the plan). An issue \
         may raise its repo's level, never lower it."
    }

    fn ty(&self) -> Type {
        Type::Choice(PLAN)
    }

    fn default(&self) -> Value {
        Value::Text("off".to_owned())
    }
}

impl Knob for Review {
    fn key(&self) -> &'static str {
        "review"
    }

    fn description(&self) -> &'static str {
        "Whether a review run reads the pull request once its checks pass: off (the default) or \
         on. An issue may raise its repo's level, never lower it."
    }

    fn ty(&self) -> Type {
        Type::Choice(REVIEW)
    }

    fn default(&self) -> Value {
        Value::Text("off".to_owned())
    }
}

/// How much oversight a level of `plan` or `review` is (`off` least); a
/// word the knob does not know ranks as `off`.
pub fn rank(knob: &dyn Knob, value: &Value) -> usize {
    let Type::Choice(words) = knob.ty() else {
        return 0;
    };
    value
        .as_str()
        .and_then(|v| words.iter().position(|w| *w == v))
        .unwrap_or(0)
}

/// The oversight knobs, whose issue value may not rank below the repo's.
pub fn oversight() -> [&'static dyn Knob; 2] {
    [&Plan, &Review]
}
