//! Usage limits (issue 14, amended by issue 23's trust rule): when an AFK
//! run's CLI reports that its provider's usage limit stopped it (the screen
//! check finds the message; Claude Code's `StopFailure` hook says
//! `rate_limit`), that run waits until the reset the message names, then lab
//! types `continue` into it (the same session goes on). Its time limit keeps
//! counting meanwhile.
//!
//! One run's word affects that run only: its screen and its hook calls are
//! the agent's to forge. The provider as a whole is held back (no new AFK
//! run of it) only on evidence no single agent can forge: the same limit
//! reported by a second run of the provider while the first still waits
//! (until the earlier of their resets).
//!
//! The waits live in this node's memory: a restarted lab finds the message
//! on the screen again at its next look. The line lab acted on (typed
//! `continue` after) is kept on the run's row while it stays on the screen,
//! so it is acted on once, by this lab or a restarted one (issue 40 §4).

use std::collections::HashMap;
use std::sync::Mutex;

use super::Scheduler;
use crate::domain::{AgentBy, AgentState, Run, RunState};
use crate::provider::limits::{self, Reset};
use crate::store::{Claim, now_ms};

/// Why a provider is held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldKind {
    /// Two runs' CLIs said its usage limit stopped them.
    UsageLimit,
    /// Its CLI's own check says it cannot work (`cli_hold.rs`).
    Cli,
    /// Two runs got no answer from its model API (`no_answer.rs`).
    NoAnswer,
}

/// A provider held back, until when (ms), and what its CLI said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    pub provider: String,
    /// For a usage limit, its reset; for a CLI that cannot work, when lab
    /// checks it again.
    pub until_ms: i64,
    pub reason: String,
    pub kind: HoldKind,
    /// What the operator does about it (a CLI that cannot work).
    pub fix: Option<String>,
}

/// One claim's run waiting on a limit it reported (its
/// `ClaimState::limit_wait`).
#[derive(Debug, Clone)]
pub(super) struct Wait {
    provider: String,
    run: i64,
    until_ms: i64,
    reason: String,
    /// The limit's line on the run's screen, when it showed one: what lab
    /// acts on once.
    screen_line: Option<String>,
}

/// The providers this node holds back on two runs' word.
#[derive(Debug, Default)]
pub struct Limits {
    providers: Mutex<HashMap<String, Limited>>,
}

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

    /// The providers held back now.
    pub fn all(&self) -> Vec<Limited> {
        let now = now_ms();
        self.providers
            .lock()
            .expect("poisoned")
            .values()
            .filter(|l| l.until_ms > now)
            .cloned()
            .collect()
    }

    /// Holds `l.provider` back until `l.until_ms`, unless it is held
    /// longer already.
    pub(super) fn hold(&self, l: Limited) {
        let mut p = self.providers.lock().expect("poisoned");
        match p.get(&l.provider) {
            Some(held) if held.until_ms >= l.until_ms => {}
            _ => {
                p.insert(l.provider.clone(), l);
            }
        }
    }

    /// A run waits on a limit (`w`): holds its provider back when another
    /// run of the provider waits on one too (`others`: the other claims'
    /// waits).
    fn wait(&self, w: &Wait, others: &[Wait]) {
        let now = now_ms();
        let others: Vec<&Wait> = others
            .iter()
            .filter(|o| o.provider == w.provider && o.run != w.run && o.until_ms > now)
            .collect();
        let Some(other) = others.iter().min_by_key(|o| o.until_ms) else {
            return;
        };
        let (until, reason) = if other.until_ms < w.until_ms {
            (other.until_ms, other.reason.clone())
        } else {
            (w.until_ms, w.reason.clone())
        };
        let mut p = self.providers.lock().expect("poisoned");
        let held = p.entry(w.provider.clone()).or_insert(Limited {
            provider: w.provider.clone(),
            until_ms: until,
            reason: reason.clone(),
            kind: HoldKind::UsageLimit,
            fix: None,
        });
        if held.until_ms < now {
            held.until_ms = until;
            held.reason = reason;
        }
        tracing::info!(provider = %w.provider, until, "two runs hit the usage limit: the provider is held back");
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
    // The machine's zone (`TZ`, else /etc/localtime); UTC when unknown.
    let tz = jiff::tz::TimeZone::try_system().unwrap_or(jiff::tz::TimeZone::UTC);
    i64::from(tz.to_offset(jiff::Timestamp::now()).seconds())
}

