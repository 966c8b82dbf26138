//! The notification endpoints on the settings page: one group of fields per
//! endpoint, and one more to add one. URLs show redacted and tokens never;
//! a redacted URL posted back keeps the stored one (and its token), an
//! empty URL removes the endpoint.

use super::forms::{Form, FormErrors, FormField, Kind, Section, select};
use crate::domain::{Change, NotifyEvent, NotifyKind};
use crate::settings::notifications::{Endpoint, EndpointInput, MAX_ENDPOINTS};
use crate::validate::{Choice, FieldError, Invalid};

/// Marks a posted form that showed the endpoints (a hidden field of
/// `settings.html`).
const SHOWN: &str = "notifications.shown";

fn name(i: usize, f: &str) -> String {
    format!("notifications.{i}.{f}")
}

/// The sections: the stored endpoints (or, after a refused post, the rows as
/// posted), then an empty one.
pub fn sections(stored: &[Endpoint], form: Option<&Form>, errors: &mut FormErrors) -> Vec<Section> {
    let rows = match form {
        Some(f) => (0..=MAX_ENDPOINTS)
            .take_while(|i| f.has(&name(*i, "url")))
            .count(),
        None => (stored.len() + 1).min(MAX_ENDPOINTS),
    };
    (0..rows)
        .map(|i| row(i, stored.get(i), form, errors))
        .collect()
}

fn row(i: usize, e: Option<&Endpoint>, form: Option<&Form>, errors: &mut FormErrors) -> Section {
    let posted = |f: &str| form.map(|form| form.get(&name(i, f)).unwrap_or("").to_owned());
    let kind = posted("kind").unwrap_or_else(|| {
        e.map_or(NotifyKind::Webhook, |e| e.kind)
            .as_str()
            .to_owned()
    });
    let url = posted("url").unwrap_or_else(|| e.map(Endpoint::redacted_url).unwrap_or_default());
    let mut fields = vec![
        FormField::new(
            name(i, "kind"),
            "Kind",
            select(None, &NotifyKind::spellings(), &kind),
        )
        .help("webhook: JSON; ntfy: a topic URL; slack: an incoming webhook.")
        .error_from(errors),
        FormField::new(
            name(i, "url"),
            "URL",
            Kind::Text {
                value: url,
                placeholder: "https://…".into(),
            },
        )
        .help(if e.is_some() {
            "Shown redacted: leave it as it is to keep it. Empty removes the endpoint."
        } else {
            "Empty adds none."
        })
        .error_from(errors),
    ];
    for ev in NotifyEvent::ALL {
        let checked = match form {
            Some(f) => f.get(&name(i, &format!("events.{ev}"))) == Some("true"),
            None => e.is_none_or(|e| e.wants(*ev)),
        };
        fields.push(
            FormField::new(
                name(i, &format!("events.{ev}")),
                event_label(*ev),
                Kind::Checkbox(checked),
            )
            .error_from(errors),
        );
    }
    let token_help = if e.is_some_and(|e| e.token.is_some()) {
        "A token is stored: empty keeps it, \"-\" removes it."
    } else {
        "Sent as Authorization: Bearer (webhook, ntfy). Never shown."
    };
    fields.push(
        FormField::new(name(i, "token"), "Token", Kind::Password)
            .help(token_help)
            .error_from(errors),
    );
    let title = match e {
        Some(_) => format!("Notification endpoint {}", i + 1),
        None => "New notification endpoint".into(),
    };
    Section {
        title,
        intro: "lab posts here when a run waits, ends, fails or opens a pull request.".into(),
        fields,
    }
}

fn event_label(e: NotifyEvent) -> &'static str {
    match e {
        NotifyEvent::Waiting => "When a run waits for you",
        NotifyEvent::Ended => "When a run ends",
        NotifyEvent::Failed => "When a run fails",
        NotifyEvent::PrOpened => "When a pull request is opened",
    }
}

/// The endpoints a posted form gives, with the row each came from (`None`:
/// the form did not show them); rows with an empty URL are left out.
pub fn inputs(form: &Form) -> Option<(Vec<EndpointInput>, Vec<usize>)> {
    if !form.has(SHOWN) {
        return None;
    }
    let mut list = Vec::new();
    let mut rows = Vec::new();
    for i in (0..=MAX_ENDPOINTS).take_while(|i| form.has(&name(*i, "url"))) {
        let Some(url) = form.value(&name(i, "url")) else {
            continue;
        };
        let token = match form.value(&name(i, "token")).as_deref() {
            None => Change::Keep,
            Some("-") => Change::Clear,
            Some(t) => Change::Set(t.to_owned()),
        };
        list.push(EndpointInput {
            kind: form.get(&name(i, "kind")).unwrap_or("").to_owned(),
            url,
            token,
            events: NotifyEvent::ALL
                .iter()
                .filter(|ev| form.get(&name(i, &format!("events.{ev}"))) == Some("true"))
                .map(|ev| ev.as_str().to_owned())
                .collect(),
        });
        rows.push(i);
    }
    Some((list, rows))
}

/// Errors of the posted list, named after the rows the page showed.
pub fn on_rows(e: Invalid, rows: &[usize]) -> Invalid {
    Invalid(
        e.0.into_iter()
            .map(|f| {
                let field = match f.field.strip_prefix("notifications.").and_then(|r| {
                    let (n, rest) = r.split_once('.')?;
                    Some((rows.get(n.parse::<usize>().ok()?)?, rest))
                }) {
                    Some((row, rest)) => format!("notifications.{row}.{rest}"),
                    None => f.field,
                };
                FieldError { field, ..f }
            })
            .collect(),
    )
}
