//! The AFK scheduler over HTTP: start one run now, pause and resume,
//! status, and the ledger of outcomes.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::ApiPath;
use super::issues::ForgeErrors;
use super::repos::RepoBody;
use super::runs::RunBody;
use crate::afk::StartError;
use crate::domain::{Change, Outcome};
use crate::provider::ProviderId;
use crate::repo::RepoPatch;
use crate::service::runs::launch_error;
use crate::state::AppState;

use crate::service::afk::{LedgerBody, ledger};
use crate::store::{Claim, RepoKey};

fn start_error(e: StartError) -> ApiError {
    match e {
        StartError::Paused(m) => ApiError::new(StatusCode::CONFLICT, "paused", m),
        e @ StartError::NoReadyIssue { .. } => {
            ApiError::new(StatusCode::CONFLICT, "no_ready_issue", e.to_string())
        }
        StartError::Cap(m) => ApiError::new(StatusCode::CONFLICT, "cap_reached", m),
        StartError::Source(s) => super::issues::source_error(s),
        StartError::Launch(l) => launch_error(l).into(),
        StartError::Store(s) => ApiError::internal(s),
    }
}

/// Starts an AFK run now for the repo's next ready issue, or says why not
/// (409: no ready issue, a cap reached, paused).
#[utoipa::path(post, path = "/repos/{id}/afk/start", tag = "afk",
    params(("id" = String, Path, description = "repo id or name")),
    responses((status = 201, description = "The run: started, or `failed` with the reason", body = RunBody),
              (status = 409, description = "No ready issue, a cap reached, paused, or the provider's CLI unavailable", body = ErrorBody),
              ForgeErrors))]
async fn start(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<(StatusCode, Json<RunBody>)> {
    let key = RepoKey::parse(&id);
    let repo = app
        .store
        .repo(&key)
        .await
        .map_err(|e| ApiError::from_store(e, || format!("repo '{key}'")))?;
    let run = app
        .scheduler
        .start_next(&repo, true)
        .await
        .map_err(start_error)?;
    Ok((StatusCode::CREATED, Json(RunBody::new(run, &app.runner))))
}

async fn set_repo_paused(app: &AppState, id: &str, paused: bool) -> ApiResult<Json<RepoBody>> {
    let key = RepoKey::parse(id);
    let patch = RepoPatch {
        afk_paused: Change::Set(paused),
        ..RepoPatch::default()
    };
    Ok(Json(
        crate::service::repos::update(&app.store, app.scheduler.sources(), &key, &patch)
            .await?
            .into(),
    ))
}

/// Pauses AFK runs of one repo (live runs go on).
#[utoipa::path(post, path = "/repos/{id}/afk/pause", tag = "afk",
    params(("id" = String, Path, description = "repo id or name")),
    responses((status = 200, body = RepoBody)))]
async fn pause_repo(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<RepoBody>> {
    set_repo_paused(&app, &id, true).await
}

#[utoipa::path(post, path = "/repos/{id}/afk/resume", tag = "afk",
    params(("id" = String, Path, description = "repo id or name")),
    responses((status = 200, body = RepoBody)))]
