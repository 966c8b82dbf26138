//! `/api/v1/runs`: start a manual run, list, show, stop, output, remove.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::schema;
use crate::domain::rfc3339;
use crate::state::AppState;

use crate::domain::{
    Outcome, OutputFormat, Phase, Run, RunKind, RunState, Sourced, StopCause, Usage,
};
use crate::run::{Runner, log};
use crate::service;
use crate::store::{RepoKey, RunFilter};
use crate::validate::{self, FieldError};

#[derive(Serialize, Deserialize, ToSchema)]
pub struct RunBody {
    pub id: i64,
    pub kind: RunKind,
    pub repo: String,
    pub repo_id: Option<i64>,
    #[schema(schema_with = schema::provider_id)]
    pub provider: String,
    pub model: Sourced,
    pub effort: Sourced,
    pub options: BTreeMap<String, Sourced>,
    pub prompt: String,
    pub state: RunState,
    /// Which step of its work the run is at: `working`, `checking` (an AFK
    /// run's turn is over and lab judges it), `done`; `planning`,
    /// `plan-review` and `reviewing` are the plan and review runs' (issue
    /// 28).
    pub phase: Phase,
    /// Why the run failed, ended or waits.
    pub state_reason: Option<String>,
    pub node: String,
    pub session: String,
    pub tmux_socket: String,
    /// What to type to attach to the run's session (on the lab machine).
    pub attach_command: String,
    pub workspace: Option<String>,
    pub workspace_removed: bool,
    pub branch: Option<String>,
    pub log_path: Option<String>,
    pub pid: Option<i64>,
    pub exit_status: Option<i64>,
    pub exit_signal: Option<i64>,
    /// Whether the agent runs in lab's sandbox; `false` only where the
    /// machine has none and the operator allowed runs without it.
    pub sandboxed: bool,
    /// The caps the run's agent runs under, as applied (ADR 24).
    pub limits: LimitsBody,
    /// Bytes of the run's oldest output lab dropped to keep its log under
    /// `runs.log_max_mb` (0: the log is whole).
    pub log_dropped_bytes: u64,
    /// Bytes its workspace takes on disk, as last measured (within 30 s;
    /// `GET /runs/{id}` measures; `null` when not measured or gone).
    pub workspace_bytes: Option<u64>,
    /// Why lab stopped the run (`operator`, `time_limit`, `pull_request`);
    /// `null` when it did not.
    pub stop_cause: Option<StopCause>,
    /// What the agent is doing, from its CLI's hooks (ADR 13); `null` until
    /// known, and once the run has ended.
    pub agent_state: Option<super::agent::AgentStateBody>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    /// The agent CLI's own session id: the `--session-id` lab gave Claude
    /// Code, or the id of the run's Codex rollout once found; `null` until
    /// known.
    pub cli_session_id: Option<String>,
    /// What the agent used, read from its CLI's transcript; `null` until the
    /// transcript is found.
    pub usage: Option<UsageBody>,
    /// The issue the run works on; `null` for a manual run started without
    /// one.
    pub issue: Option<RunIssueBody>,
    /// Which attempt at its issue the run is (1 for the first, and for a
    /// manual run); a failed attempt is tried again up to
    /// `afk.max_attempts`.
    pub attempt: i64,
    /// Which round on its pull request the run is in: 1 until a failing
    /// check or a review sends it back to work (at most `afk.max_rounds`).
    pub round: i64,
    /// How the run ended for its issue (AFK runs, once settled).
    pub outcome: Option<Outcome>,
    /// The knobs an AFK run works with, each with where its value came from
    /// (`issue`, `repo`, `repo file`, `settings`, `default`); `[]` for a
    /// manual run.
    #[serde(default)]
    pub knobs: Vec<crate::http::knobs::SourcedKnobBody>,
}

/// The issue a run works on, as it was when the run started.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq)]
pub struct RunIssueBody {
    /// The repo's name.
    pub repo: String,
    pub number: i64,
    pub title: String,
    /// Where a person reads it: the forge's page, or lab's.
    pub url: Option<String>,
}

/// Tokens, turns and cost of a run, from its CLI's own transcript.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq)]
pub struct UsageBody {
    /// Input tokens not read from a cache.
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: i64,
    /// Input tokens written to the prompt cache.
    pub cache_creation_tokens: i64,
    /// Prompts the agent was given.
    pub turns: i64,
    /// US dollars at lab's dated price table, for the tokens of models it
    /// has a price for (`unpriced_tokens` are left out); `null` only for a
    /// run read before lab counted those apart.
    pub cost_usd: Option<f64>,
    /// Tokens of models lab has no price for (counted in the token totals,
    /// not in the cost).
    pub unpriced_tokens: i64,
}

