//! `/api/v1/repos`: create, list, show, change, delete, resolve.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::dto::{DefaultsPatchBody, refined_body};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{ApiJson, ApiPath, Field, whole_number};
use super::schema;
use crate::domain::rfc3339;
use crate::repo::{Repo, RepoPatch};
use crate::state::AppState;

use crate::service;
use crate::store::RepoKey;
use crate::validate::{self, Errors};

#[derive(Serialize, Deserialize, ToSchema)]
pub struct RepoBody {
    pub id: i64,
    pub name: String,
    /// A local repository; `null` when the repo has a `url`.
    pub path: Option<String>,
    /// A clone URL; `null` when the repo has a `path`.
    pub url: Option<String>,
    pub default_branch: String,
    #[schema(schema_with = schema::provider_id)]
    pub provider: String,
    pub model_default: Option<String>,
    pub effort_default: Option<String>,
    pub afk_model_default: Option<String>,
    pub afk_effort_default: Option<String>,
    pub afk_options: BTreeMap<String, String>,
    /// The provider of its plan runs; `null`: the global `plan_provider`,
    /// else `provider`.
    #[serde(default)]
    pub plan_provider: Option<String>,
    /// Plan runs' own defaults, for the plan provider; `null` (or an absent
    /// option) inherits the AFK ones.
    #[serde(default)]
    pub plan_model_default: Option<String>,
    #[serde(default)]
    pub plan_effort_default: Option<String>,
    #[serde(default)]
    pub plan_options: BTreeMap<String, String>,
    /// The provider of its review runs; `null`: the global
    /// `review_provider`, else `provider`.
    #[serde(default)]
    pub review_provider: Option<String>,
    /// Review runs' own defaults, for the review provider.
    #[serde(default)]
    pub review_model_default: Option<String>,
    #[serde(default)]
    pub review_effort_default: Option<String>,
    #[serde(default)]
    pub review_options: BTreeMap<String, String>,
    pub afk_enabled: bool,
    pub afk_label: String,
    pub afk_max_concurrent: i64,
    /// The AFK scheduler leaves a paused repo alone.
    pub afk_paused: bool,
    /// Whether runs that ask nobody may start unsandboxed on a machine
    /// where lab cannot sandbox; `null` inherits the global setting.
    pub allow_unsandboxed: Option<bool>,
    /// What lab runs in an AFK run's workspace (sandboxed) after each round
    /// of its agent once it opened its pull request; exit 0 is green.
    pub check_command: Option<String>,
    /// Tokens an AFK run of this repo may use; `null` inherits
    /// `afk.max_tokens`.
    pub afk_max_tokens: Option<i64>,
    /// US dollars an AFK run of this repo may cost; `null` inherits
    /// `afk.max_cost_usd`.
    pub afk_max_cost_usd: Option<f64>,
    /// Minutes an AFK run of this repo may take; `null` inherits
    /// `afk.run_timeout_minutes`.
    pub afk_run_timeout_minutes: Option<i64>,
    /// MiB of memory each run of this repo may use; `null` inherits
    /// `runs.memory_max_mb`.
    pub memory_max_mb: Option<i64>,
    /// Processes and threads each run of this repo may have; `null`
    /// inherits `runs.pids_max`.
    pub pids_max: Option<i64>,
    #[schema(schema_with = schema::source_kind)]
    pub issue_source: String,
    pub forge_url: Option<String>,
    pub forge_repo: Option<String>,
    /// The forge token's last four characters; never the token.
    pub forge_token: Option<String>,
    /// The forge account lab's token acts as (`GET /user`), with whether it
    /// looks like the operator's own; `null` until read (or for the
    /// built-in tracker).
    pub forge_identity: Option<crate::issues::ForgeIdentity>,
    /// The repo's knobs (`GET /knobs`), over the global ones.
    #[serde(default)]
    #[schema(schema_with = schema::knobs_shown)]
    pub knobs: crate::knob::Set,
    /// The models its issues may ask for; `[]`: the provider's catalog.
    #[serde(default)]
    pub allowed_models: Vec<String>,
    /// What lab last made of the repo's `.lab.toml`; `null` when it has
    /// none.
    #[serde(default)]
    pub config_file: Option<ConfigFileBody>,
    pub created_at: String,
    pub updated_at: String,
}

/// A repo's `.lab.toml` as lab last read it: the commit of the valid
/// version it keeps and uses, what that version sets, and why the newest
/// read was refused, when it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ConfigFileBody {
    /// The default branch's commit the kept version was read at; `null`
    /// when no valid version was ever read.
    pub commit: Option<String>,
    /// Why the newest version was refused (the kept one is older); `null`
    /// when it was valid.
    pub error: Option<String>,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub options: BTreeMap<String, String>,
    #[schema(schema_with = schema::knobs_shown)]
    pub knobs: crate::knob::Set,
    pub check_command: Option<String>,
    pub label: Option<String>,
}

