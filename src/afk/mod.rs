//! The AFK scheduler: each tick, for each AFK-enabled repo that is not
//! paused, take the open issues with the repo's label, skip those with an
//! active run or an outcome not yet on the issue, respect the repo's and
//! lab's caps, and launch AFK runs through the runner's one launch path
//! (`launch.rs`: a ready issue claimed, then its run launched).
//! Then record how each run of this node ended (see `outcome.rs`).
//!
//! Invariant: the scheduler knows nothing of any provider: the run kind and
//! the prompt are all it hands to the launch path.
//! Invariant: an issue is claimed (`Store::claim_issue`) before its run is
//! launched, so two nodes can never both take it.

pub mod admission;
mod budget;
mod claim_state;
pub mod cli_hold;
mod directives;
mod follow;
mod forge_feedback;
mod forge_follow;
pub mod holds;
mod judge;
mod launch;
pub mod limits;
mod lost;
mod no_answer;
mod node_down;
mod outcome;
pub mod plan;
mod problems;
pub mod prompt;
pub mod pull;
pub mod receipt;
pub mod review;
pub mod scope;
mod ticks;
mod wakes;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::issues::{SourceError, Sources};
use crate::repo::Repo;
use crate::run::busy::RunSet;

use crate::run::{LaunchError, Runner};
use crate::store::StoreError;

