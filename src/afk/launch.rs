//! From ready issues to runs: a repo's ready issues listed, one claimed
//! (`Store::claim_issue`, across nodes) before anything is launched, its
//! planning or work run launched through the runner's one launch path, and
//! the claim given up when nothing ran. The tick and an operator's
//! `afk start` both come here.
//!
//! Host side only: it reads issues through their source and hands their
//! text to the launch path as the prompt; it reads nothing a run wrote.

use std::sync::Arc;

use super::{Scheduler, StartError, draining, plan, prompt};
use crate::domain::{IssueState, Run, RunIssue, RunKind};
use crate::issues::Issue;
use crate::repo::Repo;
use crate::run::LaunchRequest;
use crate::settings::Settings;
use crate::store::{ClaimResult, RepoKey};

/// Repos whose issues one tick lists at the same time.
const LIST_AT_ONCE: usize = 8;

impl Scheduler {
    /// The ready issues of each repo, listed up to `LIST_AT_ONCE` repos at a
    /// time; the results in the order of `repos`.
    pub async fn list_ready(&self, repos: &[&Repo]) -> Vec<Result<Vec<Issue>, StartError>> {
        use futures_util::stream::{self, StreamExt};
        // The futures made first: a closure in `map` trips the compiler's
        // proof that the tick's future is Send.
        let lists: Vec<_> = repos.iter().map(|r| self.ready_issues(r)).collect();
        stream::iter(lists).buffered(LIST_AT_ONCE).collect().await
    }

    /// Starts an AFK run of `repo` for its next ready issue. `asked` is an
    /// operator's request (`afk start`): allowed on a repo whose AFK is off.
    /// It runs as a task of its own, so a client that hangs up between the
    /// claim and its run cannot leave a claim without a run (or a run its
    /// claim does not name).
    pub async fn start_next(self: &Arc<Self>, repo: &Repo, asked: bool) -> Result<Run, StartError> {
        let me = self.clone();
        let repo = repo.clone();
        crate::to_the_end(async move { me.start_next_here(&repo, asked).await }).await
    }

    async fn start_next_here(&self, repo: &Repo, asked: bool) -> Result<Run, StartError> {
        let store = &self.runner.store();
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
        if store.node_draining(self.runner.node()).await? {
            return Err(StartError::Paused(draining(self.runner.node())));
        }
        if !repo.afk_enabled && !asked {
            return Err(StartError::Paused(format!(
                "AFK is off for repo '{}'",
                repo.name
            )));
        }
        let settings = store.settings().await?;
        let repo = self.refresh_config(repo.clone()).await;
        let mut runs = self.launch_ready(&repo, &settings, 1).await?;
        Ok(runs.remove(0))
    }

    /// The repo's open issues with its AFK label that no live run holds and
    /// no unrecorded outcome blocks, lowest number first: one listing of the
    /// source (more pages only when it has them).
    pub async fn ready_issues(&self, repo: &Repo) -> Result<Vec<Issue>, StartError> {
        let store = &self.runner.store();
        let source = self.sources.of(repo);
        let (listed, blocked) = tokio::try_join!(
            async {
                source
                    .list(Some(repo.effective_label()), Some(IssueState::Open))
                    .await
                    .map_err(StartError::from)
            },
            async {
                store
                    .blocked_issues(repo.id)
                    .await
                    .map_err(StartError::from)
            }
        )?;
        let blocked: std::collections::HashSet<i64> = blocked.into_iter().collect();
        let mut issues: Vec<Issue> = listed
            .into_iter()
            .filter(|i| {
                !blocked.contains(&i.number) && i.labels.iter().any(|l| l == repo.effective_label())
            })
            .collect();
        issues.sort_by_key(|i| i.number);
        Ok(issues)
    }

    /// Starts AFK runs for up to `max` of the repo's ready issues, as the
    /// caps allow. With none started, says why.
    async fn launch_ready(
        &self,
        repo: &Repo,
        settings: &Settings,
        max: usize,
    ) -> Result<Vec<Run>, StartError> {
        let listed_at = crate::store::now_ms();
        let issues = self.ready_issues(repo).await?;
        self.launch_listed(repo, issues, listed_at, settings, max)
            .await
    }

