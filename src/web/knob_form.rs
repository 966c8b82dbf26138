//! Knobs on the pages (issue 27), from the registry: a field per
//! registered knob, of its type, on the settings page and a repo's (a new
//! knob needs no template change), and a post's knob fields as the
//! replace-set the write takes.

use super::forms::{Form, FormErrors, FormField, Kind, select};
use crate::knob::{self, Input, Set, Type};

/// The form field names of knobs: `knobs.<key>`.
pub fn field_name(key: &str) -> String {
    format!("knobs.{key}")
}

/// A field for each registered knob; `inherit(key)` labels the empty
/// choice (what the knob is without a value here).
pub fn fields(
    current: &Set,
    form: Option<&Form>,
    inherit: &dyn Fn(&str) -> String,
    errors: &mut FormErrors,
) -> Vec<FormField> {
    knob::all()
        .iter()
        .map(|k| {
            let name = field_name(k.key());
            let stored = current
                .get(k.key())
                .map(knob::Value::shown)
                .unwrap_or_default();
            let value = match form {
                Some(f) => f.get(&name).unwrap_or("").to_owned(),
                None => stored,
            };
            let kind = match k.ty() {
                Type::Choice(words) => select(Some(inherit(k.key())), words, &value),
                Type::Bool => select(Some(inherit(k.key())), &["true", "false"], &value),
                Type::Int { min, max } => Kind::Number { value, min, max },
                Type::Globs | Type::Text => Kind::Text {
                    value,
                    placeholder: inherit(k.key()),
                },
            };
            let help = match k.ty() {
                Type::Globs => format!("{} Separate globs with commas.", k.description()),
                _ => k.description().to_owned(),
            };
            FormField::new(&name, k.key(), kind)
                .help(help)
                .error_from(errors)
        })
        .collect()
}

/// The knobs a post sets, when it showed them (`knobs.shown`): the whole
/// set, an empty field leaving its knob unset.
pub fn input(form: &Form) -> Option<Input> {
    if !form.has("knobs.shown") {
        return None;
    }
    Some(Input::Text(
        knob::all()
            .iter()
            .filter_map(|k| {
                form.get(&field_name(k.key()))
                    .map(|v| (k.key().to_owned(), v.to_owned()))
            })
            .collect(),
    ))
}

/// "same as …" for a knob: the value and where it comes from.
pub fn inherited(value: &knob::Value, from: &str) -> String {
    match value.shown() {
        v if v.is_empty() => format!("same as {from}: none"),
        v => format!("same as {from}: {v}"),
    }
}
