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
use super::extract::{ApiJson, Field, Object, object, objects, whole_number};
use super::schema;
use crate::domain::{NotifyEvent, NotifyKind};
use crate::settings::notifications::{Endpoint, EndpointInput};
use crate::settings::{self, AfkPatch, RunsPatch, Settings, SettingsPatch};
use crate::state::AppState;
use crate::validate::Errors;

#[derive(Serialize, Deserialize, ToSchema)]
pub struct SettingsBody {
    /// Defaults per provider id.
    pub providers: BTreeMap<String, DefaultsBody>,
    pub afk: AfkBody,
    pub runs: RunsBody,
    /// Where lab posts when a run starts waiting, ends, fails or opens a
    /// pull request.
    pub notifications: Vec<NotificationBody>,
    /// The global knobs (`GET /knobs`): every repo and issue inherits them.
    #[serde(default)]
    #[schema(schema_with = schema::knobs_shown)]
    pub knobs: crate::knob::Set,
    /// The provider of plan runs; `null`: each repo's own.
    #[serde(default)]
    #[schema(schema_with = schema::provider_id_or_null)]
    pub plan_provider: Option<String>,
    /// The provider of review runs; `null`: each repo's own.
    #[serde(default)]
    #[schema(schema_with = schema::provider_id_or_null)]
    pub review_provider: Option<String>,
}

/// A notification endpoint as lab shows it: its URL redacted, its token
/// never.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct NotificationBody {
    pub kind: NotifyKind,
    /// The URL redacted (`https://hooks.slack.com/…abcd`): the URL is the
    /// secret. Send it back unchanged to keep the stored URL and token.
    pub url: String,
    pub events: Vec<NotifyEvent>,
    /// Whether a token is stored (it is never shown).
    pub token_set: bool,
}

impl From<&Endpoint> for NotificationBody {
    fn from(e: &Endpoint) -> Self {
        NotificationBody {
            kind: e.kind,
            url: e.redacted_url(),
            events: e.events.clone(),
            token_set: e.token.is_some(),
        }
    }
}

/// One notification endpoint of a settings change.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NotificationPatchBody {
    #[schema(value_type = NotifyKind)]
    pub kind: String,
    /// An http(s) URL with a host, or the redacted URL lab showed for a
    /// stored endpoint (which keeps that endpoint's URL and token).
    #[schema(schema_with = schema::notification_url)]
    pub url: String,
    /// At least one.
    #[schema(value_type = Vec<NotifyEvent>, min_items = 1)]
    pub events: Vec<String>,
    /// Sent as `Authorization: Bearer …` (webhook and ntfy; never shown
    /// back, never given to runs). Absent keeps the stored token of a
    /// redacted URL; `null` or `""` removes it.
    #[schema(schema_with = schema::notification_token)]
    #[serde(default)]
    pub token: Field<String>,
}

impl NotificationPatchBody {
    fn into_input(self) -> EndpointInput {
        EndpointInput {
            kind: self.kind,
            url: self.url,
            token: self.token.change(),
            events: self.events,
        }
    }
}