impl Scheduler {
    /// The providers held back now: by a CLI that cannot work, or by a
    /// usage limit.
    pub fn limited(&self) -> Vec<Limited> {
        let mut v: Vec<Limited> = self
            .holds
            .cli()
            .all()
            .into_iter()
            .map(|h| Limited {
                provider: h.provider.to_string(),
                until_ms: h.next_check_ms,
                reason: h.reason,
                kind: HoldKind::Cli,
                fix: Some(h.fix),
            })
            .collect();
        v.extend(self.holds.limits().all());
        v.sort_by(|a, b| a.provider.cmp(&b.provider));
        v
    }

    /// Looks at a live AFK run: a run a limit stopped waits (and marks its
    /// provider when a second run does too); a waiting one whose reset has
    /// come is told to continue. True while the run waits on a limit.
    pub(super) async fn follow_limit(&self, claim: &Claim, run: &Run) -> bool {
        let waiting = self.claims.with(claim.id, |c| c.limit_wait.clone());
        match waiting {
            None if limited_now(run) => {
                let screen = match run.log_path.clone() {
                    Some(log) => self
                        .runner
                        .screens()
                        .with(run.id, log.into(), |emu| emu.text(0))
                        .await
                        .unwrap_or_default(),
                    None => String::new(),
                };
                let agent_said = || {
                    run.agent
                        .as_ref()
                        .and_then(|a| a.reason.clone())
                        .unwrap_or_else(|| limits::REACHED.into())
                };
                let on_screen = limits::usage_limit(&screen);
                let screen_line = on_screen.as_ref().map(|(l, _)| l.clone());
                let acted = screen_line.is_some() && run.limit_line == screen_line;
                let (line, reset) = match on_screen {
                    // The line lab acted on, still on the screen: the
                    // screen's word is no new limit (the screen check
                    // corrects the state); a hook's new report is, but the
                    // old line's reset is past: lab waits its default.
                    Some(_) if acted => {
                        if run.agent.as_ref().is_some_and(|a| a.by == AgentBy::Screen) {
                            return false;
                        }
                        (agent_said(), Reset::Unknown)
                    }
                    Some(found) => found,
                    None => (agent_said(), Reset::Unknown),
                };
                let until = limits::until_ms(reset, now_ms(), utc_offset_secs());
                tracing::info!(run = run.id, provider = %run.provider, until, "usage limit reached: the run waits");
                let w = Wait {
                    provider: run.provider.clone(),
                    run: run.id,
                    until_ms: until,
                    reason: line,
                    screen_line,
                };
                self.claims
                    .with(claim.id, |c| c.limit_wait = Some(w.clone()));
                self.holds.limits().wait(&w, &self.claims.waits(claim.id));
                true
            }
            None => false,
            Some(w) => {
                if w.until_ms > now_ms() {
                    return true;
                }
                // The reset has come: the same session goes on.
                let sent_at = now_ms();
                let sent = self
                    .runner
                    .tmux()
                    .send_input(&run.session, "continue", &["Enter"])
                    .await;
                if let Err(e) = sent {
                    tracing::warn!(run = run.id, error = %e, "could not resume a run after its usage limit");
                    return true;
                }
                // Acted on once: the same line, still on the screen (now,
                // or to a restarted lab), is no new limit.
                if let Some(line) = w.screen_line.as_deref()
                    && let Err(e) = self.runner.store().set_limit_line(run.id, Some(line)).await
                {
                    tracing::warn!(run = run.id, error = %e, "could not note the usage limit acted on");
                }
                self.runner.look_again(run.id);
                if run.state == RunState::Waiting || limited_now(run) {
                    let _ = self
                        .runner
                        .store()
                        .working_after_input(run.id, sent_at)
                        .await;
                }
                self.claims.with(claim.id, |c| c.limit_wait = None);
                tracing::info!(run = run.id, "usage limit reset: the run continues");
                false
            }
        }
    }
}
