//! The review phase of an AFK issue (issue 28 §3): the verdict a review run
//! submits on a pull request's head, and its findings.
//!
//! Trust boundary: a verdict is the reviewing agent's words. lab checks its
//! shape ([`Submission::check`]), stores it, shows it on its own pages and
//! types its blocking findings, fenced as data, into the implementer's
//! session. A forge hears lab's own sentence about it (the verdict, how
//! many findings, where to read them), never its text.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::spelled::spelled;
use crate::validate::{FieldError, Invalid};

spelled! {
    /// What a reviewer concluded.
    pub enum Verdict ("verdict") {
        Approved = "approved",
        ChangesRequested = "changes_requested",
    }
}

spelled! {
    /// How much a finding weighs: a blocking one sends the work back.
    pub enum Severity ("severity") {
        Blocking = "blocking",
        Advisory = "advisory",
    }
}

/// One thing a reviewer found, at a place in the pull request's head.
/// (`ReviewFinding` in the API document: the doctor has its own `Finding`.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = ReviewFinding)]
pub struct Finding {
    /// A path relative to the repository's root.
    pub path: String,
    /// A line of that file (1 or more).
    pub line: i64,
    pub severity: Severity,
    pub message: String,
}

/// A review as it was submitted and stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub claim_id: i64,
    pub run_id: i64,
    /// The claim's round the review judged (1 for the pull request as first opened).
    pub round: i64,
    /// The commit reviewed.
    pub head: String,
    pub verdict: Verdict,
    pub summary: String,
    pub findings: Vec<Finding>,
    pub created_at: i64,
}

impl Review {
    pub fn blocking(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Blocking)
    }
}

/// The body of `labctl review submit` as sent: every field loose, so that
/// a malformed verdict is named field by field (and counted as the
/// reviewer's one retry) rather than refused by the decoder.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[schema(as = ReviewSubmission)]
pub struct Submission {
    /// `approved` or `changes_requested`.
    #[serde(default)]
    #[schema(value_type = Verdict)]
    pub verdict: Option<String>,
    /// What the reviewer concluded, in a few sentences.
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 4000)]
    pub summary: Option<String>,
    #[serde(default)]
    #[schema(value_type = Vec<Finding>)]
    pub findings: Vec<serde_json::Value>,
}

impl Submission {
    /// A submission from any JSON value: a field of the wrong type is kept
    /// as its JSON text, so [`Submission::check`] names it.
    pub fn from_value(v: &serde_json::Value) -> Submission {
        let text = |key: &str| {
            v.get(key).map(|x| match x.as_str() {
                Some(s) => s.to_owned(),
                None => x.to_string(),
            })
        };
        let findings = match v.get("findings") {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(serde_json::Value::Array(a)) => a.clone(),
            Some(other) => vec![other.clone()],
        };
        Submission {
            verdict: text("verdict"),
            summary: text("summary"),
            findings,
        }
    }
}

/// The most characters of a summary.
pub const MAX_SUMMARY: usize = 4000;
/// The most characters of a finding's message.
pub const MAX_MESSAGE: usize = 2000;
/// The most findings in one verdict.
pub const MAX_FINDINGS: usize = 100;
/// The most bytes of a finding's path.
pub const MAX_PATH: usize = 1024;

/// A checked verdict, ready to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub verdict: Verdict,
    pub summary: String,
    pub findings: Vec<Finding>,
}

impl Submission {
    /// Checks the verdict's shape; every fault is named with its field
    /// (`findings[2].line`). A verdict is consistent: `changes_requested`
    /// names at least one blocking finding, `approved` none.
    pub fn check(&self) -> Result<Checked, Invalid> {
        let mut errs = Vec::new();
        let verdict = match self.verdict.as_deref().map(str::parse::<Verdict>) {
            Some(Ok(v)) => Some(v),
            Some(Err(_)) | None => {
                let mut e = FieldError::new(
                    "verdict",
                    "approved or changes_requested: say whether the change may be merged",
                );
                e.value = self.verdict.clone();
                e.allowed = Some(Verdict::ALL.iter().map(|v| v.to_string()).collect());
                errs.push(e);
                None
            }
        };
        let summary = self.summary.as_deref().unwrap_or("").trim().to_owned();
        if summary.is_empty() {
            errs.push(FieldError::new(
                "summary",
                "the summary is empty: say what you concluded",
            ));
        } else if summary.chars().count() > MAX_SUMMARY {
            errs.push(FieldError::new(
                "summary",
                format!("at most {MAX_SUMMARY} characters are allowed"),
            ));
        }
        if self.findings.len() > MAX_FINDINGS {
            errs.push(FieldError::new(
                "findings",
                format!(
                    "{} findings; at most {MAX_FINDINGS} are allowed",
                    self.findings.len()
                ),
            ));
        }
        let mut findings = Vec::new();
        for (i, raw) in self.findings.iter().take(MAX_FINDINGS).enumerate() {
            if let Some(f) = finding(i, raw, &mut errs) {
                findings.push(f);
            }
        }
        let blocking = findings
            .iter()
            .filter(|f| f.severity == Severity::Blocking)
            .count();
        match verdict {
            Some(Verdict::ChangesRequested) if blocking == 0 && errs.is_empty() => {
                errs.push(FieldError::new(
                    "findings",
                    "changes_requested names at least one blocking finding (what must change)",
                ))
            }
            Some(Verdict::Approved) if blocking > 0 => errs.push(FieldError::new(
                "findings",
                format!(
                    "an approved change has no blocking finding ({blocking} given): \
                     ask for changes, or make them advisory"
                ),
            )),
            _ => {}
        }
        match verdict {
            Some(verdict) if errs.is_empty() => Ok(Checked {
                verdict,
                summary,
                findings,
            }),
            _ => Err(Invalid(errs)),
        }
    }
}

