//! The screen check: who needs attention, read from the screens of live
//! runs whose output grew (one tmux call however many), as the fallback for
//! what no hook reports (ADR 13). Part of each reconcile pass.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::log_watch::LogWatch;

use super::Runner;
use super::reconcile::PassReport;
use super::tmux::Pane;
use crate::domain::{AgentBy, AgentState, Run, RunState};
use crate::provider::{Provider, limits, retries};
use crate::store::StoreError;

/// Every how many passes, at most, the screen of a run whose output never
/// pauses is read (15 s at the default pass interval). A screen is read at
/// the first pass that finds its output paused (the log did not grow since
/// the pass before): an agent that asks a person stops drawing, and one that
/// keeps drawing is working.
const BUSY_SCREENS_EVERY: u32 = 15;

/// For this long after a run starts, and after each input, a changed screen
/// is read at every pass: that is when a CLI asks (its sign-in, a menu, a
/// sub-menu), and a TUI that animates (Codex's sign-in logo) never pauses
/// its output, so waiting for a pause would show `working` for seconds.
const EAGER: std::time::Duration = std::time::Duration::from_secs(20);

/// When a run's screen was read, and what made the next read due.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    /// The log's size at the read (`u64::MAX`: never read since an input).
    size: u64,
    at: Instant,
    /// Until then, a changed screen is read at every pass.
    eager_until: Option<Instant>,
    /// Whether the read came at a pause of the run's output. A read while
    /// the output still flows may come before tmux drew the last of it
    /// (the log can be ahead of the screen), so the next pause reads the
    /// screen once more even though the log did not grow since.
    at_pause: bool,
}

impl Seen {
    /// After an input: the next pass reads the screen, and the ones after
    /// it too while the screen changes, for [`EAGER`].
    pub(crate) fn eager() -> Seen {
        Seen {
            size: u64::MAX,
            at: Instant::now(),
            eager_until: Some(Instant::now() + EAGER),
            at_pause: false,
        }
    }
}

/// What the screen check knows of one live run between passes.
#[derive(Debug, Default, Clone, Copy)]
struct Looked {
    /// When its screen was last read, and at what log size (`None`:
    /// never).
    seen: Option<Seen>,
    /// Its log's size at the last pass.
    size: Option<u64>,
}

/// The screen check's state, its own: per live run of this node what it
/// last saw (one map, pruned to the runs each pass looks at, the one place
/// a run's entry goes), and the inotify watches of their logs.
#[derive(Default)]
pub(super) struct ScreenCheck {
    runs: Mutex<HashMap<i64, Looked>>,
    logs: Mutex<LogWatch>,
    /// Screens read so far (tests wait on it instead of a quiet window).
    read: AtomicUsize,
    /// Woken by a look asked for.
    wake: tokio::sync::Notify,
}

/// What a pass left for the screen check to look at again soon: a run whose
/// screen is behind its log (its output has not paused yet), or a log no
/// inotify watch covers (it is sized at every pass).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct ScreensLeft {
    pub behind: bool,
    pub unwatched: bool,
}

impl ScreensLeft {
    /// Whether a pass must come soon even if no log is written.
    pub(super) fn any(&self) -> bool {
        self.behind || self.unwatched
    }
}

impl ScreenCheck {
    /// Makes the next pass read this run's screen even if its log did not
    /// grow, and the passes for [`EAGER`] after it read a changed one.
    pub(super) fn look_again(&self, run: i64) {
        self.runs
            .lock()
            .expect("poisoned")
            .entry(run)
            .or_default()
            .seen = Some(Seen::eager());
        self.wake.notify_one();
    }

    /// Resolves when something asked for a look ([`ScreenCheck::look_again`])
    /// since the last time it resolved.
    pub(super) async fn asked(&self) {
        self.wake.notified().await;
    }

    /// The run's log size at the last pass, if it was looked at.
    pub(super) fn log_size(&self, run: i64) -> Option<u64> {
        self.runs
            .lock()
            .expect("poisoned")
            .get(&run)
            .and_then(|l| l.size)
    }

    /// How many screens the check has read so far.
    pub(super) fn screens_read(&self) -> usize {
        self.read.load(Ordering::Relaxed)
    }

    /// The inotify descriptor that turns readable when a watched log is
    /// written (a duplicate, for the loop to await).
    pub(super) fn descriptor(&self) -> Option<std::os::fd::OwnedFd> {
        self.logs.lock().expect("poisoned").descriptor()
    }
}

