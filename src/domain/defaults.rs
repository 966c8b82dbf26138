//! One scope's base defaults and AFK overrides.

use std::collections::BTreeMap;

/// One scope's defaults: the global settings of one provider, or one repo.
/// `None` (or an empty string) means inherit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    pub model_default: Option<String>,
    pub effort_default: Option<String>,
    pub afk_model_default: Option<String>,
    pub afk_effort_default: Option<String>,
    pub afk_options: BTreeMap<String, String>,
}
