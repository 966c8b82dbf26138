//! Where a repo's issues live: lab's built-in tracker, or a forge, and how a
//! change to that is checked.
//!
//! Invariant: no IO here.

use crate::domain::Change;
use crate::validate::{self, Errors, FieldError};

/// The kind of issue source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceKind {
    /// Issues and pull requests in lab's own database.
    #[default]
    Builtin,
    /// Gitea or Forgejo, over its REST API (v1).
    Gitea,
    /// GitHub, over its REST API.
    Github,
}

pub const SOURCE_KINDS: &[&str] = &["builtin", "gitea", "github"];

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Builtin => "builtin",
            SourceKind::Gitea => "gitea",
            SourceKind::Github => "github",
        }
    }

    pub fn parse(field: &str, s: &str) -> Result<SourceKind, FieldError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "builtin" => Ok(SourceKind::Builtin),
            "gitea" | "forgejo" => Ok(SourceKind::Gitea),
            "github" => Ok(SourceKind::Github),
            _ => Err(FieldError::new(
                field,
                format!(
                    "unknown issue source '{}'; allowed: builtin, gitea (also for Forgejo), github",
                    validate::shown(s)
                ),
            )
            .with_value(validate::shown(s))
            .with_allowed(SOURCE_KINDS)),
        }
    }
}

pub const GITHUB_API: &str = "https://api.github.com";

/// A repo's issue source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IssueConfig {
    pub source: SourceKind,
    /// The forge's address (for GitHub, its API: `https://api.github.com`).
    pub forge_url: Option<String>,
    /// `owner/name` on the forge.
    pub forge_repo: Option<String>,
    /// The token lab uses on the forge. Never shown back in full, never given
    /// to a run. Without it, `LAB_GITEA_TOKEN` / `LAB_GITHUB_TOKEN`.
    pub forge_token: Option<String>,
}

impl IssueConfig {
    /// The token as the API shows it: its last four characters.
    pub fn token_hint(&self) -> Option<String> {
        self.forge_token.as_ref().map(|t| {
            let tail: String = t
                .chars()
                .rev()
                .take(4)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            format!("…{tail}")
        })
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IssueConfigPatch {
    pub source: Change<String>,
    pub forge_url: Change<String>,
    pub forge_repo: Change<String>,
    pub forge_token: Change<String>,
}

fn text(cur: &Option<String>, c: &Change<String>) -> Option<String> {
    match c {
        Change::Keep => cur.clone(),
        Change::Clear => None,
        Change::Set(v) if v.trim().is_empty() => None,
        Change::Set(v) => Some(v.trim().to_owned()),
    }
}

/// A forge address lab can build its API requests on: `http(s)://host[/path]`.
/// Applies a change; the result must be complete for its kind.
pub fn apply(cur: &IssueConfig, p: &IssueConfigPatch, errs: &mut Errors) -> IssueConfig {
    let source = match &p.source {
        Change::Keep => cur.source,
        Change::Clear => SourceKind::Builtin,
        Change::Set(s) => errs
            .check(SourceKind::parse("issue_source", s))
            .unwrap_or(cur.source),
    };
    let mut next = IssueConfig {
        source,
        forge_url: text(&cur.forge_url, &p.forge_url).map(|u| u.trim_end_matches('/').to_owned()),
        forge_repo: text(&cur.forge_repo, &p.forge_repo),
        forge_token: text(&cur.forge_token, &p.forge_token),
    };
    if source == SourceKind::Github && next.forge_url.is_none() {
        next.forge_url = Some(GITHUB_API.to_owned());
    }
    if let Some(u) = &next.forge_url
        && errs.check(validate::forge_url("forge_url", u)).is_some()
        && source != SourceKind::Builtin
    {
        errs.check(validate::forge_url_fits(
            "forge_url",
            source == SourceKind::Github,
            u,
        ));
    }
    if let Some(r) = &next.forge_repo {
        errs.check(validate::forge_repo("forge_repo", r));
    }
    if let Some(t) = &next.forge_token {
        errs.check(validate::forge_token("forge_token", t));
    }
    if source != SourceKind::Builtin {
        if next.forge_url.is_none() {
            errs.push(FieldError::new(
                "forge_url",
                format!("is required for a {} issue source", source.as_str()),
            ));
        }
        if next.forge_repo.is_none() {
            errs.push(FieldError::new(
                "forge_repo",
                format!(
                    "is required for a {} issue source (owner/name)",
                    source.as_str()
                ),
            ));
        }
    }
    next
}
