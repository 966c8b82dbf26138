//! An AFK run's receipt for the front ends: `afk::receipt` assembles it;
//! this names its failures as the API and the pages answer them.

use super::{ServiceError, ServiceResult};
use crate::afk::receipt::{self, ReceiptError};
use crate::run::Runner;

pub use crate::afk::receipt::{MARKER, Receipt, ScopeCheck, with_receipt};

/// The receipt of run `id`: an AFK run's; a manual run's is a conflict.
pub async fn of_run(runner: &Runner, id: i64) -> ServiceResult<Receipt> {
    receipt::of_run(runner, id).await.map_err(|e| match e {
        ReceiptError::Manual(_) => ServiceError::Conflict(e.to_string()),
        ReceiptError::Store(s) => ServiceError::from_store(s, || format!("run {id}")),
    })
}
