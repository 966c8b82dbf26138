//! The schemas of knobs (issue 27): a knob's value by its registered type,
//! and a set of knobs as a request gives it, from the registry itself.

use serde_json::{Value, json};
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type,
};

use super::{int, one_of_strings, string};
use crate::knob::{self, MAX_GLOB_LEN, MAX_GLOBS, MAX_TEXT};

/// A knob's value as the API shows it: a string, a bool, a whole number or
/// a list of strings.
pub fn knob_value() -> OneOfBuilder {
    OneOfBuilder::new()
        .item(string(false))
        .item(ObjectBuilder::new().schema_type(Type::Boolean))
        .item(int(i64::MIN, i64::MAX, false))
        .item(ArrayBuilder::new().items(string(false)))
}

/// What a knob allows: a choice's words (or a bool's), an integer's
/// bounds, or `null` (globs and text, whose rules its description says).
pub fn knob_allowed() -> OneOfBuilder {
    OneOfBuilder::new()
        .item(ArrayBuilder::new().items(string(false)))
        .item(
            ObjectBuilder::new()
                .property("min", int(i64::MIN, i64::MAX, false))
                .property("max", int(i64::MIN, i64::MAX, false))
                .required("min")
                .required("max"),
        )
        .item(ObjectBuilder::new().schema_type(Type::Null))
}

pub fn knob_type() -> ObjectBuilder {
    one_of_strings(
        &["choice", "bool", "integer", "globs", "text"],
        false,
        false,
    )
}

pub fn knob_phases() -> ArrayBuilder {
    let phases: Vec<&str> = knob::Phase::ALL.iter().map(|p| p.as_str()).collect();
    ArrayBuilder::new().items(one_of_strings(&phases, false, false))
}

/// A glob as `knob::check` takes it (its narrow alphabet; the `.`/`..`
/// and parsing rules are the server's).
fn glob() -> ObjectBuilder {
    string(false)
        .min_length(Some(1))
        .max_length(Some(MAX_GLOB_LEN))
        .pattern(Some(r"^[A-Za-z0-9._\-/*?\[\]{}!+@=~,]+$"))
}

/// One of these words as the server matches it: in any case, blanks
/// around it trimmed (`check`).
pub(super) fn choice(words: &[&str]) -> ObjectBuilder {
    let any_case = |w: &str| -> String {
        w.chars()
            .map(|c| {
                let (lo, up) = (c.to_ascii_lowercase(), c.to_ascii_uppercase());
                if lo == up {
                    regex_escape(c)
                } else {
                    format!("[{lo}{up}]")
                }
            })
            .collect()
    };
    let alternatives: Vec<String> = words.iter().map(|w| any_case(w)).collect();
    string(false).pattern(Some(super::trimmed(&format!(
        "(?:{})",
        alternatives.join("|")
    ))))
}

fn regex_escape(c: char) -> String {
    if c.is_ascii_alphanumeric() || c == '_' {
        c.to_string()
    } else {
        format!("\\{c}")
    }
}

/// One knob's value in a request: its type, or `""`/`null` to leave it
/// unset.
fn one(k: &dyn knob::Knob) -> Schema {
    let unset = || {
        ObjectBuilder::new()
            .schema_type(SchemaType::AnyValue)
            .enum_values(Some([json!(""), Value::Null]))
    };
    let either = |typed: Schema| -> Schema {
        OneOfBuilder::new()
            .item(typed)
            .item(unset())
            .description(Some(k.description()))
            .into()
    };
    match k.ty() {
        knob::Type::Choice(words) => either(choice(words).into()),
        knob::Type::Bool => ObjectBuilder::new()
            .schema_type(SchemaType::AnyValue)
            .enum_values(Some([json!(true), json!(false), json!(""), Value::Null]))
            .description(Some(k.description()))
            .into(),
        knob::Type::Int { min, max } => either(int(min, max, false).into()),
        knob::Type::Globs => either(
            ArrayBuilder::new()
                .items(glob())
                .max_items(Some(MAX_GLOBS))
                .into(),
        ),
        knob::Type::Text => either(
            string(false)
                .min_length(Some(1))
                .max_length(Some(MAX_TEXT))
                .pattern(Some(r"^[^\x00-\x08\x0b-\x1f\x7f-\x9f]*$"))
                .into(),
        ),
    }
}

/// Every registered knob as a property, nothing else.
fn registered() -> ObjectBuilder {
    let mut o = ObjectBuilder::new().schema_type(Type::Object);
    for k in knob::all() {
        o = o.property(k.key(), one(*k));
    }
    o
}

/// `knobs` of a settings or repo change: the whole set, replaced.
pub fn knobs_patch() -> ObjectBuilder {
    registered()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .description(Some(
            "The knobs set here, replacing the ones set before (`{}` or `null` clears them all; \
             absent keeps them; a key's `\"\"` or \
             `null` leaves one unset, so it inherits). Keys and values: `GET /knobs`.",
        ))
}

/// `knobs` of a built-in issue: the registered knobs and the issue
/// layer's keys (`model`, `effort`, the repo's provider's options, the
/// budgets), whose values must fit the repo (its provider's catalogs, its
/// allowed models and caps): rules of the stored repo the document cannot
/// state.
pub fn issue_knobs() -> ObjectBuilder {
    let text = || string(false).max_length(Some(200));
    let mut o = registered()
        .property("model", text())
        .property("effort", text());
    let mut options: Vec<&str> = crate::provider::all()
        .iter()
        .flat_map(|p| p.spawn_options().iter().map(|o| o.key))
        .collect();
    options.sort();
    options.dedup();
    for key in options {
        o = o.property(
            key,
            ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::String, Type::Boolean])),
        );
    }
    let (lo, hi) = crate::settings::MAX_TOKENS;
    let (tlo, thi) = crate::settings::RUN_TIMEOUT_MINUTES;
    let (clo, chi) = crate::settings::MAX_COST_NANO_USD;
    o.property("max_tokens", int(lo, hi, false))
        .property(
            "max_cost_usd",
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(clo as f64 / 1e9))
                .maximum(Some(chi as f64 / 1e9)),
        )
        .property("run_timeout_minutes", int(tlo, thi, false))
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .description(Some(
            "The issue's directives, replacing the ones set before (`{}` clears them): the \
             registered knobs (`GET /knobs`), and `model`, `effort`, the repo's provider's \
             options and the budgets, which may only narrow what the repo allows.",
        ))
}

/// `knobs` of a new built-in issue: as [`issue_knobs`], or `null` for none.
pub fn new_issue_knobs() -> ObjectBuilder {
    issue_knobs().schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
}

/// Knobs as lab shows them: checked values by key.
pub fn knobs_shown() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::RefOr(
            utoipa::openapi::RefOr::T(knob_value().into()),
        )))
        .description(Some(
            "Knobs set here, by key (`GET /knobs`); a knob not listed inherits.",
        ))
}

/// A repo's allowed models: any provider's (which fit is the repo's
/// provider's rule).
pub fn allowed_models_patch() -> ArrayBuilder {
    let mut models: Vec<&str> = crate::provider::all()
        .iter()
        .flat_map(|p| p.models().iter().copied())
        .collect();
    models.sort();
    models.dedup();
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(one_of_strings(&models, false, false))
        .max_items(Some(crate::repo::MAX_ALLOWED_MODELS))
}