/// Why no run was started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Paused(String),
    #[error(
        "repo '{repo}' has no open issue labelled '{label}' that is ready (none without a live run or an unrecorded outcome)"
    )]
    NoReadyIssue { repo: String, label: String },
    #[error("{0}")]
    Cap(String),
    #[error("the issue source failed: {0}")]
    Source(#[from] SourceError),
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a draining node starts nothing.
pub fn draining(node: &str) -> String {
    format!("lab node '{node}' is draining: it starts no new run (labctl node undrain {node})")
}

/// How long an agent is idle before lab takes its turn as over: a CLI that
/// starts reports its session (idle) a moment before it takes its first
/// prompt, and that moment is no turn.
const TURN_SETTLE_MS: i64 = 2_000;

/// Whether a run's agent ended its turn: idle, and for longer than
/// [`TURN_SETTLE_MS`].
fn turn_ended(run: &crate::domain::Run) -> bool {
    run.agent.as_ref().is_some_and(|a| {
        a.state == crate::domain::AgentState::Idle
            && crate::store::now_ms() - a.since >= TURN_SETTLE_MS
    })
}

/// What a tick did.
#[derive(Debug, Default, Clone)]
pub struct TickReport {
    pub launched: Vec<i64>,
    pub finished: Vec<i64>,
    pub errors: Vec<String>,
}

/// The scheduler: a handful of owners, each with its state private, reached
/// through methods.
pub struct Scheduler {
    runner: Arc<Runner>,
    /// Where each repo's issues come from.
    sources: Sources,
    /// Runs whose pull request is being opened (one at a time per run).
    opening_pull: RunSet,
    /// The last problem per repo, for `afk status`.
    problems: problems::Problems,
    /// Tick and claims: one at a time, counted, the repos backing off, the
    /// loop's pace.
    ticks: ticks::Ticks,
    /// The follow-up of each claim: one state per claim.
    claims: claim_state::Claims,
    /// Limits and admission: what holds launches back.
    holds: holds::Holds,
    /// What lab said on issues about their directives and repos' files.
    said: directives::Said,
}

/// The longest the loop goes without a settle while nothing of this node's
/// is followed (what this process's writes do not announce: another node's,
/// a claim written by hand).
pub const QUIET_SETTLE: Duration = Duration::from_secs(10);

/// How long a run that opened its pull request may go on before lab ends it.
pub const PR_GRACE: Duration = Duration::from_secs(60);

impl Scheduler {
    pub fn new(runner: Arc<Runner>) -> Scheduler {
        Scheduler {
            sources: Sources::new(runner.store().clone(), runner.cfg().lab_url.clone()),
            opening_pull: RunSet::default(),
            runner,
            problems: problems::Problems::default(),
            ticks: ticks::Ticks::default(),
            claims: claim_state::Claims::default(),
            holds: holds::Holds::default(),
            said: directives::Said::default(),
        }
    }

    /// The runner this scheduler launches through.
    pub fn runner(&self) -> &Arc<Runner> {
        &self.runner
    }

    /// Where each repo's issues come from.
    pub fn sources(&self) -> &Sources {
        &self.sources
    }

    /// The last problem that kept the scheduler from each repo's issues,
    /// by repo name.
    pub fn problems(&self) -> BTreeMap<String, String> {
        self.problems.all()
    }

    /// Why the last tick started nothing for want of memory, if it did.
    pub fn admission(&self) -> Option<String> {
        self.holds.admission()
    }

    /// How many claims this node holds a follow-up state for (each is
    /// forgotten once its issue is told).
    pub fn claims_held(&self) -> usize {
        self.claims.len()
    }

    fn note(&self, repo: &str, problem: Option<String>) {
        self.problems.note(repo, problem);
    }

    /// One tick: record endings, end overdue runs, then start what the caps
    /// allow. Counted once it is over ([`Scheduler::ticks`]).
    pub async fn tick(&self) -> TickReport {
        let report = self.tick_once().await;
        self.ticks.ticked();
        report
    }

    /// Ticks this node's scheduler finished since it started: what a test
    /// (or an operator) waits on to know the scheduler looked again.
    pub fn ticks(&self) -> u64 {
        self.ticks.ticks()
    }

    /// Settles (a tick's included) this node's scheduler finished since it
    /// started: what a test waits on to know its claims were looked at
    /// again.
    pub fn settles(&self) -> u64 {
        self.ticks.settles()
    }

    async fn tick_once(&self) -> TickReport {
        let _one = self.ticks.one_at_a_time().await;
        let mut report = TickReport::default();
        if let Err(e) = self.settle(&mut report).await {
            report.errors.push(e.to_string());
        }
        match self.runner.store().afk_paused().await {
            Ok(true) => return report,
            Ok(false) => {}
            Err(e) => {
                report.errors.push(e.to_string());
                return report;
            }
        }
        // A draining node finishes its runs and takes no new issue.
        match self.runner.store().node_draining(self.runner.node()).await {
            Ok(true) => return report,
            Ok(false) => {}
            Err(e) => {
                report.errors.push(e.to_string());
                return report;
            }
        }
        self.recheck_clis().await;
        let store = &self.runner.store();
        let (repos, settings, live) =
            match tokio::try_join!(store.repos(), store.settings(), store.live_claim_counts()) {
                Ok(x) => x,
                Err(e) => {
                    report.errors.push(e.to_string());
                    return report;
                }
            };
        let mut global_live: i64 = live.values().sum();
        // Read only when this node lacks a CLI an enabled repo needs.
        let elsewhere = if repos.iter().any(|r| {
            r.afk_enabled
                && r.provider()
                    .is_ok_and(|p| self.runner.binary_for(p).is_err())
        }) {
            self.clis_elsewhere().await
        } else {
            Default::default()
        };
        // The caps, as they stand: a repo with no room is not listed at all
        // (the claim transaction checks again, across nodes).
        let now = Instant::now();
        let with_room: Vec<(Repo, i64)> = repos
            .into_iter()
            .filter(|r| r.afk_enabled && !r.afk_paused)
            .filter(|r| match self.holds.holding(&r.provider) {
                None => true,
                Some(why) => {
                    self.note(&r.name, Some(why));
                    false
                }
            })
            .filter(|r| !self.ticks.backing_off(r.id, now))
            .filter(|r| match r.provider() {
                // Placement (issue 29 §4): a node without a repo's CLI
                // leaves its issues to the nodes that have it.
                Ok(p) if self.runner.binary_for(p).is_err() && elsewhere.contains(p.as_str()) => {
                    self.note(
                        &r.name,
                        Some(format!(
                            "this node has no {p} CLI: other nodes of the fleet take its issues"
                        )),
                    );
                    false
                }
                _ => true,
            })
            .map(|r| {
                let room = r.afk_max_concurrent - live.get(&r.id).copied().unwrap_or(0);
                (r, room)
            })
            .filter(|(_, room)| *room > 0)
            .collect();
        if global_live >= settings.afk.max_concurrent || with_room.is_empty() {
            return report;
        }
        // Each repo's `.lab.toml` as its default branch has it now: its
        // label and check command may come from it (issue 27).
        let mut refreshed = Vec::with_capacity(with_room.len());
        for (r, room) in with_room {
            refreshed.push((self.refresh_config(r).await, room));
        }
        let with_room = refreshed;
        let (mut admitted, why) =
            admission::admit(settings.afk.memory_per_run_mb, admission::available_mb());
        if why.is_some() {
            tracing::info!(reason = why.as_deref().unwrap_or(""), "AFK launches wait");
        }
        let held = why.is_some();
        self.holds.admitted(why);
        if held {
            return report;
        }
        // One listing of each repo's issues per tick (more pages only when
        // the source has them), several repos at a time; launches in order.
        let listed_at = crate::store::now_ms();
        let lists = {
            let repos: Vec<&Repo> = with_room.iter().map(|(r, _)| r).collect();
            self.list_ready(&repos).await
        };
        for ((repo, room), listed) in with_room.into_iter().zip(lists) {
            if global_live >= settings.afk.max_concurrent {
                break;
            }
            if admitted == 0 {
                break;
            }
            let started = match listed {
                Ok(issues) => {
                    let max = (room as usize).min(admitted);
                    self.launch_listed(&repo, issues, listed_at, &settings, max)
                        .await
                }
                Err(e) => Err(e),
            };
            match started {
                Ok(runs) => {
                    global_live += runs.len() as i64;
                    admitted = admitted.saturating_sub(runs.len());
                    report.launched.extend(runs.iter().map(|r| r.id));
                    self.note(&repo.name, None);
                }
                Err(StartError::NoReadyIssue { .. }) => self.note(&repo.name, None),
                Err(StartError::Cap(_)) | Err(StartError::Paused(_)) => {}
                Err(StartError::Source(SourceError::RateLimited { retry_after })) => {
                    self.ticks.back_off(repo.id, Instant::now() + retry_after);
                    self.note(
                        &repo.name,
                        Some(format!(
                            "the forge's rate limit: waiting {} s",
                            retry_after.as_secs()
                        )),
                    );
                }
                Err(e) => {
                    report.errors.push(format!("{}: {e}", repo.name));
                    self.note(&repo.name, Some(e.to_string()));
                }
            }
        }
        report
    }

    /// The provider CLIs the fleet's other nodes that take new runs have.
    async fn clis_elsewhere(&self) -> std::collections::HashSet<String> {
        let now = crate::store::now_ms();
        let down_after = self.runner.cfg().node_down_after_ms;
        self.runner
            .store()
            .nodes()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|n| {
                n.id != self.runner.node()
                    && n.state(now, down_after) == crate::domain::NodeState::Up
            })
            .flat_map(|n| n.capacity.clis)
            .collect()
    }

    /// Settles finished AFK runs without looking for new issues.
    pub async fn settle_now(&self) -> TickReport {
        let _one = self.ticks.one_at_a_time().await;
        let mut report = TickReport::default();
        if let Err(e) = self.settle(&mut report).await {
            tracing::warn!(error = %e, "settling AFK runs");
            report.errors.push(e.to_string());
        }
        report
    }
}
