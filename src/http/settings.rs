//! `GET` and `PATCH /api/v1/settings`.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::dto::{DefaultsBody, DefaultsPatchBody};
use super::error::{ApiError, ApiResult};
use super::extract::{ApiJson, Field, object, objects, whole_number};
use super::schema;
use crate::settings::{self, AfkPatch, RunsPatch, Settings, SettingsPatch};
use crate::state::AppState;
use crate::validate::Errors;

#[derive(Serialize, ToSchema)]
pub struct SettingsBody {
    /// Defaults per provider id.
    pub providers: BTreeMap<String, DefaultsBody>,
    pub afk: AfkBody,
    pub runs: RunsBody,
}

#[derive(Serialize, ToSchema)]
pub struct RunsBody {
    /// Hours an ended run's workspace is kept; `null` keeps it until the run
    /// is removed.
    pub workspace_retention_hours: Option<i64>,
    /// Whether runs that ask nobody may start unsandboxed where lab cannot
    /// sandbox (`lab doctor` says whether it can).
    pub allow_unsandboxed: bool,
}

#[derive(Serialize, ToSchema)]
pub struct AfkBody {
    /// Most AFK runs live at once, over all repos.
    pub max_concurrent: i64,
    /// Seconds between scheduler ticks.
    pub tick_seconds: i64,
    /// Minutes an AFK run may take before lab stops it.
    pub run_timeout_minutes: i64,
}

impl From<&Settings> for SettingsBody {
    fn from(s: &Settings) -> Self {
        SettingsBody {
            providers: settings::all_providers(s)
                .into_iter()
                .map(|(id, d)| (id.to_owned(), DefaultsBody::from(d)))
                .collect(),
            afk: AfkBody {
                max_concurrent: s.afk.max_concurrent,
                tick_seconds: s.afk.tick_seconds,
                run_timeout_minutes: s.afk.run_timeout_minutes,
            },
            runs: RunsBody {
                workspace_retention_hours: s.runs.workspace_retention_hours,
                allow_unsandboxed: s.runs.allow_unsandboxed,
            },
        }
    }
}

/// A settings change: fields present are set, `null` or `""` clears.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettingsPatchBody {
    #[schema(schema_with = schema::providers_patch)]
    #[serde(default, deserialize_with = "objects")]
    pub providers: BTreeMap<String, DefaultsPatchBody>,
    #[serde(default, deserialize_with = "object")]
    pub afk: AfkPatchBody,
    #[serde(default, deserialize_with = "object")]
    pub runs: RunsPatchBody,
}

/// `null` keeps workspaces until their run is removed.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RunsPatchBody {
    #[schema(schema_with = schema::workspace_retention_hours_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub workspace_retention_hours: Field<i64>,
    /// `null` resets it to `false`.
    #[schema(value_type = Option<bool>)]
    pub allow_unsandboxed: Field<bool>,
}

/// `null` resets a limit to its built-in default.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct AfkPatchBody {
    #[schema(schema_with = schema::max_concurrent_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub max_concurrent: Field<i64>,
    #[schema(schema_with = schema::tick_seconds_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub tick_seconds: Field<i64>,
    #[schema(schema_with = schema::run_timeout_minutes_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub run_timeout_minutes: Field<i64>,
}

impl SettingsPatchBody {
    pub fn into_patch(self) -> Result<SettingsPatch, crate::validate::Invalid> {
        let mut errs = Errors::default();
        let providers = self
            .providers
            .into_iter()
            .map(|(id, p)| {
                let patch = p.into_patch(&format!("providers.{id}."), &mut errs);
                (id, patch)
            })
            .collect();
        errs.finish()?;
        Ok(SettingsPatch {
            providers,
            afk: AfkPatch {
                max_concurrent: self.afk.max_concurrent.change(),
                tick_seconds: self.afk.tick_seconds.change(),
                run_timeout_minutes: self.afk.run_timeout_minutes.change(),
            },
            runs: RunsPatch {
                workspace_retention_hours: self.runs.workspace_retention_hours.change(),
                allow_unsandboxed: self.runs.allow_unsandboxed.change(),
            },
        })
    }
}

/// The global settings. `null` means inherit.
#[utoipa::path(get, path = "/settings", tag = "settings",
    responses((status = 200, body = SettingsBody)))]
async fn get_settings(State(app): State<AppState>) -> ApiResult<Json<SettingsBody>> {
    let s = app.store.settings().await.map_err(ApiError::internal)?;
    Ok(Json(SettingsBody::from(&s)))
}

/// Changes global settings. A request with any invalid field writes nothing.
#[utoipa::path(patch, path = "/settings", tag = "settings", request_body = SettingsPatchBody,
    responses((status = 200, body = SettingsBody)))]
async fn patch_settings(
    State(app): State<AppState>,
    ApiJson(body): ApiJson<SettingsPatchBody>,
) -> ApiResult<Json<SettingsBody>> {
    let patch = body.into_patch()?;
    let s = app
        .store
        .update_settings(&patch)
        .await
        .map_err(|e| ApiError::from_store(e, || "settings".into()))?;
    Ok(Json(SettingsBody::from(&s)))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_settings, patch_settings))
}
