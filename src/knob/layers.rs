//! Which value each knob takes and where it came from: the issue, then the
//! repo (the operator's setting over the repo's `.lab.toml`), then the
//! global settings, then the knob's default. And the prompt block the
//! resolved values make.

use serde::{Deserialize, Serialize};

use super::{Phase, Set, Value, all};

/// Where a knob's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum Source {
    #[serde(rename = "issue")]
    Issue,
    /// The operator's repo setting.
    #[serde(rename = "repo")]
    Repo,
    /// The repo's own `.lab.toml`, on its default branch.
    #[serde(rename = "repo file")]
    RepoFile,
    #[serde(rename = "settings")]
    Settings,
    #[serde(rename = "default")]
    Default,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Issue => "issue",
            Source::Repo => "repo",
            Source::RepoFile => "repo file",
            Source::Settings => "settings",
            Source::Default => "default",
        }
    }

    /// Words for people: "the repo's .lab.toml".
    pub fn describe(self) -> &'static str {
        match self {
            Source::Issue => "the issue",
            Source::Repo => "the repo's settings",
            Source::RepoFile => "the repo's .lab.toml",
            Source::Settings => "the global settings",
            Source::Default => "the knob's default",
        }
    }
}

/// A knob's value for a run, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    pub key: String,
    pub value: Value,
    pub source: Source,
}

/// The places a knob can be set, highest first.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layers<'a> {
    pub issue: Option<&'a Set>,
    pub repo: Option<&'a Set>,
    pub repo_file: Option<&'a Set>,
    pub settings: Option<&'a Set>,
}

/// Every registered knob's value, in registry order.
pub fn resolve(layers: Layers<'_>) -> Vec<Resolved> {
    let order = [
        (layers.issue, Source::Issue),
        (layers.repo, Source::Repo),
        (layers.repo_file, Source::RepoFile),
        (layers.settings, Source::Settings),
    ];
    all()
        .iter()
        .map(|k| {
            let (value, source) = order
                .iter()
                .find_map(|(set, source)| {
                    set.and_then(|s| s.get(k.key()))
                        .map(|v| (v.clone(), *source))
                })
                .unwrap_or_else(|| (k.default(), Source::Default));
            Resolved {
                key: k.key().to_owned(),
                value,
                source,
            }
        })
        .collect()
}

/// The fragments the resolved knobs add to a phase's prompt, as one block
/// in registry order; `None` when none has anything to say (every knob at
/// its default), so the prompt stays what it was without knobs.
pub fn prompt_block(phase: Phase, resolved: &[Resolved]) -> Option<String> {
    block_of(all(), phase, resolved)
}

/// [`prompt_block`] over these knobs. A free-text value reaches its knob's
/// fragment only fenced as data ([`super::untrusted`]): a knob cannot put
/// what someone typed into a prompt raw, whatever its fragment does.
pub(super) fn block_of(
    knobs: &[&dyn super::Knob],
    phase: Phase,
    resolved: &[Resolved],
) -> Option<String> {
    let parts: Vec<String> = knobs
        .iter()
        .filter(|k| k.phases().contains(&phase))
        .filter_map(|k| {
            let r = resolved.iter().find(|r| r.key == k.key())?;
            if r.value == k.default() {
                return None;
            }
            match (k.ty(), &r.value) {
                (super::Type::Text, Value::Text(t)) => {
                    k.fragment(phase, &Value::Text(super::untrusted(k.key(), t)))
                }
                (super::Type::Text, _) => None,
                _ => k.fragment(phase, &r.value),
            }
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "Directives for this issue (set by the people who run lab and this repo):\n{}",
        parts
            .iter()
            .map(|p| format!("- {p}"))
            .collect::<Vec<_>>()
            .join("\n")
    ))
}
