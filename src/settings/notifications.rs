//! The operator's notification endpoints, and how a request's list replaces
//! the stored one (issue 13 §5, ADR 15).
//!
//! An endpoint's URL is its secret (a Slack hook's path, an ntfy topic), so
//! lab shows it redacted (`scheme://host/…` and, for a long URL, its last
//! four characters) and never whole. A request may send a redacted URL back
//! for an endpoint it got from lab: it stands for the stored URL (and its
//! token) whose redaction it is, so a form or `labctl` can change the list
//! without ever knowing the secrets. Invariant: no IO here.

use crate::domain::{Change, NotifyEvent, NotifyKind};
use crate::validate::{self, Choice, Errors, FieldError, Invalid};

/// Most endpoints lab keeps.
pub const MAX_ENDPOINTS: usize = 20;
/// Longest URL lab accepts.
pub const MAX_URL: usize = 2048;
/// Longest token lab accepts.
pub const MAX_TOKEN: usize = 512;
/// What a redacted URL has in place of the secret part.
pub const ELLIPSIS: char = '…';

/// One endpoint, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub kind: NotifyKind,
    pub url: String,
    /// Sent as `Authorization: Bearer …` (webhook and ntfy endpoints).
    pub token: Option<String>,
    /// The events it wants: never empty, in [`NotifyEvent::ALL`]'s order.
    pub events: Vec<NotifyEvent>,
}

impl Endpoint {
    pub fn redacted_url(&self) -> String {
        redact(&self.url)
    }

    pub fn wants(&self, e: NotifyEvent) -> bool {
        self.events.contains(&e)
    }

    /// The events as stored: comma-separated, in order.
    pub fn events_text(&self) -> String {
        let v: Vec<&str> = self.events.iter().map(|e| e.as_str()).collect();
        v.join(",")
    }
}

/// The events of a stored `events_text`.
pub fn parse_events(text: &str) -> Result<Vec<NotifyEvent>, String> {
    text.split(',')
        .map(|e| e.parse::<NotifyEvent>())
        .collect::<Result<Vec<_>, _>>()
        .map(canonical)
}

fn canonical(mut events: Vec<NotifyEvent>) -> Vec<NotifyEvent> {
    events.sort_by_key(|e| NotifyEvent::ALL.iter().position(|a| a == e));
    events.dedup();
    events
}

/// A URL as lab shows it: scheme, host and port, then `/…`, then the last
/// four characters when the rest is long enough that they give little away.
/// Credentials in the URL are never shown.
pub fn redact(url: &str) -> String {
    let Ok(u) = reqwest::Url::parse(url) else {
        return ELLIPSIS.to_string();
    };
    let host = u.host_str().unwrap_or_default();
    let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
    let mut rest = u.path().to_owned();
    if let Some(q) = u.query() {
        rest = format!("{rest}?{q}");
    }
    if let Some(f) = u.fragment() {
        rest = format!("{rest}#{f}");
    }
    let rest: Vec<char> = rest.chars().collect();
    let tail: String = if rest.len() >= 16 {
        rest[rest.len() - 4..].iter().collect()
    } else {
        String::new()
    };
    format!("{}://{host}{port}/{ELLIPSIS}{tail}", u.scheme())
}

/// One endpoint as a request gives it (spellings unchecked).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointInput {
    pub kind: String,
    /// A URL, or the redacted URL lab showed for a stored endpoint.
    pub url: String,
    /// `Keep`: the stored endpoint's token when `url` is its redacted URL,
    /// else none.
    pub token: Change<String>,
    pub events: Vec<String>,
}