/// One finding, checked; its faults go to `errs`.
fn finding(i: usize, raw: &serde_json::Value, errs: &mut Vec<FieldError>) -> Option<Finding> {
    let at = |f: &str| format!("findings[{i}].{f}");
    let Some(obj) = raw.as_object() else {
        errs.push(FieldError::new(
            format!("findings[{i}]"),
            "a finding is an object: {path, line, severity, message}",
        ));
        return None;
    };
    let before = errs.len();
    let path = obj.get("path").and_then(|v| v.as_str()).unwrap_or("");
    if let Err(why) = relative_path(path) {
        errs.push(FieldError::new(at("path"), why));
    }
    let line = obj.get("line").and_then(serde_json::Value::as_i64);
    if line.is_none_or(|l| l < 1) {
        errs.push(FieldError::new(
            at("line"),
            "a line number of the file, 1 or more",
        ));
    }
    let severity = obj
        .get("severity")
        .and_then(|v| v.as_str())
        .and_then(|s| s.parse::<Severity>().ok());
    if severity.is_none() {
        let mut e = FieldError::new(at("severity"), "say how much the finding weighs");
        e.allowed = Some(Severity::ALL.iter().map(|v| v.to_string()).collect());
        errs.push(e);
    }
    let message = obj
        .get("message")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .trim();
    if message.is_empty() {
        errs.push(FieldError::new(
            at("message"),
            "the message is empty: say what is wrong",
        ));
    } else if message.chars().count() > MAX_MESSAGE {
        errs.push(FieldError::new(
            at("message"),
            format!("at most {MAX_MESSAGE} characters are allowed"),
        ));
    }
    if errs.len() > before {
        return None;
    }
    Some(Finding {
        path: path.to_owned(),
        line: line?,
        severity: severity?,
        message: message.to_owned(),
    })
}

/// Whether `p` names a file inside the repository: relative, no `..`, no
/// control characters.
fn relative_path(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("a path relative to the repository's root (src/lib.rs)".into());
    }
    if p.len() > MAX_PATH {
        return Err(format!("at most {MAX_PATH} bytes are allowed"));
    }
    if p.starts_with('/') || p.split('/').any(|c| c == "..") {
        return Err("a path inside the repository: relative, without '..'".into());
    }
    if p.chars().any(char::is_control) {
        return Err("a path without control characters".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sub(v: serde_json::Value) -> Submission {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_consistent_verdict_is_kept() {
        let c = sub(
            json!({"verdict": "changes_requested", "summary": " Too broad. ",
            "findings": [{"path": "src/a.rs", "line": 3, "severity": "blocking", "message": "undo"},
                         {"path": "b.md", "line": 1, "severity": "advisory", "message": "typo"}]}),
        )
        .check()
        .unwrap();
        assert_eq!(c.verdict, Verdict::ChangesRequested);
        assert_eq!(c.summary, "Too broad.");
        assert_eq!(c.findings.len(), 2);
        let a = sub(json!({"verdict": "approved", "summary": "fine"}))
            .check()
            .unwrap();
        assert!(a.findings.is_empty());
    }

    #[test]
    fn every_fault_is_named_by_its_field() {
        let e = sub(json!({"verdict": "maybe", "summary": "",
            "findings": [{"path": "../x", "line": 0, "severity": "fatal", "message": ""}, 3]}))
        .check()
        .unwrap_err();
        let fields: Vec<&str> = e.0.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "verdict",
                "summary",
                "findings[0].path",
                "findings[0].line",
                "findings[0].severity",
                "findings[0].message",
                "findings[1]"
            ]
        );
        assert_eq!(
            e.0[0].allowed.as_deref().unwrap(),
            ["approved", "changes_requested"]
        );
    }

    #[test]
    fn a_verdict_agrees_with_its_findings() {
        let e = sub(json!({"verdict": "changes_requested", "summary": "no",
            "findings": [{"path": "a", "line": 1, "severity": "advisory", "message": "m"}]}))
        .check()
        .unwrap_err();
        assert!(e.0[0].message.contains("at least one blocking"), "{e}");
        let e = sub(json!({"verdict": "approved", "summary": "ok",
            "findings": [{"path": "a", "line": 1, "severity": "blocking", "message": "m"}]}))
        .check()
        .unwrap_err();
        assert!(e.0[0].message.contains("no blocking finding"), "{e}");
    }
}
