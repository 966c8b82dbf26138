//! A run's scope (issue 28 §4): the `writes` globs it resolved with, and
//! which of its branch's changed paths fall outside them. lab pushes
//! nothing and opens no pull request while its branch changes a path out of
//! scope (`pull::deliver`); a round asks the agent to undo it, and when the
//! rounds are used up the run ends for a person.
//!
//! Host side, over the agent's data: the paths come from lab's own repo
//! (`Workspaces::changed_paths`, trees only). They are the agent's bytes:
//! they are shown on lab's pages and typed into the run's own session, never
//! put in an answer to the run's token, an issue comment or a forge (those
//! get the count and the operator's globs).

use std::path::{Component, Path, PathBuf};

use globset::GlobSet;

use super::Scheduler;
use super::follow::Verdict;
use crate::domain::{RoundCause, Run, StopCause};
use crate::knob;
use crate::repo::Repo;
use crate::run::workspace::Changed;
use crate::store::Claim;

/// The most out-of-scope paths lab names (the count is always exact).
pub const NAMED: usize = 20;

/// What a run may change: its resolved `writes` (none: unrestricted).
#[derive(Debug, Clone)]
pub struct Scope {
    pub globs: Vec<String>,
    set: GlobSet,
}

/// A branch that changes paths out of its run's scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach {
    /// The run's globs (the operator's words).
    pub globs: Vec<String>,
    /// The paths out of scope, shown safely (at most [`NAMED`]).
    pub paths: Vec<String>,
    /// How many there are.
    pub count: usize,
}

impl Breach {
    /// What may be said where the agent's bytes may not (the run's token,
    /// an issue, a forge): the count and the globs.
    pub fn told(&self) -> String {
        format!(
            "the branch changes {} path(s) outside the run's scope (writes: {})",
            self.count,
            self.globs.join(", ")
        )
    }

    /// The same, naming the paths: for lab's own pages and the run's own
    /// session.
    pub fn named(&self) -> String {
        let more = self.count.saturating_sub(self.paths.len());
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        format!("{}: {}{tail}", self.told(), self.paths.join(", "))
    }
}

impl Scope {
    /// The scope a run resolved with; `None` when it is unrestricted (no
    /// `writes`, or an empty list).
    pub fn of(run: &Run) -> Option<Scope> {
        let globs = knob::writes_of(&run.knobs);
        if globs.is_empty() {
            return None;
        }
        // The globs were checked when they were set; one that no longer
        // parses (a lab that checks harder) restricts to nothing.
        let set = knob::glob_set(&globs).unwrap_or_else(|_| GlobSet::empty());
        Some(Scope { globs, set })
    }

    /// The paths of `changes` out of this scope; `None` when all are in.
    ///
    /// A path is in when a glob matches it. A symlink counts as a change of
    /// what it points to as well: its target, resolved against the link's
    /// folder without following anything, must stay in the workspace and be
    /// in scope too (a link in scope cannot carry a write out of it). A path
    /// that is not UTF-8 is never in scope.
    pub fn breach(&self, changes: &[Changed]) -> Option<Breach> {
        let out: Vec<&Changed> = changes.iter().filter(|c| !self.allows(c)).collect();
        if out.is_empty() {
            return None;
        }
        Some(Breach {
            globs: self.globs.clone(),
            paths: out.iter().take(NAMED).map(|c| shown(&c.path)).collect(),
            count: out.len(),
        })
    }

    fn allows(&self, c: &Changed) -> bool {
        let Ok(path) = std::str::from_utf8(&c.path) else {
            return false;
        };
        if !self.set.is_match(path) {
            return false;
        }
        let Some(target) = &c.link else {
            return true;
        };
        let Ok(target) = std::str::from_utf8(target) else {
            return false;
        };
        let folder = Path::new(path).parent().unwrap_or(Path::new(""));
        match resolved(folder, Path::new(target)) {
            Some(p) => p.to_str().is_some_and(|p| self.set.is_match(p)),
            None => false,
        }
    }
}

/// Whether the branch of `run`, as lab's repo holds it now (after
/// `Workspaces::collect`), leaves the run's scope. `Ok(None)`: in scope, or
/// unrestricted. An error is lab's failure to read the branch (its text is
/// lab's git's about lab's repo, and names no path).
pub async fn breach_of(
    runner: &crate::run::Runner,
    repo: &Repo,
    run: &Run,
    branch: &str,
) -> Result<Option<Breach>, String> {
    let Some(scope) = Scope::of(run) else {
        return Ok(None);
    };
    let changes = runner
        .workspaces()
        .changed_paths(repo, branch)
        .await
        .map_err(|e| {
            crate::run::withheld(run.id, &format!("reading what {branch} changes"), &e.0)
        })?;
    Ok(scope.breach(&changes))
}