impl From<&Usage> for UsageBody {
    fn from(u: &Usage) -> Self {
        UsageBody {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_creation_tokens: u.cache_creation_tokens,
            turns: u.turns,
            cost_usd: u.cost_usd(),
            unpriced_tokens: u.unpriced_tokens,
        }
    }
}

impl RunBody {
    pub fn new(r: Run, runner: &Runner) -> RunBody {
        let log_dropped = r.log_path.as_deref().map_or(0, crate::run::log::dropped);
        let phase = r.phase();
        RunBody {
            attach_command: runner.tmux().attach_command(&r.session),
            tmux_socket: runner.tmux().socket().to_string_lossy().into_owned(),
            id: r.id,
            kind: r.kind,
            repo_id: r.repo_id,
            provider: r.provider,
            model: r.model,
            effort: r.effort,
            options: r.options,
            knobs: r.knobs.into_iter().map(Into::into).collect(),
            prompt: r.prompt,
            phase,
            state: r.state,
            state_reason: r.state_reason,
            node: r.node,
            session: r.session,
            workspace: r.workspace,
            workspace_removed: r.workspace_removed_at.is_some(),
            branch: r.branch,
            log_path: r.log_path,
            pid: r.pid,
            exit_status: r.exit_status,
            exit_signal: r.exit_signal,
            sandboxed: r.sandboxed,
            limits: LimitsBody {
                memory_max_mb: r.limits.memory_max_mb,
                pids_max: r.limits.pids_max,
            },
            log_dropped_bytes: log_dropped,
            workspace_bytes: runner.disk().cached(r.id),
            stop_cause: r.stop_cause,
            agent_state: r.agent.filter(|_| r.state.is_active()).map(Into::into),
            created_at: rfc3339(r.created_at),
            started_at: r.started_at.map(rfc3339),
            ended_at: r.ended_at.map(rfc3339),
            usage: r.usage.as_ref().map(UsageBody::from),
            cli_session_id: r.cli_session_id,
            issue: r.issue.map(|i| RunIssueBody {
                repo: r.repo_name.clone(),
                number: i.number,
                title: i.title,
                url: i.url,
            }),
            attempt: r.attempt,
            round: r.round,
            outcome: r.outcome,
            repo: r.repo_name,
        }
    }
}

/// A run's caps: `null` is no cap (none is applied where cgroups cannot be
/// used: `GET /status`'s `sandbox.cgroups`).
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitsBody {
    /// MiB of memory; past it the run is ended `failed`, out of memory.
    pub memory_max_mb: Option<i64>,
    /// Processes and threads at once.
    pub pids_max: Option<i64>,
}

/// A manual run: the model and effort asked for override the repo's
/// resolved base defaults for this one start.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRunBody {
    /// Repo name or id.
    pub repo: String,
    /// The provider to run (`GET /providers`); the repo's when absent.
    /// Another provider's run takes its global defaults and none of the
    /// repo's written for the repo's provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = schema::provider_id)]
    pub provider: Option<String>,
    /// A model of the run's provider's catalog (`GET /providers`), in any
    /// case; the default when absent.
    #[serde(default)]
    pub model: Option<String>,
    /// An effort of the repo's provider's catalog, in any case; the repo's
    /// default when absent.
    #[serde(default)]
    pub effort: Option<String>,
    /// Spawn options of the run's provider (`GET /providers`: each
    /// provider's `options`), by key. A manual run also takes the values
    /// that ask a person (an option's `asks`); a key not named is the CLI's
    /// own default.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
    #[serde(default)]
    #[schema(schema_with = schema::prompt)]
    pub prompt: Option<String>,
    /// The lab node to start it on (`GET /nodes`); absent: this node, or,
    /// while it drains, the node that takes new runs with the most memory
    /// available. Another node starts it there and answers for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// Starts a manual run. An invalid model or effort is a 400 and nothing
