//! What every handler, API or page, can reach.

use std::sync::Arc;

use crate::auth::Auth;
use crate::auth::browser::SessionCache;
use crate::run::Runner;
use crate::store::Store;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub auth: Arc<Auth>,
    pub runner: Arc<Runner>,
    pub sessions: Arc<SessionCache>,
    pub scheduler: Arc<crate::afk::Scheduler>,
    pub notifier: Arc<crate::notifications::Notifier>,
    /// The fleet as this node sees it: its key, and who owns which run.
    pub fleet: Arc<crate::fleet::Fleet>,
    /// The origin of `--public-url` when it is set: the only `Origin` a form
    /// may come from (else a form's `Origin` must match its `Host`).
    pub public_origin: Option<String>,
}
