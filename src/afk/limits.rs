//! Usage limits (issue 14): when an AFK run's CLI reports that its
//! provider's usage limit stopped it (the screen check finds the message;
//! Claude Code's `StopFailure` hook says `rate_limit`), lab marks that
//! provider limited until the reset the message names. Meanwhile no new AFK
//! run of the provider starts, and its limited runs wait without their
//! time running out. After the reset, lab types `continue` into each of
//! them (the same session goes on).
//!
//! The marks live in this node's memory: a restarted lab finds the message
//! on the screen again at its next look.

use std::collections::HashMap;
use std::sync::Mutex;

use super::Scheduler;
use crate::domain::{AgentBy, AgentState, Run, RunState};
use crate::provider::limits::{self, Reset};
use crate::store::{Claim, now_ms};

/// A provider held back, until when (ms), and what its CLI said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    pub provider: String,
    pub until_ms: i64,
    pub reason: String,
}

/// The limits this node knows of.
#[derive(Debug, Default)]
pub struct Limits {
    providers: Mutex<HashMap<String, Limited>>,
    /// Claims whose run waits on a limit: since when (ms).
    waiting: Mutex<HashMap<i64, i64>>,
    /// Time each claim's run spent waiting on limits (ms), which its time
    /// limit does not count.
    paused: Mutex<HashMap<i64, i64>>,
    /// Claims whose run was told to continue: when, and the message it had
    /// (still on its screen for a while: not a new limit).
    resumed: Mutex<HashMap<i64, (i64, String)>>,
}

/// How long after a resume the same message on a run's screen is taken for
/// the old one.
const RESUME_GRACE_MS: i64 = 120_000;

impl Limits {
    /// Whether `provider` is held back now.
    pub fn holds(&self, provider: &str) -> Option<Limited> {
        let now = now_ms();
        self.providers
            .lock()
            .expect("poisoned")
            .get(provider)
            .filter(|l| l.until_ms > now)
            .cloned()
    }

    /// What a claim's run spent waiting on limits, this wait included.
    pub fn paused_ms(&self, claim: i64) -> i64 {
        let done = self
            .paused
            .lock()
            .expect("poisoned")
            .get(&claim)
            .copied()
            .unwrap_or(0);
        let now = self
            .waiting
            .lock()
            .expect("poisoned")
            .get(&claim)
            .map(|since| now_ms() - since)
            .unwrap_or(0);
        done + now
    }

    pub fn forget(&self, claim: i64) {
        self.waiting.lock().expect("poisoned").remove(&claim);
        self.paused.lock().expect("poisoned").remove(&claim);
        self.resumed.lock().expect("poisoned").remove(&claim);
    }
}

/// Whether a run's agent state says a usage limit stopped it.
fn limited_now(run: &Run) -> bool {
    run.agent.as_ref().is_some_and(|a| {
        let r = a.reason.as_deref().unwrap_or("");
        (a.state == AgentState::Waiting && r.contains("usage limit"))
            || (a.state == AgentState::Idle && r.contains("rate_limit"))
    })
}

/// The machine's offset from UTC now, in seconds (a time of day in a CLI's
/// message is local).
fn utc_offset_secs() -> i64 {
    let now = now_ms() / 1000;
    // SAFETY: localtime_r writes only into `tm`, which outlives the call.
    unsafe {
        let t: libc::time_t = now as libc::time_t;
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return 0;
        }
        tm.tm_gmtoff
    }
}

/// The limit's line on a screen, as [`limits::usage_limit`] finds it.
fn line_for_resume(screen: &str) -> String {
    limits::usage_limit(screen)
        .map(|(l, _)| l)
        .unwrap_or_default()
}

impl Scheduler {
    /// The providers held back now.
    pub fn limited(&self) -> Vec<Limited> {
        let now = now_ms();
        let mut v: Vec<Limited> = self
            .limits
            .providers
            .lock()
            .expect("poisoned")
            .values()
            .filter(|l| l.until_ms > now)
            .cloned()
            .collect();
        v.sort_by(|a, b| a.provider.cmp(&b.provider));
        v
    }

    /// Looks at a live AFK run: a run a limit stopped marks its provider
    /// (and waits); a waiting one whose provider's reset has come is told
    /// to continue. True while the run waits on a limit.
    pub(super) async fn follow_limit(&self, claim: &Claim, run: &Run) -> bool {
        let waiting_since = self
            .limits
            .waiting
            .lock()
            .expect("poisoned")
            .get(&claim.id)
            .copied();
        match waiting_since {
            None if limited_now(run) => {
                let screen = match run.log_path.clone() {
                    Some(log) => self
                        .runner
                        .screens
                        .with(run.id, log.into(), |emu| emu.text(0))
                        .await
                        .unwrap_or_default(),
                    None => String::new(),
                };
                let (line, reset) = limits::usage_limit(&screen).unwrap_or_else(|| {
                    (
                        run.agent
                            .as_ref()
                            .and_then(|a| a.reason.clone())
                            .unwrap_or_else(|| "usage limit reached".into()),
                        Reset::Unknown,
                    )
                });
                let stale = self
                    .limits
                    .resumed
                    .lock()
                    .expect("poisoned")
                    .get(&claim.id)
                    .is_some_and(|(at, old)| *old == line && now_ms() - at < RESUME_GRACE_MS);
                if stale {
                    return false;
                }
                let until = limits::until_ms(reset, now_ms(), utc_offset_secs());
                tracing::info!(run = run.id, provider = %run.provider, until, "usage limit reached");
                let mut p = self.limits.providers.lock().expect("poisoned");
                let held = p.entry(run.provider.clone()).or_insert(Limited {
                    provider: run.provider.clone(),
                    until_ms: until,
                    reason: line.clone(),
                });
                if held.until_ms < until {
                    held.until_ms = until;
                    held.reason = line;
                }
                drop(p);
                self.limits
                    .resumed
                    .lock()
                    .expect("poisoned")
                    .insert(claim.id, (0, line_for_resume(&screen)));
                self.limits
                    .waiting
                    .lock()
                    .expect("poisoned")
                    .insert(claim.id, now_ms());
                true
            }
            None => false,
            Some(since) => {
                if self.limits.holds(&run.provider).is_some() {
                    return true;
                }
                // The reset has come: the same session goes on.
                let sent = self
                    .runner
                    .tmux
                    .send_input(&run.session, "continue", &["Enter"])
                    .await;
                if let Err(e) = sent {
                    tracing::warn!(run = run.id, error = %e, "could not resume a run after its usage limit");
                    return true;
                }
                self.runner.look_again(run.id);
                if run.state == RunState::Waiting || limited_now(run) {
                    let _ = self
                        .runner
                        .store
                        .set_agent_state(run.id, AgentState::Working, None, AgentBy::Input)
                        .await;
                }
                self.limits
                    .waiting
                    .lock()
                    .expect("poisoned")
                    .remove(&claim.id);
                *self
                    .limits
                    .paused
                    .lock()
                    .expect("poisoned")
                    .entry(claim.id)
                    .or_insert(0) += now_ms() - since;
                if let Some(r) = self
                    .limits
                    .resumed
                    .lock()
                    .expect("poisoned")
                    .get_mut(&claim.id)
                {
                    r.0 = now_ms();
                }
                tracing::info!(run = run.id, "usage limit reset: the run continues");
                false
            }
        }
    }
}