impl ConfigFileBody {
    fn of(c: &crate::repo::config_file::ConfigState) -> Option<ConfigFileBody> {
        if c.file.is_none() && c.error.is_none() {
            return None;
        }
        let f = c.file.clone().unwrap_or_default();
        Some(ConfigFileBody {
            commit: c.commit.clone(),
            error: c.error.clone(),
            model: f.model,
            effort: f.effort,
            options: f.options,
            knobs: f.knobs,
            check_command: f.check_command,
            label: f.label,
        })
    }
}

impl From<Repo> for RepoBody {
    fn from(r: Repo) -> Self {
        RepoBody {
            id: r.id,
            path: r.path().map(str::to_owned),
            url: r.url().map(str::to_owned),
            name: r.name,
            default_branch: r.default_branch,
            provider: r.provider,
            model_default: r.defaults.model_default,
            effort_default: r.defaults.effort_default,
            afk_model_default: r.defaults.afk_model_default,
            afk_effort_default: r.defaults.afk_effort_default,
            afk_options: r.defaults.afk_options,
            plan_provider: r.plan_provider,
            plan_model_default: r.defaults.plan.model_default,
            plan_effort_default: r.defaults.plan.effort_default,
            plan_options: r.defaults.plan.options,
            review_provider: r.review_provider,
            review_model_default: r.defaults.review.model_default,
            review_effort_default: r.defaults.review.effort_default,
            review_options: r.defaults.review.options,
            afk_enabled: r.afk_enabled,
            afk_label: r.afk_label,
            afk_max_concurrent: r.afk_max_concurrent,
            afk_paused: r.afk_paused,
            allow_unsandboxed: r.allow_unsandboxed,
            check_command: r.check_command,
            afk_max_tokens: r.budget.max_tokens,
            afk_max_cost_usd: r.budget.max_cost_nano_usd.map(crate::domain::nano_to_usd),
            afk_run_timeout_minutes: r.budget.run_timeout_minutes,
            memory_max_mb: r.limits.memory_max_mb,
            pids_max: r.limits.pids_max,
            issue_source: r.issues.source.as_str().to_owned(),
            forge_token: r.issues.token_hint(),
            forge_url: r.issues.forge_url,
            forge_repo: r.issues.forge_repo,
            forge_identity: None,
            config_file: ConfigFileBody::of(&r.config),
            knobs: r.knobs,
            allowed_models: r.allowed_models,
            created_at: rfc3339(r.created_at),
            updated_at: rfc3339(r.updated_at),
        }
    }
}