impl Scheduler {
    /// A round's branch leaves the run's scope: another round asks the
    /// agent to undo it, while rounds are left and its last round changed
    /// the branch; then the run ends for a person (`StopCause::Scope`, its
    /// reason naming the paths: it shows on lab's pages; the issue is told
    /// the globs only, `judge::judge`).
    pub(super) async fn scope_round(
        &self,
        claim: &Claim,
        run: &Run,
        max_rounds: i64,
        breach: &Breach,
        head: Option<&str>,
        then: super::prompt::Then,
    ) -> Verdict {
        self.claims
            .with(claim.id, |c| c.scope = Some(breach.clone()));
        if claim.rounds >= max_rounds {
            return Some((
                StopCause::Scope,
                format!(
                    "scope: {} after {} round(s), the limit (afk.max_rounds)",
                    breach.named(),
                    claim.rounds
                ),
            ));
        }
        let head = head.unwrap_or_default();
        match self
            .runner
            .store()
            .start_round(claim.id, &format!("{head}:scope"), RoundCause::Scope)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                return Some((
                    StopCause::Scope,
                    format!(
                        "scope: {}; the agent's round left the branch as it was",
                        breach.named()
                    ),
                ));
            }
            Err(e) => {
                tracing::warn!(claim = claim.id, error = %e, "could not start a round");
                return None;
            }
        }
        let text = super::prompt::round(&super::prompt::Round {
            head,
            round: claim.rounds + 1,
            max: max_rounds,
            red: Some(super::prompt::Red::Scope(breach)),
            feedback: Vec::new(),
            then,
        });
        self.tell(claim, run, &text, "its branch leaves its scope")
            .await
    }
}

impl Scheduler {
    /// A work run that ended without a pull request: whether its branch
    /// leaves its scope (an agent that committed out of scope and exited
    /// without asking for one), noted as the breach its outcome is judged
    /// by. Looked at once, when no breach is known yet.
    ///
    /// Host side, over the agent's data: the branch is taken from the
    /// workspace in the run's jail (`pull::collect`); its paths are read in
    /// lab's repo, trees only.
    pub(super) async fn scope_at_end(&self, claim: &Claim, run: &Run, repo: &Repo) {
        if Scope::of(run).is_none()
            || run.workspace_removed_at.is_some()
            || self
                .claims
                .peek(claim.id, |c| c.scope.is_some())
                .unwrap_or(false)
        {
            return;
        }
        let Some(branch) = run.branch.as_deref() else {
            return;
        };
        let found = match super::pull::collect(&self.runner, repo, run, branch).await {
            Ok(()) => breach_of(&self.runner, repo, run, branch).await,
            Err(e) => Err(e.to_string()),
        };
        match found {
            Ok(Some(b)) => self.claims.with(claim.id, |c| c.scope = Some(b)),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(run = run.id, error = %e, "could not read an ended run's branch for its scope")
            }
        }
    }
}

/// `target` taken from `folder` (both workspace-relative), by its parts
/// alone: `None` when it is absolute or climbs out of the workspace.
fn resolved(folder: &Path, target: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in folder.components().chain(target.components()) {
        match part {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// A path as lab shows it: printable text, anything else escaped.
fn shown(path: &[u8]) -> String {
    String::from_utf8_lossy(path)
        .chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(globs: &[&str]) -> Scope {
        let globs: Vec<String> = globs.iter().map(|g| (*g).to_owned()).collect();
        Scope {
            set: knob::glob_set(&globs).unwrap(),
            globs,
        }
    }

    fn file(p: &str) -> Changed {
        Changed {
            path: p.as_bytes().to_vec(),
            link: None,
        }
    }

    fn link(p: &str, to: &str) -> Changed {
        Changed {
            path: p.as_bytes().to_vec(),
            link: Some(to.as_bytes().to_vec()),
        }
    }

    #[test]
    fn paths_in_the_globs_are_in_scope() {
        let s = scope(&["src/**", "docs/*.md"]);
        assert_eq!(
            s.breach(&[file("src/a/b.rs"), file("docs/x.md"), file("src/c")]),
            None
        );
        let b = s
            .breach(&[file("src/a.rs"), file("docs/a/b.md"), file("README.md")])
            .unwrap();
        assert_eq!(b.paths, ["docs/a/b.md", "README.md"]);
        assert_eq!(b.count, 2);
        assert_eq!(
            b.told(),
            "the branch changes 2 path(s) outside the run's scope (writes: src/**, docs/*.md)"
        );
        assert!(
            b.named().ends_with(": docs/a/b.md, README.md"),
            "{}",
            b.named()
        );
    }

    #[test]
    fn a_link_in_scope_must_point_in_scope() {
        let s = scope(&["src/**"]);
        assert_eq!(s.breach(&[link("src/a", "b/c.rs")]), None);
        assert_eq!(s.breach(&[link("src/x/a", "../b.rs")]), None);
        for bad in [
            link("src/a", "../README.md"),
            link("src/a", "../../etc/passwd"),
            link("src/a", "/etc/passwd"),
            link("src/a", "../.github/workflows/ci.yml"),
        ] {
            assert_eq!(
                s.breach(std::slice::from_ref(&bad)).map(|b| b.count),
                Some(1),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn names_that_are_not_text_are_out_and_shown_escaped() {
        let s = scope(&["**"]);
        let odd = Changed {
            path: b"src/\xff\x1b[2J".to_vec(),
            link: None,
        };
        let b = s.breach(&[odd, file("ok")]).unwrap();
        assert_eq!(b.count, 1);
        assert!(!b.paths[0].contains('\u{1b}'), "{:?}", b.paths);
    }

    #[test]
    fn at_most_named_paths_are_named() {
        let s = scope(&["src/**"]);
        let many: Vec<Changed> = (0..NAMED + 5).map(|i| file(&format!("x{i}"))).collect();
        let b = s.breach(&many).unwrap();
        assert_eq!((b.paths.len(), b.count), (NAMED, NAMED + 5));
        assert!(b.named().ends_with(" and 5 more"));
    }
}
