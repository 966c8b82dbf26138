//! Values of a posted form as changes: a text or select (empty clears), a
//! whole number, a dollar amount, a provider's spawn options. The settings
//! page and the repo forms read their posts through these.

use super::forms::Form;
use crate::domain::Change;
use crate::provider::Provider;
use crate::validate::{Errors as ValueErrors, FieldError};

/// A select or text value: empty clears (inherit).
pub fn change(form: &Form, name: &str) -> Change<String> {
    match form.value(name) {
        Some(v) => Change::Set(v),
        None => Change::Clear,
    }
}

/// A number field: empty clears (the default); not a number is an error.
pub fn number(form: &Form, name: &str, errs: &mut ValueErrors) -> Change<i64> {
    match form.value(name) {
        None => Change::Clear,
        Some(v) => match v.parse() {
            Ok(n) => Change::Set(n),
            Err(_) => {
                errs.push(FieldError::new(name, "must be a whole number").with_value(v));
                Change::Keep
            }
        },
    }
}

/// A dollar amount of a posted form, as billionths; empty clears.
pub fn dollars(form: &Form, name: &str, errs: &mut ValueErrors) -> Change<i64> {
    match form.value(name) {
        None => Change::Clear,
        Some(v) => match v.trim().trim_start_matches('$').parse::<f64>() {
            Ok(usd) if usd.is_finite() => Change::Set(crate::settings::usd_to_nano(usd)),
            _ => {
                errs.push(
                    FieldError::new(name, "must be an amount of US dollars, like 2.50")
                        .with_value(v),
                );
                Change::Keep
            }
        },
    }
}

/// The options of one provider from a posted form's selects (an empty one
/// clears the stored value).
pub fn options_patch(
    p: &dyn Provider,
    prefix: &str,
    form: &Form,
) -> std::collections::BTreeMap<String, Change<String>> {
    p.spawn_options()
        .iter()
        .filter_map(|o| {
            let name = format!("{prefix}afk_options.{}", o.key);
            if !form.has(&name) {
                return None;
            }
            Some((o.key.to_owned(), change(form, &name)))
        })
        .collect()
}