async fn resume_repo(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<RepoBody>> {
    set_repo_paused(&app, &id, false).await
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct ClaimBody {
    pub repo: String,
    pub issue: i64,
    pub run_id: Option<i64>,
    pub node: String,
    pub active: bool,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub pr_url: Option<String>,
    /// Its pull request's number on its source.
    pub pr_number: Option<i64>,
    pub outcome: Option<Outcome>,
    pub detail: Option<String>,
    /// Which attempt at its issue (1 for the first).
    pub attempt: i64,
    /// Rounds its run had on its pull request.
    pub rounds: i64,
    /// For a failed attempt that is tried again: from when.
    pub retry_at: Option<String>,
    /// What its pull request's check said last (`passed`, `none`, or
    /// `failed: …`).
    pub checks: Option<String>,
}

impl From<Claim> for ClaimBody {
    fn from(c: Claim) -> Self {
        ClaimBody {
            repo: c.repo_name,
            issue: c.issue_number,
            run_id: c.run_id,
            node: c.node,
            active: c.active,
            model: c.model,
            effort: c.effort,
            pr_url: c.pr_url,
            pr_number: c.pr_number,
            outcome: c.outcome,
            detail: c.detail,
            attempt: c.attempt,
            rounds: c.rounds,
            retry_at: c.retry_at.map(crate::domain::rfc3339),
            checks: c.checks,
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct RepoAfkBody {
    pub repo: String,
    pub enabled: bool,
    pub paused: bool,
    pub label: String,
    pub live: usize,
    pub max_concurrent: i64,
    /// The last thing that kept the scheduler from this repo's issues.
    pub problem: Option<String>,
}

/// A provider held back by a usage limit.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct LimitedBody {
    #[schema(schema_with = super::schema::provider_id)]
    pub provider: String,
    /// `usage-limit` (two runs hit it; until its reset), `cli` (the CLI's
    /// own check says it cannot work; until a check passes) or `no-answer`
    /// (two runs got no answer from its model API; for 15 minutes).
    pub kind: String,
    /// For a usage limit, when lab lets it run again; for a CLI that
    /// cannot work, when lab checks it again.
    pub until: String,
    /// What its CLI said, or why it cannot work (`not logged in`).
    pub reason: String,
    /// What to do about it (a CLI that cannot work).
    pub fix: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct AfkStatusBody {
    pub paused: bool,
    pub live: usize,
    pub max_concurrent: i64,
    pub tick_seconds: i64,
    pub run_timeout_minutes: i64,
    /// The scheduler's limits, as `GET /settings` gives them under `afk`.
    pub limits: super::settings::AfkBody,
    /// Why AFK launches wait for memory (`afk.memory_per_run_mb`), when
    /// they do.
    pub admission: Option<String>,
    /// Providers lab holds back after their CLI reported a usage limit:
    /// no new AFK run for them until `until`.
    pub limited: Vec<LimitedBody>,
    pub repos: Vec<RepoAfkBody>,
    /// The most recent AFK runs, newest first.
    pub recent: Vec<ClaimBody>,
}

impl From<crate::afk::limits::Limited> for LimitedBody {
    fn from(l: crate::afk::limits::Limited) -> Self {
        LimitedBody {
            provider: l.provider,
            kind: match l.kind {
                crate::afk::limits::HoldKind::UsageLimit => "usage-limit",
                crate::afk::limits::HoldKind::Cli => "cli",
                crate::afk::limits::HoldKind::NoAnswer => "no-answer",
            }
            .to_owned(),
            until: crate::domain::rfc3339(l.until_ms),
            reason: l.reason,
            fix: l.fix,
        }
    }
}

async fn status_body(app: &AppState) -> ApiResult<AfkStatusBody> {
    let s = crate::service::afk::status(&app.store, &app.scheduler)
        .await
        .map_err(ApiError::internal)?;
    Ok(AfkStatusBody {
        paused: s.paused,
        live: s.live,
        max_concurrent: s.afk.max_concurrent,
        tick_seconds: s.afk.tick_seconds,
        run_timeout_minutes: s.afk.run_timeout_minutes,
        limits: super::settings::AfkBody::from(&s.afk),
        admission: s.admission,
        limited: s.limited.into_iter().map(LimitedBody::from).collect(),
        repos: s
            .repos
            .into_iter()
            .map(|r| RepoAfkBody {
                repo: r.repo,
                enabled: r.enabled,
                paused: r.paused,
                label: r.label,
                live: r.live,
                max_concurrent: r.max_concurrent,
                problem: r.problem,
            })
            .collect(),
        recent: s.recent.into_iter().map(ClaimBody::from).collect(),
    })
}

/// The scheduler: paused or not, its limits, each repo, recent AFK runs.
#[utoipa::path(get, path = "/afk/status", tag = "afk", responses((status = 200, body = AfkStatusBody)))]
async fn status(State(app): State<AppState>) -> ApiResult<Json<AfkStatusBody>> {
    Ok(Json(status_body(&app).await?))
}

/// Pauses the scheduler on every node (live runs go on).
#[utoipa::path(post, path = "/afk/pause", tag = "afk", responses((status = 200, body = AfkStatusBody)))]
async fn pause(State(app): State<AppState>) -> ApiResult<Json<AfkStatusBody>> {
    crate::service::afk::set_paused(&app.store, true)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(status_body(&app).await?))
}

#[utoipa::path(post, path = "/afk/resume", tag = "afk", responses((status = 200, body = AfkStatusBody)))]
async fn resume(State(app): State<AppState>) -> ApiResult<Json<AfkStatusBody>> {
    crate::service::afk::set_paused(&app.store, false)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(status_body(&app).await?))
}

/// What lab's own check of a provider's CLI says.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct CliCheckBody {
    #[schema(schema_with = super::schema::provider_id)]
    pub provider: String,
    /// Whether its CLI can work here (it starts, and is signed in).
    pub works: bool,
    /// Why it cannot, when it cannot (`not logged in`).
    pub reason: Option<String>,
}

/// Checks a provider's CLI now (its version, then its own sign-in check,
/// in a run's conditions): a CLI that works lets its held AFK runs go on,
/// one that does not holds them back (`limited`, kind `cli`).
#[utoipa::path(post, path = "/afk/providers/{provider}/check", tag = "afk",
    params(("provider" = String, Path, description = "provider id")),
    responses((status = 200, body = CliCheckBody), (status = 404, body = ErrorBody)))]
async fn check_provider(
    State(app): State<AppState>,
    ApiPath(provider): ApiPath<String>,
) -> ApiResult<Json<CliCheckBody>> {
    let Ok(id) = provider.parse::<ProviderId>() else {
        return Err(ApiError::not_found(format!(
            "provider '{provider}' (lab knows: {})",
            crate::provider::ids().join(", ")
        )));
    };
    let reason = app.scheduler.check_cli(id, true).await;
    Ok(Json(CliCheckBody {
        provider,
        works: reason.is_none(),
        reason,
    }))
}

/// AFK outcomes per repo and per model/effort: runs, succeeded, failed,
/// timed out, median duration.
#[utoipa::path(get, path = "/afk/ledger", tag = "afk", responses((status = 200, body = LedgerBody)))]
async fn get_ledger(State(app): State<AppState>) -> ApiResult<Json<LedgerBody>> {
    Ok(Json(ledger(&app.store).await.map_err(ApiError::internal)?))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start))
        .routes(routes!(pause_repo))
        .routes(routes!(resume_repo))
        .routes(routes!(status))
        .routes(routes!(pause))
        .routes(routes!(resume))
        .routes(routes!(get_ledger))
        .routes(routes!(check_provider))
}
