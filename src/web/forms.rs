//! Posted forms, and the fields pages render from provider schemas.

use std::collections::HashMap;

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::Response;

use super::Page;
use crate::validate::{FieldError, Invalid, shown};

/// A posted form: names to values (an unchecked checkbox is absent).
#[derive(Debug, Default, Clone)]
pub struct Form(pub HashMap<String, String>);

impl Form {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// The value, trimmed; `None` when absent or blank.
    pub fn value(&self, name: &str) -> Option<String> {
        self.get(name)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    }

    pub fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }
}

impl<S: Send + Sync> FromRequest<S> for Form {
    type Rejection = Response;
    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let body = match axum::extract::RawForm::from_request(req, state).await {
            Ok(axum::extract::RawForm(body)) => body,
            Err(e) => {
                return Err(Page::error(
                    e.status(),
                    &format!("The form could not be read: {}", e.body_text()),
                ));
            }
        };
        decode_form(&body)
            .map(Form)
            .map_err(|m| Page::error(StatusCode::BAD_REQUEST, &m))
    }
}

/// A urlencoded form, strictly: a name or value that is not UTF-8 once
/// decoded is refused, naming the field (a lenient decoder would turn it
/// into U+FFFD and pass it on). A name given twice keeps its last value.
fn decode_form(body: &[u8]) -> Result<HashMap<String, String>, String> {
    let mut out = HashMap::new();
    for pair in body.split(|b| *b == b'&').filter(|p| !p.is_empty()) {
        let (name, value) = match pair.iter().position(|b| *b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &[][..]),
        };
        let name = decode(name).ok_or("A field name in the form is not UTF-8 text.")?;
        let value = decode(value).ok_or_else(|| {
            format!(
                "The field '{}' is not UTF-8 text; lab takes text only.",
                shown(&name)
            )
        })?;
        out.insert(name, value);
    }
    Ok(out)
}

/// One urlencoded name or value: `+` is a space, `%XX` a byte.
fn decode(raw: &[u8]) -> Option<String> {
    let spaced: Vec<u8> = raw
        .iter()
        .map(|b| if *b == b'+' { b' ' } else { *b })
        .collect();
    percent_encoding::percent_decode(&spaced)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// FormErrors by field name, for showing each next to its field.
#[derive(Debug, Default, Clone)]
pub struct FormErrors(pub HashMap<String, String>);

impl From<Invalid> for FormErrors {
    fn from(e: Invalid) -> Self {
        let mut m = HashMap::new();
        for FieldError { field, message, .. } in e.0 {
            m.entry(field).or_insert(message);
        }
        FormErrors(m)
    }
}

impl FormErrors {
    pub fn take(&mut self, field: &str) -> Option<String> {
        self.0.remove(field)
    }

    /// FormErrors no field on the page claimed (shown at the top).
    pub fn rest(self) -> Vec<String> {
        let mut v: Vec<String> = self
            .0
            .into_iter()
            .map(|(f, m)| format!("{f}: {m}"))
            .collect();
        v.sort();
        v
    }
}

/// One choice of a select.
#[derive(Debug, Clone)]
pub struct Choice {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Select(Vec<Choice>),
    /// Checked or not; the form also carries `<name>.shown` so an unchecked
    /// box is told from an absent one.
    Checkbox(bool),
    Number {
        value: String,
        min: i64,
        max: i64,
    },
    Text {
        value: String,
        placeholder: String,
    },
    TextArea(String),
    /// A secret: never filled in.
    Password,
}

/// One form field, as a page renders it.
#[derive(Debug, Clone)]
pub struct FormField {
    pub name: String,
    pub label: String,
    pub help: String,
    pub error: Option<String>,
    pub kind: Kind,
}

impl FormField {
    pub fn new(name: impl Into<String>, label: impl Into<String>, kind: Kind) -> FormField {
        FormField {
            name: name.into(),
            label: label.into(),
            help: String::new(),
            error: None,
            kind,
        }
    }

    pub fn help(mut self, h: impl Into<String>) -> FormField {
        self.help = h.into();
        self
    }

    pub fn error_from(mut self, errors: &mut FormErrors) -> FormField {
        self.error = errors.take(&self.name);
        self
    }

    /// An id for the HTML element.
    pub fn id(&self) -> String {
        format!("f-{}", self.name.replace(['.', '[', ']', ' '], "-"))
    }
}

/// A select: an optional first "inherit" entry (value ""), then the values.
pub fn select(inherit: Option<String>, values: &[&str], current: &str) -> Kind {
    let mut out = Vec::new();
    if let Some(label) = inherit {
        out.push(Choice {
            value: String::new(),
            label,
            selected: current.is_empty(),
        });
    }
    for v in values {
        out.push(Choice {
            value: (*v).to_owned(),
            label: (*v).to_owned(),
            selected: *v == current,
        });
    }
    // A stored value the catalog no longer has stays visible (and invalid).
    if !current.is_empty() && !values.contains(&current) {
        out.push(Choice {
            value: current.to_owned(),
            label: format!("{current} (not in the catalog)"),
            selected: true,
        });
    }
    Kind::Select(out)
}

/// A group of fields with a heading.
#[derive(Debug, Clone)]
pub struct Section {
    pub title: String,
    pub intro: String,
    pub fields: Vec<FormField>,
}

#[cfg(test)]
mod tests {
    use super::decode_form;

    #[test]
    fn forms_decode_strictly() {
        let f = decode_form(b"a=1+2&b=%C3%A9&c&d=&a=3").unwrap();
        assert_eq!(f["a"], "3");
        assert_eq!(f["b"], "é");
        assert_eq!(f["c"], "");
        assert_eq!(f["d"], "");
        let e = decode_form(b"csrf=x&prompt=%FF%FE").unwrap_err();
        assert!(e.contains("'prompt'") && e.contains("UTF-8"), "{e}");
        assert!(decode_form(b"%FF=1").is_err());
        assert!(decode_form(b"").unwrap().is_empty());
    }
}
