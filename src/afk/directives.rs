//! What the scheduler does with an issue's directives and its repo's
//! `.lab.toml` (issue 27): reads the file at each tick (a repo's label and
//! check command may come from it), checks an issue's directives before it
//! claims the issue and again once claimed, and says on the issue, once per
//! thing to say, when it ignored them, refused them, or works with an older
//! `.lab.toml` than the branch's.
//!
//! Host side of the trust boundary: an issue's body is anyone's words; only
//! its block is read, and what lab writes back names no more of it than a
//! key, a bounded value and the rule it broke (`issues::directives`).

use std::collections::HashMap;
use std::sync::Mutex;

use super::Scheduler;
use crate::issues::directives::{self, Directives};
use crate::issues::{Issue, IssueSource};
use crate::repo::Repo;
use crate::repo::config_file::{self, ConfigState};
use crate::resolve::KnobContext;
use crate::settings::Settings;

/// What lab last wrote on each issue about its directives (and on each
/// repo's next claimed issue about its `.lab.toml`), so it says each thing
/// once: by (repo, issue) for directives, by repo for the file.
#[derive(Debug, Default)]
pub struct Said {
    issues: Mutex<HashMap<(i64, i64), String>>,
    files: Mutex<HashMap<i64, String>>,
}

impl Said {
    /// Whether `text` is new for this issue (and now said).
    fn first_on_issue(&self, repo: i64, issue: i64, text: &str) -> bool {
        let mut m = self.issues.lock().expect("poisoned");
        if m.get(&(repo, issue)).is_some_and(|t| t == text) {
            return false;
        }
        m.insert((repo, issue), text.to_owned());
        true
    }

    /// Forgets what was said on an issue whose directives are fine now.
    fn forget_issue(&self, repo: i64, issue: i64) {
        self.issues.lock().expect("poisoned").remove(&(repo, issue));
    }

    /// Whether this error of the repo's file is new (and now said).
    fn first_for_file(&self, repo: i64, error: &str) -> bool {
        let mut m = self.files.lock().expect("poisoned");
        if m.get(&repo).is_some_and(|t| t == error) {
            return false;
        }
        m.insert(repo, error.to_owned());
        true
    }
}

/// Whether the issue already has a comment that says `text` (lab's, from
/// before a restart or from another node). An issue lab cannot read is taken
/// as not told: saying a thing twice beats never saying it.
async fn already_said(source: &dyn IssueSource, number: i64, text: &str) -> bool {
    match source.issue(number).await {
        Ok(i) => i.comments.iter().any(|c| c.body.trim() == text.trim()),
        Err(_) => false,
    }
}

impl Scheduler {
    /// Reads the repo's `.lab.toml` again and records what lab made of it
    /// when that changed; the repo with it. A file lab could not read keeps
    /// what lab had (and is logged).
    pub(super) async fn refresh_config(&self, mut repo: Repo) -> Repo {
        let read = match self
            .runner
            .workspaces()
            .default_branch_file(&repo, config_file::FILE, config_file::MAX_BYTES + 1)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(repo = %repo.name, error = %e, "could not read the repo's .lab.toml");
                return repo;
            }
        };
        if read.as_ref().is_some_and(|f| {
            repo.config.commit.as_deref() == Some(&f.commit) && repo.config.error.is_none()
        }) {
            return repo;
        }
        let Ok(provider) = repo.provider() else {
            return repo;
        };
        let next = config_file::next_state(
            &repo.config,
            read.map(|f| {
                let checked = config_file::read(provider.provider(), &f.bytes, f.cut);
                (f.commit, checked)
            }),
        );
        if next != repo.config {
            if let Some(e) = &next.error {
                tracing::warn!(repo = %repo.name, error = %e, "the repo's .lab.toml is refused; lab keeps the last valid one");
            }
            match self.runner.store().set_repo_config(repo.id, &next).await {
                Ok(_) => repo.config = next,
                Err(e) => {
                    tracing::warn!(repo = %repo.name, error = %e, "could not record the repo's .lab.toml")
                }
            }
        }
        repo
    }

    /// An issue's directives as its run would get them, and what lab says
    /// on the issue about them (once): `None` when no run may start for it
    /// until they are fixed.
    pub(super) async fn directives_for(
        &self,
        repo: &Repo,
        settings: &Settings,
        source: &dyn IssueSource,
        issue: &Issue,
    ) -> Option<Directives> {
        let cx = KnobContext { repo, settings };
        let d = match directives::of(source, issue, cx).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(repo = %repo.name, issue = issue.number, error = %e, "could not check an issue's directives");
                return None;
            }
        };
        match d.comment() {
            Some(text) => {
                // New to this process: the issue's own comments say whether
                // lab (before a restart, or another node) said it already.
                if self.said.first_on_issue(repo.id, issue.number, &text)
                    && !already_said(source, issue.number, &text).await
                    && let Err(e) = source.comment(issue.number, &text).await
                {
                    tracing::warn!(repo = %repo.name, issue = issue.number, error = %e, "could not say so on the issue");
                }
            }
            None => self.said.forget_issue(repo.id, issue.number),
        }
        (!matches!(d, Directives::Invalid(_))).then_some(d)
    }

    /// Says on a claimed issue, once per refused version, that its run
    /// works with the repo's last valid `.lab.toml`.
    pub(super) async fn say_config_error(&self, repo: &Repo, source: &dyn IssueSource, issue: i64) {
        let ConfigState {
            error: Some(error),
            commit,
            ..
        } = &repo.config
        else {
            return;
        };
        if !self.said.first_for_file(repo.id, error) {
            return;
        }
        let kept = match commit {
            Some(c) => format!(
                "the last valid version (commit {})",
                c.chars().take(12).collect::<String>()
            ),
            None => "none (no valid version was ever read)".to_owned(),
        };
        let text = format!(
            "lab works on this issue with {kept} of the repo's `.lab.toml`: the newest is refused.\n\n{error}"
        );
        if let Err(e) = source.comment(issue, &text).await {
            tracing::warn!(repo = %repo.name, issue, error = %e, "could not say so on the issue");
        }
    }
}
