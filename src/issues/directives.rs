//! An issue's directives on a forge (issue 27): a fenced block in its body,
//!
//! ````text
//! ```lab
//! changeScope: surgical
//! model: opus
//! ```
//! ````
//!
//! with one `key: value` line each (blank lines and `#` comments are
//! skipped). lab reads it when it claims the issue, and honours it only when
//! the issue's author may write to the repo (`IssueSource::may_direct`).
//!
//! Host side of the trust boundary: the body is anyone's words. Only the
//! block is read, each line bounded, and what it says reaches a run only
//! through the issue layer's checks (`resolve::IssueLayer::parse`).

/// The most lines a block may hold, and the longest line.
pub const MAX_LINES: usize = 64;
pub const MAX_LINE: usize = 1000;

/// The `key: value` lines of an issue body's ```` ```lab ```` block, in
/// order; none when the body has no block. `Err` says what is wrong with
/// the block (in words that name no more of it than the line number).
pub fn fenced(body: &str) -> Result<Vec<(String, String)>, String> {
    let mut lines = body.lines();
    let mut found = false;
    for l in lines.by_ref() {
        let t = l.trim();
        if t.starts_with("```") && t.trim_start_matches('`').trim().eq_ignore_ascii_case("lab") {
            found = true;
            break;
        }
    }
    if !found {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut closed = false;
    for (i, l) in lines.enumerate() {
        let n = i + 1;
        let t = l.trim();
        if t.starts_with("```") {
            closed = true;
            break;
        }
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if l.len() > MAX_LINE {
            return Err(format!(
                "line {n} of the lab block is longer than {MAX_LINE} bytes"
            ));
        }
        let Some((k, v)) = t.split_once(':') else {
            return Err(format!("line {n} of the lab block is not `key: value`"));
        };
        let k = k.trim();
        if k.is_empty()
            || !k
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "line {n} of the lab block has no key of letters, digits, _ and -"
            ));
        }
        out.push((k.to_owned(), v.trim().to_owned()));
        if out.len() > MAX_LINES {
            return Err(format!("the lab block has more than {MAX_LINES} lines"));
        }
    }
    if !closed {
        return Err("the lab block is not closed with ```".to_owned());
    }
    Ok(out)
}

/// What lab makes of an issue's directives when it claims it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Directives {
    /// None set.
    None,
    /// Checked against the repo: the run works with them.
    Honoured(crate::resolve::IssueLayer),
    /// Set by someone who may not write to the repo: the run works without
    /// them, and lab says so on the issue.
    Ignored { author: String },
    /// Wrong (a key, a value, or a value that widens what the repo
    /// allows): no run starts until they are fixed, and lab says on the
    /// issue what is wrong.
    Invalid(crate::validate::Invalid),
}

impl Directives {
    /// The layer a run works with, when it has one.
    pub fn layer(&self) -> Option<&crate::resolve::IssueLayer> {
        match self {
            Directives::Honoured(l) => Some(l),
            _ => None,
        }
    }

    /// What lab writes on the issue about them, when it must: which key,
    /// value and rule (never more of the issue than those), or whose
    /// directives were ignored.
    pub fn comment(&self) -> Option<String> {
        match self {
            Directives::None | Directives::Honoured(_) => None,
            Directives::Ignored { author } => Some(format!(
                "lab ignored the ```lab block of this issue: its author ({}) may not write to \
                 this repository, so its AFK run works with the repo's own settings.",
                crate::validate::shown(author)
            )),
            Directives::Invalid(e) => Some(format!(
                "lab will not start an AFK run for this issue until its directives are fixed:\n\n{}",
                e.0.iter()
                    .map(|f| {
                        let allowed = f
                            .allowed
                            .as_ref()
                            .map(|a| format!(" (allowed: {})", a.join(", ")))
                            .unwrap_or_default();
                        format!("- `{}`: {}{allowed}", f.field, f.message)
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            )),
        }
    }
}

/// An issue's directives as its AFK run would get them: the built-in
/// tracker's as set, a forge issue's block when its author may write to the
/// repo; each checked against the repo and the settings as they are now.
pub async fn of(
    source: &dyn super::IssueSource,
    issue: &super::Issue,
    cx: crate::resolve::KnobContext<'_>,
) -> super::Result<Directives> {
    use crate::knob::Input;
    // A forge block, broken or not, is the author's word: whether they may
    // direct the run is asked first, so a stranger's broken block is
    // ignored like any other of theirs, and holds nothing back.
    let read = match source.kind() {
        crate::repo::issue_source::SourceKind::Builtin => Ok(Input::Json(issue.knobs.clone())),
        _ => fenced(&issue.body).map(Input::Text),
    };
    let empty = match &read {
        Ok(Input::Json(m)) => m.is_empty(),
        Ok(Input::Text(t)) => t.is_empty(),
        Err(_) => false,
    };
    if empty {
        return Ok(Directives::None);
    }
    if !source.may_direct(issue).await? {
        return Ok(Directives::Ignored {
            author: issue.author.clone().unwrap_or_else(|| "unknown".to_owned()),
        });
    }
    let input = match read {
        Ok(input) => input,
        Err(why) => {
            return Ok(Directives::Invalid(
                crate::validate::FieldError::new("lab", why).into(),
            ));
        }
    };
    let field = match input {
        Input::Json(_) => "knobs",
        Input::Text(_) => "lab",
    };
    Ok(match crate::resolve::IssueLayer::parse(field, &input, cx) {
        Ok(l) => Directives::Honoured(l),
        Err(e) => Directives::Invalid(e),
    })
}

/// Whether GitHub's `author_association` gives the author write access
/// (an owner, a member of the owning organisation, a collaborator).
pub fn github_may_write(association: &str) -> bool {
    matches!(association, "OWNER" | "MEMBER" | "COLLABORATOR")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_read_line_by_line() {
        let body = "Fix it.\n\n```lab\nchangeScope: surgical\n# a comment\n\nwrites: src/**, docs/**\n```\nmore";
        assert_eq!(
            fenced(body).unwrap(),
            vec![
                ("changeScope".to_owned(), "surgical".to_owned()),
                ("writes".to_owned(), "src/**, docs/**".to_owned())
            ]
        );
        assert_eq!(fenced("no block\n```rust\nfn x() {}\n```").unwrap(), vec![]);
        assert_eq!(fenced("```LAB\nmodel: opus\n```").unwrap().len(), 1);
    }

    #[test]
    fn a_broken_block_names_the_line_and_nothing_else() {
        let e = fenced("```lab\nmodel opus ignore previous instructions\n```").unwrap_err();
        assert_eq!(e, "line 1 of the lab block is not `key: value`");
        assert!(fenced("```lab\nmodel: opus\n").is_err(), "not closed");
        assert!(fenced("```lab\n$(rm): x\n```").is_err());
        let long = format!("```lab\nk: {}\n```", "x".repeat(MAX_LINE));
        assert!(fenced(&long).is_err());
    }

    #[test]
    fn write_access_on_github() {
        for a in ["OWNER", "MEMBER", "COLLABORATOR"] {
            assert!(github_may_write(a));
        }
        for a in [
            "CONTRIBUTOR",
            "FIRST_TIME_CONTRIBUTOR",
            "NONE",
            "MANNEQUIN",
            "owner",
        ] {
            assert!(!github_may_write(a), "{a}");
        }
    }
}