    /// Starts AFK runs for up to `max` of `issues` (ready, in order).
    pub(super) async fn launch_listed(
        &self,
        repo: &Repo,
        issues: Vec<Issue>,
        listed_at: i64,
        settings: &Settings,
        max: usize,
    ) -> Result<Vec<Run>, StartError> {
        let store = &self.runner.store();
        let source = self.sources.of(repo);
        let mut started = Vec::new();
        for issue in issues {
            if started.len() >= max {
                break;
            }
            // Directives that are wrong hold the issue back (lab says so on
            // it, once); ignored ones are said too.
            if self
                .directives_for(repo, settings, source.as_ref(), &issue)
                .await
                .is_none()
            {
                continue;
            }
            let claim = match store
                .claim_issue(
                    repo.id,
                    &repo.name,
                    issue.number,
                    self.runner.node(),
                    repo.afk_max_concurrent,
                    settings.afk.max_concurrent,
                    listed_at,
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
            // Claimed, the directives are fixed (the built-in tracker
            // refuses a change now): read them again, as the run gets them.
            let issue = match source.issue(issue.number).await {
                Ok(i) => i,
                Err(e) => {
                    store.release_claim(claim.id).await?;
                    return Err(e.into());
                }
            };
            let Some(directives) = self
                .directives_for(repo, settings, source.as_ref(), &issue)
                .await
            else {
                store.release_claim(claim.id).await?;
                continue;
            };
            self.say_config_error(repo, source.as_ref(), issue.number)
                .await;
            started.push(
                self.launch_kind(repo, settings, &issue, directives.layer(), claim.id, None)
                    .await?,
            );
        }
        if !started.is_empty() {
            return Ok(started);
        }
        Err(StartError::NoReadyIssue {
            repo: repo.name.clone(),
            label: repo.effective_label().to_owned(),
        })
    }

    /// Launches a claim's run: its planning run when its knobs ask for a
    /// plan and none was approved yet, else its work run (with `plan`, the
    /// approved plan, in its prompt). A first run that cannot start gives
    /// the claim up (the issue stays ready); a work run after a plan leaves
    /// that to its caller, which keeps the plans.
    pub(super) async fn launch_kind(
        &self,
        repo: &Repo,
        settings: &Settings,
        issue: &Issue,
        layer: Option<&crate::resolve::IssueLayer>,
        claim: i64,
        plan: Option<&crate::domain::Plan>,
    ) -> Result<Run, StartError> {
        let store = &self.runner.store();
        let global = match store.repo_with_global(&RepoKey::Id(repo.id)).await {
            Ok((_, g)) => g,
            Err(e) => {
                store.release_claim(claim).await?;
                return Err(e.into());
            }
        };
        let knobs =
            crate::resolve::run_knobs(crate::resolve::KnobContext { repo, settings }, layer);
        let planning = plan.is_none() && plan::wanted(&knobs);
        if planning {
            store
                .move_claim(
                    claim,
                    crate::domain::Stage::Work,
                    crate::domain::Stage::Plan,
                    false,
                )
                .await?;
        }
        let (kind, text) = if planning {
            (RunKind::Plan, prompt::plan(issue, &knobs))
        } else {
            let work = prompt::with_directives(prompt::render(issue), &knobs);
            (
                RunKind::Afk,
                match plan {
                    Some(p) => prompt::with_plan(work, p),
                    None => work,
                },
            )
        };
        let launched = self
            .runner
            .launch(LaunchRequest {
                options: Default::default(),
                repo: repo.clone(),
                global,
                kind,
                provider: None,
                model: None,
                effort: None,
                prompt: text,
                prompt_names_branch: !planning,
                env: [("LAB_ISSUE".to_owned(), issue.number.to_string())].into(),
                afk_claim: Some(claim),
                issue_layer: layer.cloned(),
                knobs,
                start_at: None,
                issue: Some(RunIssue {
                    number: issue.number,
                    title: issue.title.clone(),
                    url: Some(issue.url.clone().unwrap_or_else(|| {
                        format!(
                            "{}/repos/{}/issues/{}",
                            self.runner.cfg().lab_url.trim_end_matches('/'),
                            repo.name,
                            issue.number
                        )
                    })),
                }),
            })
            .await;
        match launched {
            Ok(run) => {
                tracing::info!(repo = %repo.name, issue = issue.number, run = run.id, "AFK run started");
                Ok(run)
            }
            Err(e) => {
                // Nothing ran: the issue stays ready for the next tick.
                if plan.is_none() {
                    store.release_claim(claim).await?;
                }
                Err(e.into())
            }
        }
    }
}
