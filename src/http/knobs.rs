//! `GET /api/v1/knobs`: the registered knobs (issue 27), from the registry.

use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::knob::{self, Knob, Phase, Type, Value};
use crate::state::AppState;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KnobBody {
    pub key: String,
    pub description: String,
    /// `choice`, `bool`, `integer`, `globs` or `text`.
    #[serde(rename = "type")]
    #[schema(schema_with = super::schema::knob_type)]
    pub ty: String,
    /// A choice's words (a bool's `true` and `false`), an integer's bounds,
    /// or `null`.
    #[schema(schema_with = super::schema::knob_allowed)]
    pub allowed: Option<Allowed>,
    #[schema(schema_with = super::schema::knob_value)]
    pub default: Value,
    /// The phases whose prompt it may add to.
    #[schema(schema_with = super::schema::knob_phases)]
    pub phases: Vec<Phase>,
}

/// What a knob allows, when it is a list or a range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Allowed {
    Words(Vec<String>),
    Range { min: i64, max: i64 },
}

impl From<&dyn Knob> for KnobBody {
    fn from(k: &dyn Knob) -> Self {
        let allowed = match k.ty() {
            Type::Choice(words) => Some(Allowed::Words(
                words.iter().map(|w| (*w).to_owned()).collect(),
            )),
            Type::Bool => Some(Allowed::Words(vec!["true".into(), "false".into()])),
            Type::Int { min, max } => Some(Allowed::Range { min, max }),
            Type::Globs | Type::Text => None,
        };
        KnobBody {
            key: k.key().to_owned(),
            description: k.description().to_owned(),
            ty: k.ty().as_str().to_owned(),
            allowed,
            default: k.default(),
            phases: k.phases().to_vec(),
        }
    }
}

/// A knob's value for a run, and where it came from: `issue`, `repo` (the
/// operator's repo setting), `repo file` (the repo's `.lab.toml`),
/// `settings` or `default`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SourcedKnobBody {
    pub key: String,
    #[schema(schema_with = super::schema::knob_value)]
    pub value: Value,
    pub source: crate::knob::Source,
}

impl From<crate::knob::Resolved> for SourcedKnobBody {
    fn from(r: crate::knob::Resolved) -> Self {
        SourcedKnobBody {
            key: r.key,
            value: r.value,
            source: r.source,
        }
    }
}

/// An AFK run's budgets, each with where it came from (`issue`, `repo`,
/// `settings`; `null`: no cap).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BudgetBody {
    pub max_tokens: Option<i64>,
    pub max_tokens_source: crate::knob::Source,
    pub max_cost_usd: Option<f64>,
    pub max_cost_usd_source: crate::knob::Source,
    pub run_timeout_minutes: i64,
    pub run_timeout_minutes_source: crate::knob::Source,
}

impl From<crate::resolve::SourcedBudget> for BudgetBody {
    fn from(b: crate::resolve::SourcedBudget) -> Self {
        BudgetBody {
            max_tokens: b.max_tokens.0,
            max_tokens_source: b.max_tokens.1,
            max_cost_usd: b.max_cost_nano_usd.0.map(crate::domain::nano_to_usd),
            max_cost_usd_source: b.max_cost_nano_usd.1,
            run_timeout_minutes: b.run_timeout_minutes.0,
            run_timeout_minutes_source: b.run_timeout_minutes.1,
        }
    }
}

/// Every registered knob: its key, type, what it allows, its default and
/// the phases it may add to the prompt of.
#[utoipa::path(get, path = "/knobs", tag = "knobs",
    responses((status = 200, body = Vec<KnobBody>)))]
async fn list_knobs() -> Json<Vec<KnobBody>> {
    Json(knob::all().iter().map(|k| KnobBody::from(*k)).collect())
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_knobs))
}