/// starts. A run that fails after it was recorded comes back with state
/// `failed` and the reason.
#[utoipa::path(post, path = "/runs", tag = "runs", request_body = StartRunBody,
    responses((status = 201, description = "The run: started, or `failed` with the reason", body = RunBody),
              (status = 400, description = "A value is invalid (a model or effort outside the repo's provider's catalog included)", body = ErrorBody),
              (status = 404, description = "No such repo, or no such node", body = ErrorBody),
              (status = 409, description = "The provider's CLI is unavailable, the repo's state forbids it, or the node named is down", body = ErrorBody),
              (status = 502, description = "The node named did not answer", body = ErrorBody)))]
async fn start_run(
    State(app): State<AppState>,
    call: Option<axum::Extension<crate::fleet::key::NodeCall>>,
    ApiJson(body): ApiJson<StartRunBody>,
) -> ApiResult<Response> {
    match app.fleet.place(body.node.as_deref(), call.is_some()).await {
        Ok(crate::fleet::Place::Here) => {}
        Ok(crate::fleet::Place::There(node)) => {
            // The node chosen starts it and answers for it.
            let json = serde_json::to_vec(&body).expect("a start body is JSON");
            let mut h = axum::http::HeaderMap::new();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            return app
                .fleet
                .forward(
                    &node,
                    axum::http::Method::POST,
                    "/api/v1/runs",
                    &h,
                    None,
                    json.into(),
                )
                .await
                .map_err(|e| {
                    ApiError::new(StatusCode::BAD_GATEWAY, "node_unreachable", e.to_string())
                });
        }
        Err(e @ crate::fleet::Misplaced::Unknown(_)) => {
            return Err(ApiError::not_found(e.to_string()));
        }
        Err(e @ (crate::fleet::Misplaced::Down(_) | crate::fleet::Misplaced::Forwarded { .. })) => {
            return Err(ApiError::conflict(e.to_string()));
        }
    }
    let prompt = body.prompt.unwrap_or_default();
    let (run, t) = service::runs::start_manual(
        &app.store,
        &app.runner,
        service::runs::ManualStart {
            repo: &body.repo,
            provider: body.provider.as_deref(),
            model: body.model,
            effort: body.effort,
            options: body.options,
            prompt,
        },
    )
    .await?;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let timing = format!(
        "insert;dur={:.3}, workspace;dur={:.3}, prepare;dur={:.3}, tmux;dur={:.3}, record;dur={:.3}, total;dur={:.3}",
        ms(t.insert),
        ms(t.workspace),
        ms(t.prepare),
        ms(t.tmux),
        ms(t.record),
        ms(t.total)
    );
    let mut resp = (StatusCode::CREATED, Json(RunBody::new(run, &app.runner))).into_response();
    if let Ok(v) = HeaderValue::from_str(&timing) {
        resp.headers_mut().insert("server-timing", v);
    }
    Ok(resp)
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Repo name or id.
    #[param(value_type = String, required = false)]
    pub repo: Option<String>,
    #[param(value_type = RunState, required = false)]
    pub state: Option<String>,
    #[param(value_type = RunKind, required = false)]
    pub kind: Option<String>,
    /// At most this many, newest first (default 1000).
    #[param(required = false, schema_with = schema::run_limit)]
    pub limit: Option<i64>,
}

/// The most runs one list returns.
pub const MAX_LIST: i64 = 10_000;

impl ListQuery {
    pub fn filter(self) -> Result<RunFilter, ApiError> {
        let mut errs = validate::Errors::default();
        let state = self.state.as_deref().and_then(|s| {
            errs.check(
                s.parse::<RunState>()
                    .map_err(|m| FieldError::new("state", m).with_value(validate::shown(s))),
            )
        });
        let kind = self.kind.as_deref().and_then(|k| {
            errs.check(
                k.parse::<RunKind>()
                    .map_err(|m| FieldError::new("kind", m).with_value(validate::shown(k))),
            )
        });
        let limit = self
            .limit
            .and_then(|l| errs.check(validate::int_range("limit", l, 1, MAX_LIST)));
        errs.finish()?;
        Ok(RunFilter {
            repo: self.repo.as_deref().map(RepoKey::parse),
            state,
            kind,
            limit,
        })
    }
}

/// Runs, newest first, optionally filtered.
#[utoipa::path(get, path = "/runs", tag = "runs", params(ListQuery),
    responses((status = 200, body = Vec<RunBody>)))]
async fn list_runs(
    State(app): State<AppState>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<Vec<RunBody>>> {
    let runs = app
        .store
        .runs(&q.filter()?)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(
        runs.into_iter()
            .map(|r| RunBody::new(r, &app.runner))
            .collect(),
    ))
}