/// For `#[serde(deserialize_with)]`: a list of objects (never of arrays).
fn object_list<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<NotificationPatchBody>>, D::Error> {
    let list = Option::<Vec<Object<NotificationPatchBody>>>::deserialize(d)?;
    Ok(list.map(|l| l.into_iter().map(|Object(v)| v).collect()))
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct RunsBody {
    /// Hours an ended run's workspace is kept; `null` keeps it until the run
    /// is removed.
    pub workspace_retention_hours: Option<i64>,
    /// Whether runs that ask nobody may start unsandboxed where lab cannot
    /// sandbox (`lab doctor` says whether it can).
    pub allow_unsandboxed: bool,
    /// MiB of memory each run may use; `null`: no cap.
    pub memory_max_mb: Option<i64>,
    /// Processes and threads each run may have; `null`: no cap.
    pub pids_max: Option<i64>,
    /// MiB of each run's log lab keeps (the newest output).
    pub log_max_mb: i64,
    /// Top-level keys of the operator's CLI config files (Claude Code's
    /// `settings.json` and `.claude.json`, Codex's `config.toml`) that each
    /// run's own copy gets; none by default.
    pub carry_cli_keys: Vec<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct AfkBody {
    /// Most AFK runs live at once, over all repos.
    pub max_concurrent: i64,
    /// Seconds between scheduler ticks.
    pub tick_seconds: i64,
    /// Minutes an AFK run may take before lab stops it.
    pub run_timeout_minutes: i64,
    /// Rounds an AFK run may have on its pull request, the first included.
    pub max_rounds: i64,
    /// Rounds of plan and plan review an issue may have before its work
    /// starts, the first included.
    #[serde(default = "default_max_plan_rounds")]
    pub max_plan_rounds: i64,
    /// Attempts at one issue, the first included.
    pub max_attempts: i64,
    /// Tokens an AFK run may use; `null`: no cap.
    pub max_tokens: Option<i64>,
    /// US dollars an AFK run may cost; `null`: no cap.
    pub max_cost_usd: Option<f64>,
    /// MiB of available memory an AFK launch needs (0: no check).
    pub memory_per_run_mb: i64,
}

fn default_max_plan_rounds() -> i64 {
    crate::settings::AfkLimits::default().max_plan_rounds
}

impl From<&crate::settings::AfkLimits> for AfkBody {
    fn from(a: &crate::settings::AfkLimits) -> Self {
        AfkBody {
            max_concurrent: a.max_concurrent,
            tick_seconds: a.tick_seconds,
            run_timeout_minutes: a.run_timeout_minutes,
            max_rounds: a.max_rounds,
            max_plan_rounds: a.max_plan_rounds,
            max_attempts: a.max_attempts,
            max_tokens: a.max_tokens,
            max_cost_usd: a.max_cost_nano_usd.map(crate::domain::nano_to_usd),
            memory_per_run_mb: a.memory_per_run_mb,
        }
    }
}

impl SettingsBody {
    fn new(s: &Settings, endpoints: &[Endpoint]) -> Self {
        SettingsBody {
            providers: settings::all_providers(s)
                .into_iter()
                .map(|(id, d)| (id.to_string(), DefaultsBody::from(d)))
                .collect(),
            afk: AfkBody::from(&s.afk),
            runs: RunsBody {
                workspace_retention_hours: s.runs.workspace_retention_hours,
                allow_unsandboxed: s.runs.allow_unsandboxed,
                memory_max_mb: s.runs.memory_max_mb,
                pids_max: s.runs.pids_max,
                log_max_mb: s.runs.log_max_mb,
                carry_cli_keys: s.runs.carry_cli_keys.clone(),
            },
            notifications: endpoints.iter().map(NotificationBody::from).collect(),
            knobs: s.knobs.clone(),
            plan_provider: s.kinds.plan.map(|p| p.to_string()),
            review_provider: s.kinds.review.map(|p| p.to_string()),
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
    /// The notification endpoints: the whole list, replacing the stored one
    /// (`[]` removes them all; absent or `null` keeps them).
    #[schema(max_items = 20)]
    #[serde(default, deserialize_with = "object_list")]
    pub notifications: Option<Vec<NotificationPatchBody>>,
    #[schema(schema_with = schema::knobs_patch)]
    #[serde(default)]
    pub knobs: Field<serde_json::Map<String, serde_json::Value>>,
    /// The provider of plan runs; `null` or `""`: each repo's own.
    #[schema(schema_with = schema::kind_provider_patch)]
    #[serde(default)]
    pub plan_provider: Field<String>,
    /// The provider of review runs; `null` or `""`: each repo's own.
    #[schema(schema_with = schema::kind_provider_patch)]
    #[serde(default)]
    pub review_provider: Field<String>,
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
    #[schema(schema_with = schema::memory_max_mb_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub memory_max_mb: Field<i64>,
    #[schema(schema_with = schema::pids_max_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub pids_max: Field<i64>,
    #[schema(schema_with = schema::log_max_mb_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub log_max_mb: Field<i64>,
    #[schema(schema_with = schema::carry_cli_keys_patch)]
    #[serde(default)]
    pub carry_cli_keys: Field<Vec<String>>,
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
    #[schema(schema_with = schema::max_rounds_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub max_rounds: Field<i64>,
    #[schema(schema_with = schema::max_plan_rounds_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub max_plan_rounds: Field<i64>,
    #[schema(schema_with = schema::max_attempts_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub max_attempts: Field<i64>,
    #[schema(schema_with = schema::max_tokens_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub max_tokens: Field<i64>,
    #[schema(schema_with = schema::max_cost_usd_patch)]
    #[serde(default)]
    pub max_cost_usd: Field<f64>,
    #[schema(schema_with = schema::memory_per_run_mb_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub memory_per_run_mb: Field<i64>,
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
                max_rounds: self.afk.max_rounds.change(),
                max_plan_rounds: self.afk.max_plan_rounds.change(),
                max_attempts: self.afk.max_attempts.change(),
                max_tokens: self.afk.max_tokens.change(),
                max_cost_nano_usd: usd_to_nano(self.afk.max_cost_usd.change()),
                memory_per_run_mb: self.afk.memory_per_run_mb.change(),
            },
            runs: RunsPatch {
                workspace_retention_hours: self.runs.workspace_retention_hours.change(),
                allow_unsandboxed: self.runs.allow_unsandboxed.change(),
                memory_max_mb: self.runs.memory_max_mb.change(),
                pids_max: self.runs.pids_max.change(),
                log_max_mb: self.runs.log_max_mb.change(),
                carry_cli_keys: match self.runs.carry_cli_keys {
                    Field::Absent => None,
                    Field::Null => Some(Vec::new()),
                    Field::Value(v) => Some(v),
                },
            },
            notifications: self.notifications.map(|list| {
                list.into_iter()
                    .map(NotificationPatchBody::into_input)
                    .collect()
            }),
            knobs: self.knobs.into_knobs(),
            kinds: settings::KindProvidersPatch {
                plan_provider: self.plan_provider.change(),
                review_provider: self.review_provider.change(),
            },
        })
    }
}

