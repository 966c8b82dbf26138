//! Changing lab's global settings, for the API and the Settings page alike.

use super::{ServiceError, ServiceResult};
use crate::settings::{Settings, SettingsPatch};
use crate::store::Store;

/// Applies `patch` to the global settings in one transaction: every field
/// is validated first and an invalid one writes nothing. The settings as
/// they now are.
pub async fn update(store: &Store, patch: &SettingsPatch) -> ServiceResult<Settings> {
    store
        .update_settings(patch)
        .await
        .map_err(|e| ServiceError::from_store(e, || "settings".into()))
}
