//! `GET /api/v1/repos/{id}/resolve`: what a run of a repo would get, of
//! any kind, and where each value comes from (ADR 2, ADR 32).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::not_found;
use crate::domain::{RunKind, Sourced};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{ApiPath, ApiQuery};
use crate::http::schema;
use crate::resolve::{self, Resolved};
use crate::state::AppState;
use crate::store::RepoKey;
use crate::validate;

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ResolveQuery {
    /// `manual` (the default), `afk`, `plan` or `review`.
    #[param(value_type = RunKind, required = false)]
    pub kind: Option<String>,
    /// Manual only: the model asked for, of the repo's provider's catalog.
    #[param(value_type = String, required = false)]
    pub model: Option<String>,
    /// Manual only: the effort asked for, of the repo's provider's catalog.
    #[param(value_type = String, required = false)]
    pub effort: Option<String>,
    /// AFK only: resolve for this issue, its directives (knobs) on top.
    #[param(value_type = i64, required = false)]
    pub issue: Option<i64>,
}

impl ResolveQuery {
    fn asked(&self) -> resolve::Asked<'_> {
        resolve::Asked {
            model: self.model.as_deref(),
            effort: self.effort.as_deref(),
            options: None,
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct ResolvedBody {
    pub kind: RunKind,
    #[schema(schema_with = schema::provider_id)]
    pub provider: String,
    pub model: Sourced,
    pub effort: Sourced,
    pub options: BTreeMap<String, Sourced>,
    /// AFK: every knob's value and where it came from; manual runs have
    /// none.
    #[serde(default)]
    pub knobs: Vec<crate::http::knobs::SourcedKnobBody>,
    /// AFK: the budgets, and where each came from.
    #[serde(default)]
    pub budget: Option<crate::http::knobs::BudgetBody>,
    /// With `issue`: why its directives were left out (its author may not
    /// write to the repo); `null` when they were used or there were none.
    #[serde(default)]
    pub issue_directives_ignored: Option<String>,
}

impl From<Resolved> for ResolvedBody {
    fn from(r: Resolved) -> Self {
        ResolvedBody {
            kind: r.kind,
            provider: r.provider.to_string(),
            model: r.model,
            effort: r.effort,
            options: r.options,
            knobs: Vec::new(),
            budget: None,
            issue_directives_ignored: None,
        }
    }
}

/// What a run of this repo would get, and where each value comes from.
#[utoipa::path(get, path = "/repos/{id}/resolve", tag = "repos",
    params(("id" = String, Path, description = "repo id or name"), ResolveQuery),
    responses((status = 200, body = ResolvedBody),
              (status = 400, description = "A value is invalid (a model or effort outside the repo's provider's catalog included)", body = ErrorBody)))]
async fn resolve_repo(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<ResolveQuery>,
) -> ApiResult<Json<ResolvedBody>> {
    let key = RepoKey::parse(&id);
    let kind: RunKind = match q.kind.as_deref() {
        None => RunKind::Manual,
        Some(k) => k.parse().map_err(|m: String| {
            validate::FieldError::new("kind", m).with_value(validate::shown(k))
        })?,
    };
    let (repo, global) = app
        .store
        .repo_with_global(&key)
        .await
        .map_err(|e| ApiError::from_store(e, not_found(&key)))?;
    if kind != RunKind::Afk && q.issue.is_some() {
        return Err(validate::FieldError::new(
            "issue",
            "only AFK runs have an issue: add kind=afk",
        )
        .into());
    }
    // A plan or review run's provider may be another than the repo's.
    if matches!(kind, RunKind::Plan | RunKind::Review) {
        let settings = app.store.settings().await.map_err(ApiError::internal)?;
        let resolved = resolve::resolve_kind_request(&repo, &settings, kind, q.asked(), None)?;
        return Ok(Json(resolved.into()));
    }
    if kind != RunKind::Afk {
        let resolved = resolve::resolve_request(&repo, &global, kind, q.asked())?;
        return Ok(Json(resolved.into()));
    }
    let settings = app.store.settings().await.map_err(ApiError::internal)?;
    let cx = resolve::KnobContext {
        repo: &repo,
        settings: &settings,
    };
    let mut ignored = None;
    let directives = match q.issue {
        None => crate::issues::directives::Directives::None,
        Some(n) => {
            let source = app.scheduler.sources().of(&repo);
            let issue = source
                .issue(n)
                .await
                .map_err(crate::http::issues::source_error)?;
            crate::issues::directives::of(source.as_ref(), &issue, cx)
                .await
                .map_err(crate::http::issues::source_error)?
        }
    };
    match &directives {
        crate::issues::directives::Directives::Invalid(e) => {
            return Err(ApiError::invalid(e.clone()));
        }
        crate::issues::directives::Directives::Ignored { author } => {
            ignored = Some(format!(
                "its author ({}) may not write to the repo",
                validate::shown(author)
            ));
        }
        _ => {}
    }
    // The query's model and effort are refused for AFK runs, as ever.
    resolve::resolve_request(&repo, &global, kind, q.asked())?;
    let layer = directives.layer();
    let resolved = resolve::resolve_afk(&repo, &global, layer)?;
    let mut body = ResolvedBody::from(resolved);
    body.knobs = resolve::run_knobs(cx, layer)
        .into_iter()
        .map(Into::into)
        .collect();
    body.budget = Some(resolve::budget(cx, layer.map(|l| &l.budget)).into());
    body.issue_directives_ignored = ignored;
    Ok(Json(body))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(resolve_repo))
}