/// A change to a repo: fields present are set; `null` or `""` clears
/// (inherit, or the built-in default for fields that cannot inherit). A
/// change that would leave the repo invalid is refused whole (a 400): the
/// path must hold a git repository on the lab server, `path` and `url`
/// exclude each other, a model, effort or option must fit the repo's
/// provider, and a forge issue source needs `forge_url` and `forge_repo`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RepoPatchBody {
    #[schema(schema_with = schema::repo_name)]
    #[serde(default)]
    pub name: Field<String>,
    #[schema(schema_with = schema::repo_path)]
    #[serde(default)]
    pub path: Field<String>,
    #[schema(schema_with = schema::repo_url)]
    #[serde(default)]
    pub url: Field<String>,
    #[schema(schema_with = schema::branch)]
    #[serde(default)]
    pub default_branch: Field<String>,
    #[schema(schema_with = schema::provider_id_patch)]
    #[serde(default)]
    pub provider: Field<String>,
    /// A model of the repo's provider's catalog (`GET /providers`), in any case.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub model_default: Field<String>,
    /// An effort of the repo's provider's catalog, in any case.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub effort_default: Field<String>,
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub afk_model_default: Field<String>,
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub afk_effort_default: Field<String>,
    #[schema(schema_with = schema::afk_options_patch)]
    #[serde(default)]
    pub afk_options: Field<BTreeMap<String, serde_json::Value>>,
    /// The provider of its plan runs; `null` or `""`: the global
    /// `plan_provider`, else `provider`.
    #[schema(schema_with = schema::kind_provider_patch)]
    #[serde(default)]
    pub plan_provider: Field<String>,
    /// A model of the plan provider's catalog.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub plan_model_default: Field<String>,
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub plan_effort_default: Field<String>,
    #[schema(schema_with = schema::afk_options_patch)]
    #[serde(default)]
    pub plan_options: Field<BTreeMap<String, serde_json::Value>>,
    /// The provider of its review runs; `null` or `""`: the global
    /// `review_provider`, else `provider`.
    #[schema(schema_with = schema::kind_provider_patch)]
    #[serde(default)]
    pub review_provider: Field<String>,
    /// A model of the review provider's catalog.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub review_model_default: Field<String>,
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub review_effort_default: Field<String>,
    #[schema(schema_with = schema::afk_options_patch)]
    #[serde(default)]
    pub review_options: Field<BTreeMap<String, serde_json::Value>>,
    #[schema(value_type = Option<bool>)]
    #[serde(default)]
    pub afk_enabled: Field<bool>,
    #[schema(schema_with = schema::afk_label_patch)]
    #[serde(default)]
    pub afk_label: Field<String>,
    #[schema(schema_with = schema::afk_max_concurrent_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub afk_max_concurrent: Field<i64>,
    /// The AFK scheduler leaves a paused repo alone.
    #[schema(value_type = Option<bool>)]
    #[serde(default)]
    pub afk_paused: Field<bool>,
    /// `null` inherits the global `runs.allow_unsandboxed`.
    #[schema(value_type = Option<bool>)]
    #[serde(default)]
    pub allow_unsandboxed: Field<bool>,
    #[schema(schema_with = schema::check_command_patch)]
    #[serde(default)]
    pub check_command: Field<String>,
    #[schema(schema_with = schema::max_tokens_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub afk_max_tokens: Field<i64>,
    #[schema(schema_with = schema::max_cost_usd_patch)]
    #[serde(default)]
    pub afk_max_cost_usd: Field<f64>,
    #[schema(schema_with = schema::run_timeout_minutes_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub afk_run_timeout_minutes: Field<i64>,
    #[schema(schema_with = schema::repo_memory_max_mb_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub memory_max_mb: Field<i64>,
    #[schema(schema_with = schema::repo_pids_max_patch)]
    #[serde(default, deserialize_with = "whole_number")]
    pub pids_max: Field<i64>,
    #[schema(schema_with = schema::source_kind_patch)]
    #[serde(default)]
    pub issue_source: Field<String>,
    #[schema(schema_with = schema::forge_url)]
    #[serde(default)]
    pub forge_url: Field<String>,
    #[schema(schema_with = schema::forge_repo)]
    #[serde(default)]
    pub forge_repo: Field<String>,
    #[schema(schema_with = schema::forge_token)]
    #[serde(default)]
    pub forge_token: Field<String>,
    #[schema(schema_with = schema::knobs_patch)]
    #[serde(default)]
    pub knobs: Field<serde_json::Map<String, serde_json::Value>>,
    /// The models the repo's issues may ask for (each in its provider's
    /// catalog), replacing the list; `[]` or `null`: the whole catalog.
    #[schema(schema_with = schema::allowed_models_patch)]
    #[serde(default)]
    pub allowed_models: Field<Vec<String>>,
}

refined_body!(
    /// The body of `POST /repos`, as the document describes it: a
    /// [`RepoPatchBody`] with a name and one of `path` and `url`.
    NewRepoBody,
    RepoPatchBody,
    schema::new_repo
);

impl RepoPatchBody {
    pub fn into_patch(self) -> Result<RepoPatch, validate::Invalid> {
        let mut errs = Errors::default();
        let defaults = DefaultsPatchBody {
            model_default: self.model_default,
            effort_default: self.effort_default,
            afk_model_default: self.afk_model_default,
            afk_effort_default: self.afk_effort_default,
            afk_options: self.afk_options,
            plan_model_default: self.plan_model_default,
            plan_effort_default: self.plan_effort_default,
            plan_options: self.plan_options,
            review_model_default: self.review_model_default,
            review_effort_default: self.review_effort_default,
            review_options: self.review_options,
        }
        .into_patch("", &mut errs);
        errs.finish()?;
        Ok(RepoPatch {
            name: self.name.change(),
            path: self.path.change(),
            url: self.url.change(),
            default_branch: self.default_branch.change(),
            provider: self.provider.change(),
            plan_provider: self.plan_provider.change(),
            review_provider: self.review_provider.change(),
            defaults,
            afk_enabled: self.afk_enabled.change(),
            afk_label: self.afk_label.change(),
            afk_max_concurrent: self.afk_max_concurrent.change(),
            afk_paused: self.afk_paused.change(),
            allow_unsandboxed: self.allow_unsandboxed.change(),
            check_command: self.check_command.change(),
            afk_max_tokens: self.afk_max_tokens.change(),
            afk_max_cost_nano_usd: super::settings::usd_to_nano(self.afk_max_cost_usd.change()),
            afk_run_timeout_minutes: self.afk_run_timeout_minutes.change(),
            memory_max_mb: self.memory_max_mb.change(),
            pids_max: self.pids_max.change(),
            issues: crate::repo::issue_source::IssueConfigPatch {
                source: self.issue_source.change(),
                forge_url: self.forge_url.change(),
                forge_repo: self.forge_repo.change(),
                forge_token: self.forge_token.change(),
            },
            knobs: self.knobs.into_knobs(),
            allowed_models: match self.allowed_models {
                Field::Absent => None,
                Field::Null => Some(Vec::new()),
                Field::Value(v) => Some(v),
            },
        })
    }
}