/// The global settings. `null` means inherit.
#[utoipa::path(get, path = "/settings", tag = "settings",
    responses((status = 200, body = SettingsBody)))]
async fn get_settings(State(app): State<AppState>) -> ApiResult<Json<SettingsBody>> {
    let s = app.store.settings().await.map_err(ApiError::internal)?;
    shown(&app, &s).await
}

/// The settings as the API shows them, with the notification endpoints.
async fn shown(app: &AppState, s: &Settings) -> ApiResult<Json<SettingsBody>> {
    let n = app
        .store
        .notifications()
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(SettingsBody::new(s, &n)))
}

/// Changes global settings. A request with any invalid field writes nothing.
/// `notifications` replaces the whole list; a redacted URL lab showed keeps
/// that endpoint's stored URL and token.
#[utoipa::path(patch, path = "/settings", tag = "settings", request_body = SettingsPatchBody,
    responses((status = 200, body = SettingsBody)))]
async fn patch_settings(
    State(app): State<AppState>,
    ApiJson(body): ApiJson<SettingsPatchBody>,
) -> ApiResult<Json<SettingsBody>> {
    let patch = body.into_patch()?;
    let s = crate::service::settings::update(&app.store, &patch).await?;
    shown(&app, &s).await
}

/// Sends a test notification (`"event": "test"`) to each configured
/// endpoint and answers what each said, in the settings' order. Nothing is
/// queued: an endpoint that fails is not tried again.
#[utoipa::path(post, path = "/notifications/test", tag = "settings",
    responses((status = 200, body = Vec<crate::notifications::TestSent>)))]
async fn test_notifications(
    State(app): State<AppState>,
) -> ApiResult<Json<Vec<crate::notifications::TestSent>>> {
    let sent = app.notifier.send_test().await.map_err(ApiError::internal)?;
    Ok(Json(sent))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_settings, patch_settings))
        .routes(routes!(test_notifications))
}

/// A dollar amount of a request as billionths (the store's unit).
pub fn usd_to_nano(c: crate::domain::Change<f64>) -> crate::domain::Change<i64> {
    use crate::domain::Change;
    match c {
        Change::Keep => Change::Keep,
        Change::Clear => Change::Clear,
        Change::Set(usd) => Change::Set(crate::settings::usd_to_nano(usd)),
    }
}
