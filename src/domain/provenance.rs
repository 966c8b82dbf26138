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
