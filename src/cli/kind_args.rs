//! The flags of plan and review runs' own settings (issue 28, ADR 32),
//! shared by `labctl settings set` and `labctl repo add|set`: each kind's
//! provider, model, effort and options.

use clap::Args;
use serde::Serialize;

use super::client::{CliError, CliResult};
use super::repos::OptionChange;

#[derive(Args, Default)]
pub struct KindFlags {
    /// Provider of plan runs ("" unsets it: a repo's follows the global
    /// choice, else its own provider).
    #[arg(long)]
    plan_provider: Option<String>,
    /// Plan runs' model ("" inherits the AFK one).
    #[arg(long)]
    plan_model: Option<String>,
    /// Plan runs' effort ("" inherits the AFK one).
    #[arg(long)]
    plan_effort: Option<String>,
    /// A plan run's spawn option, KEY=VALUE; KEY= inherits. Repeatable.
    #[arg(long = "plan-option", value_name = "KEY=VALUE")]
    plan_options: Vec<String>,
    /// Provider of review runs ("" unsets it).
    #[arg(long)]
    review_provider: Option<String>,
    /// Review runs' model ("" inherits the AFK one).
    #[arg(long)]
    review_model: Option<String>,
    /// Review runs' effort ("" inherits the AFK one).
    #[arg(long)]
    review_effort: Option<String>,
    /// A review run's spawn option, KEY=VALUE; KEY= inherits. Repeatable.
    #[arg(long = "review-option", value_name = "KEY=VALUE")]
    review_options: Vec<String>,
}

/// The kinds' providers as a change sends them.
#[derive(Serialize, Default, PartialEq)]
pub struct KindProvidersChange {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_provider: Option<String>,
}

/// The kinds' own defaults as a change sends them (beside `afk_*`).
#[derive(Serialize, Default, PartialEq)]
pub struct KindDefaultsChange {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_model_default: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_effort_default: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_options: Option<OptionChange>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_model_default: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_effort_default: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_options: Option<OptionChange>,
}

/// `KEY=VALUE` options of `flag` into a change; `KEY=` clears.
fn pairs(flag: &str, list: &[String]) -> CliResult<Option<OptionChange>> {
    if list.is_empty() {
        return Ok(None);
    }
    let mut m = OptionChange::new();
    for p in list {
        let (k, v) = p.split_once('=').ok_or_else(|| {
            CliError::invalid(format!(
                "{flag} '{p}': expected KEY=VALUE (KEY= to inherit)"
            ))
        })?;
        m.insert(k.to_owned(), Some(v.to_owned()).filter(|v| !v.is_empty()));
    }
    Ok(Some(m))
}

impl KindFlags {
    /// The change these flags make: the providers, and the defaults.
    pub fn into_change(self) -> CliResult<(KindProvidersChange, KindDefaultsChange)> {
        Ok((
            KindProvidersChange {
                plan_provider: self.plan_provider,
                review_provider: self.review_provider,
            },
            KindDefaultsChange {
                plan_model_default: self.plan_model,
                plan_effort_default: self.plan_effort,
                plan_options: pairs("--plan-option", &self.plan_options)?,
                review_model_default: self.review_model,
                review_effort_default: self.review_effort,
                review_options: pairs("--review-option", &self.review_options)?,
            },
        ))
    }
}