impl Runner {
    /// Needs attention: reads the screens of live runs whose output grew
    /// since lab last looked (in one tmux call, however many there are), and
    /// lets each run's provider say whether it waits for a person. A run that
    /// prints nothing costs nothing. Says what it left to look at again.
    pub(super) async fn watch_screens(
        &self,
        runs: &[Run],
        panes: &HashMap<&str, &Pane>,
        report: &mut PassReport,
    ) -> Result<ScreensLeft, StoreError> {
        let mut changed: Vec<(&Run, &Pane, u64, bool)> = Vec::new();
        let mut left = ScreensLeft::default();
        let busy_every = self.cfg.reconcile_every * BUSY_SCREENS_EVERY;
        let log_cap = self.store.settings().await?.runs.log_max_mb.max(1) as u64 * 1024 * 1024;
        let mut over_cap: Vec<&str> = Vec::new();
        {
            let ids: HashSet<i64> = runs.iter().map(|r| r.id).collect();
            let check = &self.screen_check;
            let mut looked = check.runs.lock().expect("poisoned");
            let mut watch = check.logs.lock().expect("poisoned");
            // The one place a run's entry goes: it is no longer live here.
            looked.retain(|id, _| ids.contains(id));
            watch.retain(|id| ids.contains(&id));
            watch.drain();
            for run in runs {
                let Some(pane) = panes.get(run.session.as_str()).filter(|p| !p.dead) else {
                    continue;
                };
                if !matches!(run.state, RunState::Running | RunState::Waiting) {
                    continue;
                }
                let entry = looked.entry(run.id).or_default();
                // A log not written since it was last sized has that size
                // (`log_watch.rs`); any other is watched, then sized.
                let size = match entry.size {
                    Some(size) if watch.unchanged(run.id) => size,
                    _ => run.log_path.as_deref().map_or(0, |p| {
                        watch.arm(run.id, std::path::Path::new(p));
                        super::log::size(p)
                    }),
                };
                if !watch.unchanged(run.id) {
                    left.unwatched = true;
                }
                // A screen that changed is read once its output pauses, and
                // at most every BUSY_SCREENS_EVERY passes while it does not:
                // a busy agent redraws many times a second, and reading
                // every busy screen every few passes cost the tmux server
                // more than the agents' own output (the hooks report what
                // matters at once; `look_again` makes the next pass read
                // it).
                if size > log_cap
                    && let Some(p) = run.log_path.as_deref()
                {
                    over_cap.push(p);
                }
                let paused = entry.size.replace(size) == Some(size);
                let young = run
                    .started_at
                    .is_some_and(|t| crate::store::now_ms() - t < EAGER.as_millis() as i64);
                let due = match entry.seen {
                    None => true,
                    Some(s) => {
                        let eager = young || s.eager_until.is_some_and(|u| Instant::now() < u);
                        (s.size != size && (paused || eager || s.at.elapsed() >= busy_every))
                            || (paused && !s.at_pause)
                    }
                };
                if due {
                    // Read while its output flows: read again once it
                    // pauses, which no log write may announce.
                    if !paused {
                        left.behind = true;
                    }
                    changed.push((run, pane, size, paused));
                } else if entry.seen.is_some_and(|s| s.size != size || !s.at_pause) {
                    left.behind = true;
                }
            }
        }
        // A log past its cap loses its oldest output (`log.rs`): checked only
        // for logs that grew past it, so a quiet one costs nothing.
        for p in over_cap {
            // It waits for the log's readers of the moment.
            let p = p.to_owned();
            tokio::task::spawn_blocking(move || {
                if let Err(e) = super::log::keep_newest(&p, log_cap) {
                    tracing::debug!(log = p, error = %e, "could not drop a log's oldest output");
                }
            });
        }
        if changed.is_empty() {
            return Ok(left);
        }
        let wanted: Vec<&Pane> = changed.iter().map(|(_, p, _, _)| *p).collect();
        let screens = match self.tmux.screens(&wanted).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "could not read run screens; the next pass retries");
                left.behind = true;
                return Ok(left);
            }
        };
        for (session, screen) in screens {
            let Some((run, _, size, at_pause)) =
                changed.iter().find(|(r, _, _, _)| r.session == session)
            else {
                continue;
            };
            {
                let mut looked = self.screen_check.runs.lock().expect("poisoned");
                let entry = looked.entry(run.id).or_default();
                let eager_until = entry.seen.and_then(|s| s.eager_until);
                entry.seen = Some(Seen {
                    size: *size,
                    at: Instant::now(),
                    eager_until,
                    at_pause: *at_pause,
                });
            }
            if let Ok(id) = run.provider_id() {
                let p = id.provider();
                let mut attention = p.attention(&screen);
                // A usage limit lab acted on stays on the screen a while
                // after `continue`: the same line is no new limit, until it
                // leaves the screen (issue 40 §4).
                if let Some(acted) = run.limit_line.as_deref() {
                    let line = limits::usage_limit(&screen).map(|(l, _)| l);
                    match line {
                        Some(l) if l == acted => {
                            if attention == Some(limits::REACHED) {
                                attention = None;
                            }
                        }
                        _ => self.store.set_limit_line(run.id, None).await?,
                    }
                }
                // A screen that asks nothing may show the CLI retrying a
                // model API that does not answer (issue 40 §3).
                let change = screen_change(run, p, attention)
                    .map(|(s, r)| (s, r.map(str::to_owned)))
                    .or_else(|| {
                        attention
                            .is_none()
                            .then(|| retry_change(run, retries::retrying(&screen)))
                            .flatten()
                    });
                if let Some((state, why)) = change
                    && self
                        .store
                        .set_agent_state(run.id, state, why.as_deref(), AgentBy::Screen)
                        .await?
                {
                    tracing::info!(run = run.id, state = %state, reason = why.as_deref().unwrap_or("-"), "run needs attention changed");
                    report.attention.push(run.id);
                }
            }
            // Counted once what the screen said is written.
            self.screen_check.read.fetch_add(1, Ordering::Relaxed);
        }
        Ok(left)
    }
}

