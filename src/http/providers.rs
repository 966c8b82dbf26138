//! `GET /api/v1/providers`: each provider's catalogs and options schema.

use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::provider::{self, OptionSpec, Provider};
use crate::state::AppState;

#[derive(Serialize, Deserialize, ToSchema)]
pub struct ProviderBody {
    #[schema(schema_with = super::schema::provider_id)]
    pub id: String,
    pub name: String,
    pub models: Vec<String>,
    pub efforts: Vec<String>,
    pub default_model: String,
    pub default_effort: String,
    pub options: Vec<OptionBody>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct OptionBody {
    pub key: String,
    pub label: String,
    /// `bool` or `enum`.
    #[serde(rename = "type")]
    #[schema(schema_with = super::schema::option_type)]
    pub ty: String,
    pub values: Vec<String>,
    /// Values that have the CLI ask a person at times: a manual run may
    /// take them too (`POST /runs` `options`); the AFK defaults may not.
    #[serde(default)]
    pub asks: Vec<String>,
    pub default: String,
    pub description: String,
}

impl From<&OptionSpec> for OptionBody {
    fn from(o: &OptionSpec) -> Self {
        OptionBody {
            key: o.key.to_owned(),
            label: o.label.to_owned(),
            ty: o.ty.as_str().to_owned(),
            values: o.values.iter().map(|v| (*v).to_owned()).collect(),
            asks: o.asks.iter().map(|v| (*v).to_owned()).collect(),
            default: o.default.to_owned(),
            description: o.description.to_owned(),
        }
    }
}

impl From<&dyn Provider> for ProviderBody {
    fn from(p: &dyn Provider) -> Self {
        ProviderBody {
            id: p.id().to_owned(),
            name: p.name().to_owned(),
            models: p.models().iter().map(|m| (*m).to_owned()).collect(),
            efforts: p.efforts().iter().map(|e| (*e).to_owned()).collect(),
            default_model: p.default_model().to_owned(),
            default_effort: p.default_effort().to_owned(),
            options: p.spawn_options().iter().map(OptionBody::from).collect(),
        }
    }
}

/// The providers lab knows, with their catalogs and spawn-options schema.
#[utoipa::path(get, path = "/providers", tag = "providers",
    responses((status = 200, body = Vec<ProviderBody>)))]
async fn list_providers() -> Json<Vec<ProviderBody>> {
    Json(
        provider::all()
            .iter()
            .map(|p| ProviderBody::from(*p))
            .collect(),
    )
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_providers))
}
