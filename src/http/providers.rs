//! `GET /api/v1/providers`: each provider's catalogs and options schema.

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::provider::{self, OptionSpec, Provider};
use crate::state::AppState;

#[derive(Serialize, ToSchema)]
pub struct ProviderBody {
    #[schema(schema_with = super::schema::provider_id)]
    pub id: &'static str,
    pub name: &'static str,
    pub models: Vec<&'static str>,
    pub efforts: Vec<&'static str>,
    pub default_model: &'static str,
    pub default_effort: &'static str,
    pub options: Vec<OptionBody>,
}

#[derive(Serialize, ToSchema)]
pub struct OptionBody {
    pub key: &'static str,
    pub label: &'static str,
    /// `bool` or `enum`.
    #[serde(rename = "type")]
    #[schema(schema_with = super::schema::option_type)]
    pub ty: &'static str,
    pub values: Vec<&'static str>,
    pub default: &'static str,
    pub description: &'static str,
}

impl From<&OptionSpec> for OptionBody {
    fn from(o: &OptionSpec) -> Self {
        OptionBody {
            key: o.key,
            label: o.label,
            ty: o.ty.as_str(),
            values: o.values.to_vec(),
            default: o.default,
            description: o.description,
        }
    }
}

impl From<&dyn Provider> for ProviderBody {
    fn from(p: &dyn Provider) -> Self {
        ProviderBody {
            id: p.id(),
            name: p.name(),
            models: p.models().to_vec(),
            efforts: p.efforts().to_vec(),
            default_model: p.default_model(),
            default_effort: p.default_effort(),
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