/// What a screen changes (ADR 13: hooks first, the screen as the fallback).
/// A screen that asks a person makes the run wait, unless a hook already
/// reports it waiting (its question is the exact one) or the screen shows
/// what the CLI's hooks report themselves; a screen that asks nothing ends
/// only a wait the screen check itself began (the CLI went on: working,
/// until its next hook says more). A state a hook reported is never undone
/// by a screen.
fn screen_change(
    run: &Run,
    p: &dyn Provider,
    reason: Option<&'static str>,
) -> Option<(AgentState, Option<&'static str>)> {
    // What a hook (or the launch) reported.
    let hooked = run.agent.as_ref().filter(|a| a.by != AgentBy::Screen);
    match reason {
        Some(r) => {
            let hook_waits = hooked.is_some_and(|a| a.state == AgentState::Waiting);
            let hooks_say_it = hooked.is_some() && p.hooked_attention().contains(&r);
            let already = run.state == RunState::Waiting && run.state_reason.as_deref() == Some(r);
            (!hook_waits && !hooks_say_it && !already).then_some((AgentState::Waiting, Some(r)))
        }
        None => (run.state == RunState::Waiting && hooked.is_none())
            .then_some((AgentState::Working, None)),
    }
}

/// What a screen that asks nothing says of a CLI's retries: a working
/// agent whose CLI retries is `retrying` with the error (a new error is a
/// new reason); one whose screen shows no retry any more works again, until
/// its next hook says more. An idle or waiting agent is left alone: its CLI
/// gave up, or asks, and its hook said so.
fn retry_change(run: &Run, retry: Option<String>) -> Option<(AgentState, Option<String>)> {
    let agent = run.agent.as_ref();
    let retrying = agent.is_some_and(|a| a.state == AgentState::Retrying);
    match retry {
        Some(why) => {
            let working = agent.is_none_or(|a| a.state == AgentState::Working);
            let new = retrying && agent.and_then(|a| a.reason.as_deref()) != Some(why.as_str());
            (run.state == RunState::Running && (working || new))
                .then_some((AgentState::Retrying, Some(why)))
        }
        None => retrying.then_some((AgentState::Working, None)),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::domain::{AgentStatus, Layer, RunKind, Sourced};

    /// A run as a pass sees it (the tests of `agent_seen.rs` and `usage.rs`
    /// use it too).
    pub(crate) fn run(
        state: RunState,
        reason: Option<&str>,
        agent: Option<(AgentState, AgentBy)>,
    ) -> Run {
        Run {
            id: 1,
            kind: RunKind::Manual,
            repo_id: None,
            repo_name: "r".into(),
            provider: "claude-code".into(),
            model: Sourced {
                value: "m".into(),
                layer: Layer::ProviderDefault,
            },
            effort: Sourced {
                value: "e".into(),
                layer: Layer::ProviderDefault,
            },
            options: Default::default(),
            prompt: String::new(),
            state,
            state_reason: reason.map(str::to_owned),
            node: "n".into(),
            session: "s".into(),
            workspace: None,
            branch: None,
            log_path: None,
            pid: None,
            pid_start: None,
            exit_status: None,
            exit_signal: None,
            created_at: 0,
            started_at: None,
            ended_at: None,
            workspace_removed_at: None,
            sandboxed: true,
            limits: Default::default(),
            stop_cause: None,
            cli_session_id: None,
            limit_line: None,
            usage: None,
            issue: None,
            attempt: 1,
            round: 1,
            outcome: None,
            knobs: Vec::new(),
            issue_budget: None,
            stage: None,
            agent: agent.map(|(state, by)| AgentStatus {
                state,
                reason: None,
                since: 0,
                by,
            }),
        }
    }

    #[test]
    fn a_retrying_cli_is_retrying_until_its_screen_or_hook_says_otherwise() {
        use AgentBy::{Hook, Screen};
        use AgentState::{Idle, Retrying, Waiting, Working};
        let why = || Some("retrying: 529 Overloaded".to_owned());
        let retrying = |r: Option<&str>| {
            let mut run = run(RunState::Running, None, Some((Retrying, Screen)));
            run.agent.as_mut().unwrap().reason = r.map(str::to_owned);
            run
        };
        let table = [
            (
                run(RunState::Running, None, Some((Working, Hook))),
                why(),
                Some((Retrying, why())),
            ),
            (
                run(RunState::Running, None, None),
                why(),
                Some((Retrying, why())),
            ),
            // The same error again changes nothing; another is news.
            (retrying(Some("retrying: 529 Overloaded")), why(), None),
            (
                retrying(Some("retrying: 401 invalid x-api-key")),
                why(),
                Some((Retrying, why())),
            ),
            // The retries are over: working again.
            (
                retrying(Some("retrying: 529 Overloaded")),
                None,
                Some((Working, None)),
            ),
            // Its CLI gave up (the hook said idle), or asks: left alone.
            (
                run(RunState::Running, None, Some((Idle, Hook))),
                why(),
                None,
            ),
            (
                run(RunState::Waiting, Some("Allow?"), Some((Waiting, Hook))),
                why(),
                None,
            ),
            (
                run(RunState::Running, None, Some((Working, Hook))),
                None,
                None,
            ),
        ];
        for (i, (r, retry, want)) in table.into_iter().enumerate() {
            assert_eq!(retry_change(&r, retry), want, "row {i}");
        }
    }

    #[test]
    fn the_screen_is_the_fallback_and_never_undoes_a_hook() {
        use AgentBy::{Hook, Rollout, Screen};
        use AgentState::{Idle, Waiting, Working};
        let claude = crate::provider::get("claude-code").unwrap();
        let login = Some("not logged in: type /login in the reply box below to sign in");
        let permission = Some("waits for a permission answer");
        let wait = |r| Some((Waiting, r));
        let table = [
            // No hook yet: the screen decides, both ways.
            (run(RunState::Running, None, None), login, wait(login)),
            (
                run(RunState::Waiting, login, Some((Waiting, Screen))),
                None,
                Some((Working, None)),
            ),
            (
                run(RunState::Waiting, login, Some((Waiting, Screen))),
                login,
                None,
            ),
            // A hook-reported wait stays, whatever the screen shows.
            (
                run(
                    RunState::Waiting,
                    Some("Allow Bash?"),
                    Some((Waiting, Hook)),
                ),
                None,
                None,
            ),
            (
                run(
                    RunState::Waiting,
                    Some("Allow Bash?"),
                    Some((Waiting, Hook)),
                ),
                login,
                None,
            ),
            // What the hooks report themselves is theirs to report.
            (
                run(RunState::Running, None, Some((Working, Hook))),
                permission,
                None,
            ),
            // What no hook reports (a login screen) still makes the run wait.
            (
                run(RunState::Running, None, Some((Idle, Hook))),
                login,
                wait(login),
            ),
            // A screen that asks nothing leaves a hook's state alone.
            (run(RunState::Running, None, Some((Idle, Hook))), None, None),
            // The rollout (Codex's turns) is exact like a hook: a screen
            // that asks nothing never undoes it, a question it does not
            // report (an approval) still makes the run wait.
            (
                run(RunState::Running, None, Some((Idle, Rollout))),
                None,
                None,
            ),
            (
                run(RunState::Running, None, Some((Working, Rollout))),
                None,
                None,
            ),
        ];
        for (i, (r, reason, want)) in table.into_iter().enumerate() {
            assert_eq!(screen_change(&r, claude, reason), want, "row {i}");
        }
        let codex = crate::provider::get("codex").unwrap();
        let approval = codex.attention(
            "Would you like to run the following command?\n$ rm -rf x\n› 1. Yes, proceed",
        );
        let table = [
            (
                run(RunState::Running, None, Some((Working, Rollout))),
                approval,
                approval.map(|a| (Waiting, Some(a))),
            ),
            (
                run(RunState::Running, None, Some((Idle, Rollout))),
                None,
                None,
            ),
        ];
        assert!(approval.is_some(), "Codex's approval screen is read");
        for (i, (r, reason, want)) in table.into_iter().enumerate() {
            assert_eq!(screen_change(&r, codex, reason), want, "codex row {i}");
        }
    }
}
