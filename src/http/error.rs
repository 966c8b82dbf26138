//! The one HTTP error: every failure of the API becomes
//! `{"error": {"code", "message", ...}}` with a status that says what happened.
//! Server-side causes are logged and never sent.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::service::ServiceError;
use crate::store::StoreError;
use crate::validate::{FieldError, Invalid};

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub errors: Vec<FieldError>,
}

/// The error body, as the OpenAPI document describes it.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Machine-readable: `invalid`, `not_found`, `conflict`, `unauthorized`,
    /// `forbidden`, `too_large`, `unsupported_media_type`, `method_not_allowed`, `internal`,
    /// `node_unreachable` (the lab node that owns a run did not answer).
    pub code: String,
    pub message: String,
    /// For `invalid`: the first rejected field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<String>>,
    /// For `invalid`: every rejected field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            errors: Vec::new(),
        }
    }

    /// 400: the request was understood but a value is wrong.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid", message)
    }

    /// 404: the thing named does not exist.
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", what)
    }

    /// 409: the request conflicts with the current state.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 401: no valid credentials.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 403: valid credentials that do not reach this.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 500: lab's fault. The cause is logged, the client sees only this.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(%cause, "request failed");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; the server log has the cause",
        )
    }

    /// 400 naming every field that was wrong.
    pub fn invalid(e: Invalid) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: "invalid",
            message: e.to_string(),
            errors: e.0,
        }
    }

    /// Maps a store error for a resource called `what` (e.g. "repo 'x'").
    pub fn from_store(e: StoreError, what: impl FnOnce() -> String) -> Self {
        match e {
            StoreError::NotFound => Self::not_found(format!("{} not found", what())),
            StoreError::Conflict(m) => Self::conflict(m),
            StoreError::Invalid(i) => Self::invalid(i),
            other => Self::internal(other),
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::Invalid(i) => ApiError::invalid(i),
            ServiceError::NotFound(m) => ApiError::not_found(m),
            ServiceError::Conflict(m) => ApiError::conflict(m),
            ServiceError::Unavailable(m) => {
                ApiError::new(StatusCode::CONFLICT, "provider_unavailable", m)
            }
            ServiceError::Unsandboxed(m) => ApiError::new(StatusCode::CONFLICT, "unsandboxed", m),
            ServiceError::Internal(m) => ApiError::internal(m),
        }
    }
}

impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        ApiError::invalid(e)
    }
}

impl From<FieldError> for ApiError {
    fn from(e: FieldError) -> Self {
        ApiError::invalid(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let first = self.errors.first().cloned();
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
                field: first.as_ref().map(|f| f.field.clone()),
                value: first.as_ref().and_then(|f| f.value.clone()),
                allowed: first.and_then(|f| f.allowed),
                errors: self.errors,
            },
        };
        (self.status, Json(body)).into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