fn not_found(key: &RepoKey) -> impl FnOnce() -> String + '_ {
    move || format!("repo '{key}'")
}

/// Registers a repo.
#[utoipa::path(post, path = "/repos", tag = "repos", request_body = NewRepoBody,
    responses((status = 201, body = RepoBody),
              (status = 400, description = "A value is invalid, or the path holds no git repository", body = ErrorBody),
              (status = 409, description = "A repo of that name exists", body = ErrorBody)))]
async fn create_repo(
    State(app): State<AppState>,
    ApiJson(body): ApiJson<RepoPatchBody>,
) -> ApiResult<(StatusCode, Json<RepoBody>)> {
    let created =
        service::repos::create(&app.store, app.scheduler.sources(), &body.into_patch()?).await?;
    Ok((StatusCode::CREATED, Json(shown(&app, created))))
}

/// All repos, by name.
#[utoipa::path(get, path = "/repos", tag = "repos", responses((status = 200, body = Vec<RepoBody>)))]
async fn list_repos(State(app): State<AppState>) -> ApiResult<Json<Vec<RepoBody>>> {
    let repos = app.store.repos().await.map_err(ApiError::internal)?;
    Ok(Json(repos.into_iter().map(|r| shown(&app, r)).collect()))
}

/// One repo, by id or name.
#[utoipa::path(get, path = "/repos/{id}", tag = "repos",
    params(("id" = String, Path, description = "repo id or name")),
    responses((status = 200, body = RepoBody)))]
async fn get_repo(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<RepoBody>> {
    let key = RepoKey::parse(&id);
    let repo = app
        .store
        .repo(&key)
        .await
        .map_err(|e| ApiError::from_store(e, not_found(&key)))?;
    // The forge account is read once (and not waited for long).
    if app.scheduler.sources().known_identity(&repo).is_none() {
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(3),
            app.scheduler.sources().identity(&repo),
        )
        .await;
    }
    Ok(Json(shown(&app, repo)))
}

/// A repo as the API shows it, with its forge account when known.
fn shown(app: &AppState, repo: Repo) -> RepoBody {
    let identity = app.scheduler.sources().known_identity(&repo);
    RepoBody {
        forge_identity: identity,
        ..repo.into()
    }
}

/// Changes a repo. A request with any invalid field writes nothing; changing
/// the provider reports stored values that do not fit the new one.
#[utoipa::path(patch, path = "/repos/{id}", tag = "repos", request_body = RepoPatchBody,
    params(("id" = String, Path, description = "repo id or name")),
    responses((status = 200, body = RepoBody),
              (status = 400, description = "A value is invalid, or the change would leave the repo invalid", body = ErrorBody),
              (status = 409, description = "Another repo has that name", body = ErrorBody)))]
async fn patch_repo(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<RepoPatchBody>,
) -> ApiResult<Json<RepoBody>> {
    let key = RepoKey::parse(&id);
    let repo = service::repos::update(
        &app.store,
        app.scheduler.sources(),
        &key,
        &body.into_patch()?,
    )
    .await?;
    Ok(Json(shown(&app, repo)))
}

/// Removes a repo from lab (its files are left alone). Its ended runs stay
/// listed; a repo with live runs cannot be removed.
#[utoipa::path(delete, path = "/repos/{id}", tag = "repos",
    params(("id" = String, Path, description = "repo id or name")),
    responses((status = 204), (status = 409, description = "The repo has live runs", body = ErrorBody)))]
async fn delete_repo(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    service::repos::remove(&app.store, &app.runner, &RepoKey::parse(&id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_repo, list_repos))
        .routes(routes!(get_repo, patch_repo, delete_repo))
        .merge(resolve::router())
}

mod resolve;
pub use resolve::{ResolveQuery, ResolvedBody};
