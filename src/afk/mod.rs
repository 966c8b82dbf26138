//! The AFK scheduler: each tick, for each AFK-enabled repo that is not
//! paused, take the open issues with the repo's label, skip those with an
//! active run or an outcome not yet on the issue, respect the repo's and
//! lab's caps, and launch AFK runs through the runner's one launch path.
//! Then record how each run of this node ended (see `outcome.rs`).
//!
//! Invariant: the scheduler knows nothing of any provider: the run kind and
//! the prompt are all it hands to the launch path.
//! Invariant: an issue is claimed (`Store::claim_issue`) before its run is
//! launched, so two nodes can never both take it.

mod outcome;
pub mod prompt;
pub mod pull;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::issues::{Issue, SourceError, source_for};
use crate::repo::Repo;
use crate::resolve::RunKind;
use crate::run::{LaunchError, LaunchRequest, Run, Runner};
use crate::store::{ClaimResult, RepoKey, StoreError};

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

/// What a tick did.
#[derive(Debug, Default, Clone)]
pub struct TickReport {
    pub launched: Vec<i64>,
    pub finished: Vec<i64>,
    pub errors: Vec<String>,
}

pub struct Scheduler {
    pub runner: Arc<Runner>,
    /// Repos whose forge asked lab to wait, until when.
    backoff: Mutex<HashMap<i64, Instant>>,
    /// When this node saw a claim's pull request (the run gets a grace
    /// period to finish talking before lab ends it).
    pr_seen: Mutex<HashMap<i64, Instant>>,
    /// The last problem per repo, for `afk status`.
    pub problems: Mutex<BTreeMap<String, String>>,
    /// One tick at a time on this node.
    ticking: tokio::sync::Mutex<()>,
}

/// How long a run that opened its pull request may go on before lab ends it.
pub const PR_GRACE: Duration = Duration::from_secs(60);

impl Scheduler {
    pub fn new(runner: Arc<Runner>) -> Scheduler {
        Scheduler {
            runner,
            backoff: Mutex::new(HashMap::new()),
            pr_seen: Mutex::new(HashMap::new()),
            problems: Mutex::new(BTreeMap::new()),
            ticking: tokio::sync::Mutex::new(()),
        }
    }

    fn note(&self, repo: &str, problem: Option<String>) {
        let mut p = self.problems.lock().expect("poisoned");
        match problem {
            Some(m) => {
                if p.get(repo) != Some(&m) {
                    tracing::warn!(repo, problem = %m, "AFK scheduler");
                }
                p.insert(repo.to_owned(), m);
            }
            None => {
                p.remove(repo);
            }
        }
    }

