//! Provenance: every resolved value carries the layer it came from.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The layer a resolved value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum Layer {
    #[serde(rename = "request")]
    Request,
    /// The AFK run's issue (its knobs, issue 27).
    #[serde(rename = "issue")]
    Issue,
    #[serde(rename = "repo.afk")]
    RepoAfk,
    /// The repo's `.lab.toml`, under the operator's own repo settings.
    #[serde(rename = "repo file")]
    RepoFile,
    #[serde(rename = "global.afk")]
    GlobalAfk,
    /// A plan run's own defaults (`plan_*`), the repo's and the global ones.
    #[serde(rename = "repo.plan")]
    RepoPlan,
    #[serde(rename = "global.plan")]
    GlobalPlan,
    /// A review run's own defaults (`review_*`).
    #[serde(rename = "repo.review")]
    RepoReview,
    #[serde(rename = "global.review")]
    GlobalReview,
    #[serde(rename = "repo.base")]
    RepoBase,
    #[serde(rename = "global.base")]
    GlobalBase,
    #[serde(rename = "provider.default")]
    ProviderDefault,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Request => "request",
            Layer::Issue => "issue",
            Layer::RepoAfk => "repo.afk",
            Layer::RepoFile => "repo file",
            Layer::GlobalAfk => "global.afk",
            Layer::RepoPlan => "repo.plan",
            Layer::GlobalPlan => "global.plan",
            Layer::RepoReview => "repo.review",
            Layer::GlobalReview => "global.review",
            Layer::RepoBase => "repo.base",
            Layer::GlobalBase => "global.base",
            Layer::ProviderDefault => "provider.default",
        }
    }

    /// Words for people: "the repo's AFK defaults".
    pub fn describe(self) -> &'static str {
        match self {
            Layer::Request => "this request",
            Layer::Issue => "the issue",
            Layer::RepoAfk => "the repo's AFK defaults",
            Layer::RepoFile => "the repo's .lab.toml",
            Layer::GlobalAfk => "the global AFK defaults",
            Layer::RepoPlan => "the repo's plan defaults",
            Layer::GlobalPlan => "the global plan defaults",
            Layer::RepoReview => "the repo's review defaults",
            Layer::GlobalReview => "the global review defaults",
            Layer::RepoBase => "the repo's defaults",
            Layer::GlobalBase => "the global defaults",
            Layer::ProviderDefault => "the provider's default",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A resolved value and its provenance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Sourced {
    pub value: String,
    /// The API calls it `source`.
    #[serde(rename = "source")]
    pub layer: Layer,
}