/// A run id from the path: a number.
pub fn run_id(s: &str) -> Result<i64, ApiError> {
    s.parse::<i64>().map_err(|_| {
        ApiError::not_found(format!(
            "run '{}' not found: run ids are numbers",
            validate::shown(s)
        ))
    })
}

#[utoipa::path(get, path = "/runs/{id}", tag = "runs", params(("id" = i64, Path)),
    responses((status = 200, body = RunBody)))]
async fn get_run(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<RunBody>> {
    let run = stored_run(&app, run_id(&id)?).await?;
    if let Some(ws) = run
        .workspace
        .as_deref()
        .filter(|_| run.workspace_removed_at.is_none())
    {
        app.runner.disk().of(run.id, std::path::Path::new(ws)).await;
    }
    Ok(Json(RunBody::new(run, &app.runner)))
}

/// Run `id` as stored; a 404 naming it when there is none.
pub async fn stored_run(app: &AppState, id: i64) -> Result<Run, ApiError> {
    app.store
        .run(id)
        .await
        .map_err(|e| ApiError::from_store(e, || format!("run {id}")))
}

/// Stops a live run: its whole process tree, then its session.
#[utoipa::path(post, path = "/runs/{id}/stop", tag = "runs", params(("id" = i64, Path)),
    responses((status = 200, body = RunBody),
              (status = 409, description = "The run is not live, or is being stopped", body = ErrorBody)))]
async fn stop_run(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<RunBody>> {
    let id = run_id(&id)?;
    let run = service::runs::stop(&app.runner, id, "stopped by the operator").await?;
    Ok(Json(RunBody::new(run, &app.runner)))
}

/// Removes an ended run, its workspace and its log. Its branch stays.
#[utoipa::path(delete, path = "/runs/{id}", tag = "runs", params(("id" = i64, Path)),
    responses((status = 204),
              (status = 409, description = "The run is live, or is being stopped", body = ErrorBody)))]
async fn delete_run(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    let id = run_id(&id)?;
    service::runs::remove(&app.runner, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OutputQuery {
    /// Byte offset in the log to start from (the `X-Lab-Log-Offset` of the
    /// previous response).
    #[param(required = false, schema_with = schema::log_offset)]
    pub offset: Option<u64>,
    /// `text` (terminal control sequences removed, the default) or `raw`.
    #[param(required = false, schema_with = schema::output_format)]
    pub format: Option<String>,
}

/// The most one output response carries.
const OUTPUT_CHUNK: u64 = 4 * 1024 * 1024;

/// The run's terminal output so far, as text. Headers: `X-Lab-Log-Offset`
/// (where to continue), `X-Lab-Run-State`.
#[utoipa::path(get, path = "/runs/{id}/output", tag = "runs", params(("id" = i64, Path), OutputQuery),
    responses((status = 200, content_type = "text/plain", body = String, headers(
        ("x-lab-log-offset" = u64, description = "The offset to ask for next"),
        ("x-lab-run-state" = RunState, description = "The run's state")))))]
async fn run_output(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<OutputQuery>,
) -> ApiResult<Response> {
    let id = run_id(&id)?;
    let format = q
        .format
        .as_deref()
        .map(|f| validate::choice::<OutputFormat>("format", f))
        .transpose()?
        .unwrap_or_default();
    let run = app
        .store
        .run(id)
        .await
        .map_err(|e| ApiError::from_store(e, || format!("run {id}")))?;
    service::runs::on_this_node(&app.runner, &run)?;
    let Some(path) = run.log_path.as_deref() else {
        return Err(ApiError::not_found(format!("run {id} has no log")));
    };
    let (bytes, next) =
        log::read(path, q.offset.unwrap_or(0), OUTPUT_CHUNK).map_err(ApiError::internal)?;
    let body = match format {
        OutputFormat::Raw => bytes,
        OutputFormat::Text => crate::run::log_text::text(&bytes),
    };
    let mut resp = (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        body,
    )
        .into_response();
    let h = resp.headers_mut();
    h.insert("x-lab-log-offset", HeaderValue::from(next));
    h.insert(
        "x-lab-run-state",
        HeaderValue::from_static(run.state.as_str()),
    );
    Ok(resp)
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start_run, list_runs))
        .routes(routes!(get_run, delete_run))
        .routes(routes!(stop_run))
        .routes(routes!(run_output))
}
