//! What the API and the pages share beyond the store: every write either
//! makes (register, change and remove a repo; start, stop and remove a run;
//! change the settings; pause the scheduler) and the views both show (the
//! AFK status and ledger). Each returns a [`ServiceError`], a
//! domain error that `http` turns into a status and `web` into a page, so
//! neither front end depends on the other.

pub mod afk;
pub mod hooks;
pub mod issues;
pub mod nodes;
pub mod plans;
pub mod pulls;
pub mod receipt;
pub mod repos;
pub mod reviews;
pub mod runs;
pub mod settings;

use crate::store::StoreError;
use crate::validate::{FieldError, Invalid};

/// Why a shared write was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// One or more values are wrong; nothing was written.
    #[error("{0}")]
    Invalid(Invalid),
    /// The thing named does not exist; the message names it.
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with what is there (a name taken, a run live).
    #[error("{0}")]
    Conflict(String),
    /// The provider's CLI cannot be run on this machine.
    #[error("{0}")]
    Unavailable(String),
    /// The run would act without asking anyone and this machine cannot
    /// sandbox it; the message names the fix.
    #[error("{0}")]
    Unsandboxed(String),
    /// lab's own failure (database, IO): logged, never shown in full.
    #[error("{0}")]
    Internal(String),
}

impl ServiceError {
    /// A store error about the thing `what` names (e.g. "repo 'x'").
    pub fn from_store(e: StoreError, what: impl FnOnce() -> String) -> ServiceError {
        match e {
            StoreError::NotFound => ServiceError::NotFound(format!("{} not found", what())),
            StoreError::Conflict(m) => ServiceError::Conflict(m),
            StoreError::Invalid(i) => ServiceError::Invalid(i),
            other => ServiceError::Internal(other.to_string()),
        }
    }
}

impl From<Invalid> for ServiceError {
    fn from(e: Invalid) -> Self {
        ServiceError::Invalid(e)
    }
}

impl From<FieldError> for ServiceError {
    fn from(e: FieldError) -> Self {
        ServiceError::Invalid(e.into())
    }
}

pub type ServiceResult<T> = Result<T, ServiceError>;