    /// One tick: record endings, end overdue runs, then start what the caps
    /// allow.
    pub async fn tick(&self) -> TickReport {
        let _one = self.ticking.lock().await;
        let mut report = TickReport::default();
        if let Err(e) = self.settle(&mut report).await {
            report.errors.push(e.to_string());
        }
        match self.runner.store.afk_paused().await {
            Ok(true) => return report,
            Ok(false) => {}
            Err(e) => {
                report.errors.push(e.to_string());
                return report;
            }
        }
        let repos = match self.runner.store.repos().await {
            Ok(r) => r,
            Err(e) => {
                report.errors.push(e.to_string());
                return report;
            }
        };
        for repo in repos.into_iter().filter(|r| r.afk_enabled && !r.afk_paused) {
            let waiting = self
                .backoff
                .lock()
                .expect("poisoned")
                .get(&repo.id)
                .is_some_and(|until| Instant::now() < *until);
            if waiting {
                continue;
            }
            // One listing of the repo's issues per tick (more pages only
            // when the source has them).
            match self.launch_ready(&repo, false, usize::MAX).await {
                Ok(runs) => {
                    report.launched.extend(runs.iter().map(|r| r.id));
                    self.note(&repo.name, None);
                }
                Err(StartError::NoReadyIssue { .. }) => self.note(&repo.name, None),
                Err(StartError::Cap(_)) | Err(StartError::Paused(_)) => {}
                Err(StartError::Source(SourceError::RateLimited { retry_after })) => {
                    self.backoff
                        .lock()
                        .expect("poisoned")
                        .insert(repo.id, Instant::now() + retry_after);
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

    /// Starts an AFK run of `repo` for its next ready issue. `asked` is an
    /// operator's request (`afk start`): allowed on a repo whose AFK is off.
    pub async fn start_next(&self, repo: &Repo, asked: bool) -> Result<Run, StartError> {
        let mut runs = self.launch_ready(repo, asked, 1).await?;
        Ok(runs.remove(0))
    }

    /// Lists the repo's ready issues once and starts AFK runs for up to `max`
    /// of them, as the caps allow. With none started, says why.
    async fn launch_ready(
        &self,
        repo: &Repo,
        asked: bool,
        max: usize,
    ) -> Result<Vec<Run>, StartError> {
        let store = &self.runner.store;
        if store.afk_paused().await? {
            return Err(StartError::Paused(
                "the AFK scheduler is paused (labctl afk resume)".into(),
            ));
        }
        if repo.afk_paused {
            return Err(StartError::Paused(format!(
                "AFK runs of repo '{}' are paused (labctl afk resume {})",
                repo.name, repo.name
            )));
        }
        if !repo.afk_enabled && !asked {
            return Err(StartError::Paused(format!(
                "AFK is off for repo '{}'",
                repo.name
            )));
        }
        let settings = store.settings().await?;
        let source = source_for(repo, store, &self.runner.cfg.lab_url);
        let blocked = store.blocked_issues(repo.id).await?;
        let mut issues: Vec<Issue> = source
            .list(Some(&repo.afk_label), Some("open"))
            .await?
            .into_iter()
            .filter(|i| !blocked.contains(&i.number) && i.labels.contains(&repo.afk_label))
            .collect();
        issues.sort_by_key(|i| i.number);
        let mut started = Vec::new();
        for issue in issues {
            if started.len() >= max {
                break;
            }
            let claim = match store
                .claim_issue(
                    repo.id,
                    &repo.name,
                    issue.number,
                    self.runner.node(),
                    repo.afk_max_concurrent,
                    settings.afk.max_concurrent,
                )
                .await?
            {
                ClaimResult::Claimed(c) => c,
                ClaimResult::IssueTaken => continue,
                ClaimResult::RepoCap if !started.is_empty() => break,
                ClaimResult::GlobalCap if !started.is_empty() => break,
                ClaimResult::RepoCap => {
                    return Err(StartError::Cap(format!(
                        "repo '{}' already has {} live AFK run(s), its limit",
                        repo.name, repo.afk_max_concurrent
                    )));
                }
                ClaimResult::GlobalCap => {
                    return Err(StartError::Cap(format!(
                        "lab already has {} live AFK run(s), its limit",
                        settings.afk.max_concurrent
                    )));
                }
            };
            started.push(self.launch(repo, &issue, claim.id).await?);
        }
        if !started.is_empty() {
            return Ok(started);
        }
        Err(StartError::NoReadyIssue {
            repo: repo.name.clone(),
            label: repo.afk_label.clone(),
        })
    }

    async fn launch(&self, repo: &Repo, issue: &Issue, claim: i64) -> Result<Run, StartError> {
        let store = &self.runner.store;
        let global = match store.repo_with_global(&RepoKey::Id(repo.id)).await {
            Ok((_, g)) => g,
            Err(e) => {
                store.release_claim(claim).await?;
                return Err(e.into());
            }
        };
        let launched = self
            .runner
            .launch(LaunchRequest {
                repo: repo.clone(),
                global,
                kind: RunKind::Afk,
                model: None,
                effort: None,
                prompt: prompt::render(issue),
                prompt_names_branch: true,
                env: [("LAB_ISSUE".to_owned(), issue.number.to_string())].into(),
            })
            .await;
        match launched {
            Ok(run) => {
                store
                    .attach_run(claim, run.id, &run.model.value, &run.effort.value)
                    .await?;
                tracing::info!(repo = %repo.name, issue = issue.number, run = run.id, "AFK run started");
                Ok(run)
            }
            Err(e) => {
                // Nothing ran: the issue stays ready for the next tick.
                store.release_claim(claim).await?;
                Err(e.into())
            }
        }
    }

    /// Runs the scheduler every `tick_seconds` until `shutdown`. The setting
    /// is read every second, so a change takes effect at once.
    /// Settles finished AFK runs without looking for new issues.
    pub async fn settle_now(&self) -> TickReport {
        let _one = self.ticking.lock().await;
        let mut report = TickReport::default();
        if let Err(e) = self.settle(&mut report).await {
            tracing::warn!(error = %e, "settling AFK runs");
            report.errors.push(e.to_string());
        }
        report
    }

    pub fn spawn_loop(
        self: Arc<Self>,
        mut shutdown: watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut last = Instant::now();
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = shutdown.changed() => {}
                }
                if *shutdown.borrow() {
                    break;
                }
                let secs = self
                    .runner
                    .store
                    .settings()
                    .await
                    .map(|s| s.afk.tick_seconds)
                    .unwrap_or(30);
                if last.elapsed() < Duration::from_secs(secs.max(1) as u64) {
                    // Between ticks, only settle: an outcome (or a time-out)
                    // shows within a second of its run ending, not a tick.
                    self.settle_now().await;
                    continue;
                }
                last = Instant::now();
                let r = self.tick().await;
                for e in r.errors {
                    tracing::warn!(error = %e, "AFK tick");
                }
            }
        })
    }
}
