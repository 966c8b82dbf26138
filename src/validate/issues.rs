//! The checks of what issues, pull requests and forges carry: labels,
//! titles, bodies, a forge's address, repo and token.

use super::{Errors, FieldError, Invalid, has_control, shown};

/// The most characters of a label, once trimmed.
pub const MAX_LABEL: usize = 100;

/// An issue label.
pub fn label(field: &str, value: &str) -> Result<String, FieldError> {
    let v = value.trim();
    if v.is_empty() || v.chars().count() > MAX_LABEL || has_control(v) || v.contains(',') {
        return Err(
            FieldError::new(field, "must be 1-100 printable characters without commas")
                .with_value(shown(value)),
        );
    }
    Ok(v.to_owned())
}

/// A title of an issue or pull request: one line of 1 to [`MAX_TITLE`]
/// characters, trimmed.
pub fn title(field: &str, value: &str) -> Result<String, FieldError> {
    let t = value.trim();
    if t.is_empty() || t.chars().count() > MAX_TITLE || has_control(t) {
        return Err(FieldError::new(
            field,
            format!("must be one line of 1 to {MAX_TITLE} characters"),
        ));
    }
    Ok(t.to_owned())
}

pub const MAX_TITLE: usize = 256;

/// The body of an issue or pull request: at most [`MAX_TEXT`] bytes, no NUL.
pub fn text(field: &str, value: &str) -> Result<String, FieldError> {
    if value.len() > MAX_TEXT || value.contains('\0') {
        return Err(FieldError::new(field, "must be at most 64 KiB of text"));
    }
    Ok(value.to_owned())
}

pub const MAX_TEXT: usize = 64 * 1024;

/// An issue's or a pull request's `title` and `body`, both checked.
pub fn title_and_body(t: &str, b: &str) -> Result<(String, String), Invalid> {
    let mut errs = Errors::default();
    let t = errs.check(title("title", t));
    let b = errs.check(text("body", b));
    errs.finish()?;
    Ok(t.zip(b).expect("both checked"))
}

/// A forge's address: an http(s) URL with a host, without spaces, a query
/// or a fragment (lab appends API paths to it).
pub fn forge_url(field: &str, value: &str) -> Result<String, FieldError> {
    let ok = (value.starts_with("https://") || value.starts_with("http://"))
        && !value.contains(char::is_whitespace)
        && reqwest::Url::parse(value).is_ok_and(|url| {
            url.host_str().is_some_and(|h| !h.is_empty())
                && url.query().is_none()
                && url.fragment().is_none()
        });
    if !ok {
        return Err(FieldError::new(
            field,
            "must be an http(s) URL with a host, without spaces, a query or a fragment",
        )
        .with_value(shown(value)));
    }
    Ok(value.to_owned())
}

/// A forge address that fits its kind (`github` or `gitea`), or what to
/// give instead: GitHub's web address is not its API (`https://api.github.com`);
/// a GitHub Enterprise Server's API is under `/api/v3`; a Gitea/Forgejo
/// address is the forge's web address, to which lab adds `/api/v1` itself.
pub fn forge_url_fits(field: &str, github: bool, value: &str) -> Result<(), FieldError> {
    let Ok(url) = reqwest::Url::parse(value) else {
        return Ok(());
    };
    let host = url.host_str().unwrap_or("").to_ascii_lowercase();
    let path = url.path().trim_end_matches('/');
    let origin = format!("{}://{}", url.scheme(), url.authority());
    let refuse = |why: String| Err(FieldError::new(field, why).with_value(shown(value)));
    if github {
        if host == "github.com" || host == "www.github.com" {
            return refuse(
                "is GitHub's web address; lab talks to its API: https://api.github.com".into(),
            );
        }
        if host != "api.github.com" && !path.ends_with("/api/v3") {
            return refuse(format!(
                "a GitHub Enterprise Server's API is under /api/v3: {origin}{path}/api/v3"
            ));
        }
    } else if path.ends_with("/api/v1") {
        return refuse(format!(
            "names the forge's API; give its web address (lab adds /api/v1): {origin}{}",
            path.trim_end_matches("/api/v1")
        ));
    }
    Ok(())
}

/// A repo on a forge: `owner/name`, each of letters, digits, '.', '_', '-'.
pub fn forge_repo(field: &str, value: &str) -> Result<String, FieldError> {
    let part = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    };
    if !value
        .split_once('/')
        .is_some_and(|(o, n)| part(o) && part(n))
    {
        return Err(FieldError::new(field, "must be owner/name").with_value(shown(value)));
    }
    Ok(value.to_owned())
}

/// A forge token: one line of at most 512 characters. It is a secret: the
/// error never echoes it.
pub fn forge_token(field: &str, value: &str) -> Result<String, FieldError> {
    // It travels in an HTTP header: printable ASCII only.
    if value.len() > 512 || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(FieldError::new(
            field,
            "must be at most 512 printable ASCII characters, without spaces",
        ));
    }
    Ok(value.to_owned())
}

/// Labels of a request, each checked; `field` names them (`labels[0]`, …).
pub fn labels(field: &str, values: &[String], errs: &mut Errors) -> Vec<String> {
    values
        .iter()
        .enumerate()
        .filter_map(|(i, l)| errs.check(label(&format!("{field}[{i}]"), l)))
        .collect()
}

/// A new issue: its title, body and labels, every value checked.
pub fn new_issue(
    t: &str,
    b: &str,
    given: &[String],
) -> Result<(String, String, Vec<String>), Invalid> {
    let mut errs = Errors::default();
    let text = errs.check_all(title_and_body(t, b));
    let labels = labels("labels", given, &mut errs);
    errs.finish()?;
    let (t, b) = text.expect("checked");
    Ok((t, b, labels))
}

/// Labels to put on an issue and to take off it: at most
/// [`MAX_LABEL_CHANGES`] each (none at all changes nothing).
pub fn label_change(
    add: &[String],
    remove: &[String],
) -> Result<(Vec<String>, Vec<String>), Invalid> {
    let mut errs = Errors::default();
    for (field, list) in [("add", add), ("remove", remove)] {
        if list.len() > MAX_LABEL_CHANGES {
            errs.push(FieldError::new(
                field,
                format!("must name at most {MAX_LABEL_CHANGES} labels"),
            ));
        }
    }
    let a = labels("add", add, &mut errs);
    let r = labels("remove", remove, &mut errs);
    errs.finish()?;
    Ok((a, r))
}

/// The most labels one change puts on, and the most it takes off.
pub const MAX_LABEL_CHANGES: usize = 20;
