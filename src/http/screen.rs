//! `/api/v1/runs/{id}/screen` and `/input`: a run's screen as its CLI drew
//! it, and typing into the run.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::dto::refined_body;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::runs::run_id;
use super::schema;
use crate::domain::{RunState, ScreenFormat};
use crate::run::screen::SCROLLBACK;
use crate::service;
use crate::state::AppState;
use crate::validate;

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ScreenQuery {
    /// `text` (the default), `html` or `ansi`.
    #[param(required = false, schema_with = schema::screen_format)]
    pub format: Option<String>,
    /// Lines from above the screen (what scrolled off) to put first; 0 by
    /// default.
    #[param(required = false, schema_with = schema::screen_history)]
    pub history: Option<i64>,
}

/// A run's screen.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct ScreenBody {
    pub run: i64,
    pub state: RunState,
    pub rows: u16,
    pub cols: u16,
    /// The lines as drawn, joined by `\n`, trailing blanks trimmed (as
    /// `tmux capture-pane -p` prints them); with `format=text`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The same lines as HTML spans (colour classes `f0`–`f15`/`b0`–`b15`,
    /// `bo` bold, `dm` dim, `it` italic, `un` underline, `fi`/`bi` swapped
    /// default colours, `cur` the cursor; other colours inline), for a
    /// `<pre>`; with `format=html`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
    /// Terminal escapes that draw the screen; with `format=ansi`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ansi: Option<String>,
    /// How many lines from above the screen come first.
    pub history: usize,
    /// The cursor's row and column (from 0), and whether the CLI shows it.
    pub cursor: Cursor,
    /// Bytes of the run's log this screen shows.
    pub offset: u64,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Cursor {
    pub row: u16,
    pub col: u16,
    pub visible: bool,
}

/// The run's screen as its CLI drew it: the log replayed through a terminal
/// emulator the size of the run's pane.
#[utoipa::path(get, path = "/runs/{id}/screen", tag = "runs", params(("id" = i64, Path), ScreenQuery),
    responses((status = 200, body = ScreenBody),
              (status = 400, description = "A query value is invalid", body = ErrorBody),
              (status = 404, description = "No such run", body = ErrorBody)))]
async fn screen(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<ScreenQuery>,
) -> ApiResult<Json<ScreenBody>> {
    let id = run_id(&id)?;
    let mut errors = validate::Errors::default();
    let format = q
        .format
        .as_deref()
        .and_then(|f| errors.check(validate::choice::<ScreenFormat>("format", f)))
        .unwrap_or_default();
    let history = q
        .history
        .and_then(|h| errors.check(validate::int_range("history", h, 0, SCROLLBACK as i64)))
        .unwrap_or(0) as usize;
    errors.finish()?;
    let run = app
        .store
        .run(id)
        .await
        .map_err(|e| ApiError::from_store(e, || format!("run {id}")))?;
    let shot = service::runs::screen(&app.runner, &run, format, history)
        .await
        .map_err(ApiError::from)?;
    let (rows, cols) = app.runner.screens().size();
    Ok(Json(ScreenBody {
        run: id,
        state: run.state,
        rows,
        cols,
        text: (format == ScreenFormat::Text).then(|| shot.body.clone()),
        html: (format == ScreenFormat::Html).then(|| shot.body.clone()),
        ansi: (format == ScreenFormat::Ansi).then_some(shot.body),
        history: shot.history,
        cursor: Cursor {
            row: shot.cursor.0,
            col: shot.cursor.1,
            visible: shot.cursor_visible,
        },
        offset: shot.offset,
    }))
}

/// What to type into a run.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InputBody {
    /// Text, typed as it is (line breaks and tabs allowed; at most 16 384
    /// characters).
    #[serde(
        default,
        deserialize_with = "crate::http::extract::present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(schema_with = schema::input_text)]
    pub text: Option<String>,
    /// Keys pressed after the text, in order: Enter, Escape, Tab, BTab,
    /// Up, Down, Left, Right, Backspace, Space, PageUp, PageDown, C-c, C-d,
    /// or a digit 0–9.
    #[serde(default)]
    #[schema(max_items = 64, schema_with = schema::input_keys)]
    pub keys: Vec<String>,
}

refined_body!(
    /// The body of `POST /runs/{id}/input`, as the document describes it:
    /// an [`InputBody`] with something to send.
    InputRequest,
    InputBody,
    schema::input_request
);

/// Types into a live run's terminal, as a person at it would. Admin only.
#[utoipa::path(post, path = "/runs/{id}/input", tag = "runs", params(("id" = i64, Path)),
    request_body = InputRequest,
    responses((status = 202, description = "Sent to the run's terminal"),
              (status = 400, description = "Unknown key name, control characters in text, or nothing to send", body = ErrorBody),
              (status = 404, description = "No such run", body = ErrorBody),
              (status = 409, description = "The run is not live", body = ErrorBody)))]
async fn input(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<InputBody>,
) -> ApiResult<StatusCode> {
    let id = run_id(&id)?;
    service::runs::input(&app.runner, id, body.text.as_deref(), &body.keys).await?;
    Ok(StatusCode::ACCEPTED)
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(screen))
        .routes(routes!(input))
}