/// The list that replaces the stored one, or every field that was wrong.
pub fn apply(current: &[Endpoint], input: &[EndpointInput]) -> Result<Vec<Endpoint>, Invalid> {
    let mut errs = Errors::default();
    if input.len() > MAX_ENDPOINTS {
        errs.push(
            FieldError::new(
                "notifications",
                format!("at most {MAX_ENDPOINTS} endpoints"),
            )
            .with_value(input.len().to_string()),
        );
    }
    let mut used = vec![false; current.len()];
    let mut next = Vec::new();
    for (i, e) in input.iter().enumerate() {
        let field = |name: &str| format!("notifications.{i}.{name}");
        let kind = errs.check(validate::choice::<NotifyKind>(&field("kind"), &e.kind));
        let (url, stored_token) = if e.url.contains(ELLIPSIS) {
            match stored_for(current, &mut used, i, &e.url) {
                Some(s) => (Some(s.url.clone()), s.token.clone()),
                None => {
                    errs.push(
                        FieldError::new(
                            field("url"),
                            "is a redacted URL that stands for no stored endpoint; give the whole URL",
                        )
                        .with_value(validate::shown(&e.url)),
                    );
                    (None, None)
                }
            }
        } else {
            (errs.check(url_value(&field("url"), &e.url)), None)
        };
        let token = match &e.token {
            Change::Keep => stored_token,
            Change::Clear => None,
            Change::Set(t) if t.is_empty() => None,
            Change::Set(t) => errs.check(token_value(&field("token"), t)),
        };
        if kind == Some(NotifyKind::Slack) && token.is_some() {
            errs.push(FieldError::new(
                field("token"),
                "a Slack incoming webhook takes no token (its URL is the secret)",
            ));
        }
        let events = events_value(&field("events"), &e.events, &mut errs);
        if let (Some(kind), Some(url), Some(events)) = (kind, url, events) {
            next.push(Endpoint {
                kind,
                url,
                token,
                events,
            });
        }
    }
    errs.finish()?;
    Ok(next)
}

/// The stored endpoint a redacted URL stands for: the one at the same place
/// in the list if its redaction matches, else the first unused one that does.
fn stored_for<'a>(
    current: &'a [Endpoint],
    used: &mut [bool],
    i: usize,
    redacted: &str,
) -> Option<&'a Endpoint> {
    let fits = |j: usize| !used[j] && current[j].redacted_url() == redacted;
    let j = if i < current.len() && fits(i) {
        i
    } else {
        (0..current.len()).find(|&j| fits(j))?
    };
    used[j] = true;
    Some(&current[j])
}

/// An http(s) URL with a host, without whitespace. It is a secret: an error
/// never echoes it.
fn url_value(field: &str, value: &str) -> Result<String, FieldError> {
    let plain = (value.starts_with("https://") || value.starts_with("http://"))
        && value.chars().count() <= MAX_URL
        && !value.chars().any(|c| c.is_whitespace() || c.is_control());
    let parsed = reqwest::Url::parse(value)
        .ok()
        .filter(|u| plain && u.host_str().is_some_and(|h| !h.is_empty()));
    match parsed {
        Some(u) => Ok(u.to_string()),
        None => Err(FieldError::new(
            field,
            format!(
                "must be an http:// or https:// URL with a host, without spaces, at most {MAX_URL} characters"
            ),
        )),
    }
}

/// A token: printable ASCII, at most [`MAX_TOKEN`] characters (it travels in
/// a header). Never echoed.
fn token_value(field: &str, value: &str) -> Result<String, FieldError> {
    if value.len() > MAX_TOKEN || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(FieldError::new(
            field,
            format!("must be at most {MAX_TOKEN} printable ASCII characters, without spaces"),
        ));
    }
    Ok(value.to_owned())
}

fn events_value(field: &str, values: &[String], errs: &mut Errors) -> Option<Vec<NotifyEvent>> {
    let allowed = NotifyEvent::spellings();
    if values.is_empty() {
        errs.push(FieldError::new(field, "must name at least one event").with_allowed(&allowed));
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for (j, v) in values.iter().enumerate() {
        match validate::choice::<NotifyEvent>(&format!("{field}.{j}"), v) {
            Ok(e) => out.push(e),
            Err(e) => {
                errs.push(e.with_allowed(&allowed));
                ok = false;
            }
        }
    }
    ok.then(|| canonical(out))
}

#[cfg(test)]
mod tests;
