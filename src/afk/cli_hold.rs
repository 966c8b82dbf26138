//! AFK runs whose agent CLI cannot work (issue 25): not signed in, its
//! sign-in refused, or a CLI that exits as soon as it starts.
//!
//! A run's screen saying so is the run's own word: that run ends at once
//! (`cli-unusable`, tried again later) and nothing else happens on it alone.
//! lab then checks the CLI itself, outside any run (`Runner::cli_auth`: the
//! CLI's own sign-in check in a run's conditions, after its `--version`);
//! only when that check confirms it does lab hold the provider's AFK
//! launches back, with the reason and the fix, until a later check passes
//! (every [`RECHECK`], or when an operator asks).
//!
//! Host side: the checks run lab's own command line over the operator's
//! credentials; nothing a run wrote is read but its screen, by the provider's
//! pure matcher.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::Scheduler;
use crate::domain::{AgentState, Run};
use crate::provider::{Auth, Provider, ProviderId};
use crate::store::now_ms;

/// How often a held provider's CLI is checked again.
pub const RECHECK: Duration = Duration::from_secs(5 * 60);

/// How long a check's answer stands for runs that report the same.
const CACHE: Duration = Duration::from_secs(60);

/// A run that ended this soon after it started, on its own and without a
/// pull request, makes lab check its CLI.
pub const QUICK_EXIT_MS: i64 = 30_000;

/// A provider whose CLI cannot work, as its own check says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliHold {
    pub provider: ProviderId,
    /// In lab's words: `not logged in`.
    pub reason: String,
    /// What the operator does about it.
    pub fix: String,
    /// When lab checks again (ms).
    pub next_check_ms: i64,
}

/// The CLI holds of this node, and its recent checks.
#[derive(Debug, Default)]
pub struct CliHolds {
    held: Mutex<HashMap<ProviderId, CliHold>>,
    /// The last check per provider: when (ms), and why it cannot work.
    checked: Mutex<HashMap<ProviderId, (i64, Option<String>)>>,
}

impl CliHolds {
    /// The hold on the provider a row names (none on one lab does not know).
    pub fn holds(&self, provider: &str) -> Option<CliHold> {
        let id = ProviderId::try_from(provider).ok()?;
        self.held.lock().expect("poisoned").get(&id).cloned()
    }

    /// The last check's answer for `provider` when it is younger than
    /// [`CACHE`] (`Some(None)`: it can work).
    fn cached(&self, provider: ProviderId, now: i64) -> Option<Option<String>> {
        self.checked
            .lock()
            .expect("poisoned")
            .get(&provider)
            .filter(|(at, _)| now - at < CACHE.as_millis() as i64)
            .map(|(_, why)| why.clone())
    }

    /// Records a check of `provider` and holds it back, or lets it go, as
    /// it says.
    fn checked(
        &self,
        provider: ProviderId,
        now: i64,
        why: Option<String>,
        fix: impl FnOnce() -> String,
    ) {
        self.checked
            .lock()
            .expect("poisoned")
            .insert(provider, (now, why.clone()));
        let mut held = self.held.lock().expect("poisoned");
        match why {
            Some(reason) => {
                if !held.contains_key(&provider) {
                    tracing::warn!(%provider, %reason, "the CLI cannot work: its AFK runs are held back");
                }
                held.insert(
                    provider,
                    CliHold {
                        provider,
                        reason,
                        fix: fix(),
                        next_check_ms: now + RECHECK.as_millis() as i64,
                    },
                );
            }
            None => {
                if held.remove(&provider).is_some() {
                    tracing::info!(%provider, "the CLI works again: its AFK runs go on");
                }
            }
        }
    }

    pub fn all(&self) -> Vec<CliHold> {
        let mut v: Vec<CliHold> = self
            .held
            .lock()
            .expect("poisoned")
            .values()
            .cloned()
            .collect();
        v.sort_by_key(|h| h.provider);
        v
    }
}

/// What to tell the operator to do when `p`'s CLI cannot sign in.
fn fix(p: &dyn Provider) -> String {
    match p.id() {
        "claude-code" => "sign Claude Code in as the user lab runs as (run `claude` and /login, or \
             `claude setup-token`), or give lab ANTHROPIC_API_KEY; then press Check again on the AFK \
             page (or `labctl afk check claude-code`)"
            .to_owned(),
        "codex" => "sign Codex in as the user lab runs as (`codex login`, or `codex login \
             --with-api-key`); then press Check again on the AFK page (or `labctl afk check codex`)"
            .to_owned(),
        _ => format!(
            "make {} work for the user lab runs as; then press Check again on the AFK page",
            p.name()
        ),
    }
}

/// Why the run's screen says its CLI cannot work, if it does.
async fn screen_says(s: &Scheduler, run: &Run, p: &dyn Provider) -> Option<&'static str> {
    let waits = run
        .agent
        .as_ref()
        .is_some_and(|a| a.state == AgentState::Waiting);
    if !waits {
        return None;
    }
    let log = run.log_path.clone()?;
    let screen = s
        .runner
        .screens()
        .with(run.id, log.into(), |emu| emu.text(0))
        .await
        .ok()?;
    p.unusable(&screen)
}

impl Scheduler {
    /// Why a live AFK run's CLI cannot work, as its screen says: the run
    /// ends at once with it.
    pub(super) async fn unusable(&self, run: &Run) -> Option<String> {
        let p = run.provider_id().ok()?.provider();
        let why = screen_says(self, run, p).await?;
        Some(format!("{} cannot work here: {why}", p.name()))
    }

    /// Checks `provider`'s CLI (at most once a [`CACHE`] unless `fresh`),
    /// and holds the provider back or lets it go as the check says. Why it
    /// cannot work, when it cannot.
    pub async fn check_cli(&self, provider: ProviderId, fresh: bool) -> Option<String> {
        let p = provider.provider();
        let now = now_ms();
        if !fresh && let Some(why) = self.holds.cli().cached(provider, now) {
            return why;
        }
        let why = match self.runner.binary_for(provider) {
            Err(e) => Some(e.to_string()),
            Ok(bin) => match crate::run::cli_check::version(p, &bin).await {
                Err(e) => Some(format!("it does not start: {e}")),
                Ok(_) => match self.runner.cli_auth(provider).await {
                    Auth::SignedOut(why) => Some(why),
                    Auth::SignedIn => None,
                    // A check lab cannot read holds nothing back.
                    Auth::Unknown(what) => {
                        tracing::info!(%provider, %what, "the CLI's sign-in check said nothing lab reads");
                        None
                    }
                },
            },
        };
        self.holds
            .cli()
            .checked(provider, now, why.clone(), || fix(p));
        why
    }

    /// Checks again each held provider whose time has come.
    pub(super) async fn recheck_clis(&self) {
        let now = now_ms();
        let due: Vec<ProviderId> = self
            .holds
            .cli()
            .all()
            .into_iter()
            .filter(|h| h.next_check_ms <= now)
            .map(|h| h.provider)
            .collect();
        for provider in due {
            self.check_cli(provider, true).await;
        }
    }
}
