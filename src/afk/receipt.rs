//! An AFK run's receipt (issue 28 §5, ADR 31): what lab knows of the work
//! behind its pull request, written by lab, never by the agent. Read from
//! the run, its claim and the claim's steps (`claim_steps`), and the scope
//! checked now on the branch as lab's repo holds it. The API serialises it
//! (`http/receipt.rs`, through `service::receipt`), the pull request's page
//! shows it, and `pull::write_receipt` puts its Markdown into a forge pull
//! request's description.
//!
//! Host side: the only part that reads the agent's data is the scope
//! check (`afk::scope::breach_of`, trees in lab's own repo); the receipt
//! carries its count, never the paths. A check's output tail is the checked
//! code's doing: it is for lab's pages and the API, never a forge.

use crate::domain::{Run, RunKind, Step};
use crate::run::Runner;
use crate::store::{Claim, RepoKey, StoreError};

/// The receipt of one AFK run.
#[derive(Debug, Clone)]
pub struct Receipt {
    pub run: Run,
    pub claim: Claim,
    /// The rounds lab started and the checks it ran, oldest first, each
    /// with when (ms).
    pub steps: Vec<(i64, Step)>,
    pub scope: ScopeCheck,
    /// The plans of its claim (issue 28 §2), by version: none without a
    /// plan phase.
    pub plans: Vec<crate::domain::Plan>,
    /// The verdicts of its review runs (issue 28 §3), oldest first.
    pub reviews: Vec<crate::domain::Review>,
}

impl Receipt {
    /// The plan the work followed: the approved version.
    pub fn approved_plan(&self) -> Option<&crate::domain::Plan> {
        self.plans
            .iter()
            .find(|p| p.state == crate::domain::PlanState::Approved)
    }

    /// Each round in the order they happened, with what started it and
    /// when (ms): the first is the issue's, from the run's first start (a
    /// resumed session keeps it), then each round lab started.
    pub fn rounds(&self) -> Vec<(i64, crate::domain::RoundCause, i64)> {
        let first = self
            .claim
            .started_at
            .or(self.run.started_at)
            .unwrap_or(self.run.created_at);
        let mut v = vec![(1, crate::domain::RoundCause::Issue, first)];
        v.extend(self.steps.iter().filter_map(|(at, step)| match step {
            Step::Round(s) => Some((s.round, s.cause, *at)),
            Step::Check(_) => None,
        }));
        v
    }

    /// How many versions were rejected before it.
    pub fn rejected_plans(&self) -> usize {
        self.plans
            .iter()
            .filter(|p| p.state == crate::domain::PlanState::Rejected)
            .count()
    }
}

/// The run's scope, checked on its branch now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeCheck {
    /// No `writes`: any path may change.
    Unrestricted,
    /// Every path the branch changes matches the globs.
    InScope { globs: Vec<String> },
    /// This many paths do not.
    Outside { globs: Vec<String>, count: usize },
    /// The branch is not in lab's repo (yet), or could not be read.
    NotRead { globs: Vec<String> },
}

impl ScopeCheck {
    pub fn globs(&self) -> &[String] {
        match self {
            ScopeCheck::Unrestricted => &[],
            ScopeCheck::InScope { globs }
            | ScopeCheck::Outside { globs, .. }
            | ScopeCheck::NotRead { globs } => globs,
        }
    }

    /// `unrestricted`, `in-scope`, `outside`, `not-read`.
    pub fn state(&self) -> &'static str {
        match self {
            ScopeCheck::Unrestricted => "unrestricted",
            ScopeCheck::InScope { .. } => "in-scope",
            ScopeCheck::Outside { .. } => "outside",
            ScopeCheck::NotRead { .. } => "not-read",
        }
    }
}

/// Why a run has no receipt to read.
#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    /// The run is a manual one: it has none.
    #[error("run {0} is a manual run: only an AFK run's pull request has a receipt")]
    Manual(i64),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The receipt of run `id`: an AFK run's; a manual run has none.
pub async fn of_run(runner: &Runner, id: i64) -> Result<Receipt, ReceiptError> {
    let store = runner.store();
    let run = store.run(id).await?;
    let claim = match store.claim_of_run(id).await? {
        Some(c) if run.kind == RunKind::Afk => c,
        _ => return Err(ReceiptError::Manual(id)),
    };
    let steps = store.claim_steps(claim.id).await?;
    let scope = scope_now(runner, &run).await;
    let plans = store.plans_of_claim(claim.id).await?;
    let reviews = store.reviews_of_claim(claim.id).await?;
    Ok(Receipt {
        run,
        claim,
        steps,
        scope,
        plans,
        reviews,
    })
}

async fn scope_now(runner: &Runner, run: &Run) -> ScopeCheck {
    let Some(scope) = crate::afk::scope::Scope::of(run) else {
        return ScopeCheck::Unrestricted;
    };
    let globs = scope.globs.clone();
    let (Some(repo_id), Some(branch)) = (run.repo_id, run.branch.as_deref()) else {
        return ScopeCheck::NotRead { globs };
    };
    let repo = match runner.store().repo(&RepoKey::Id(repo_id)).await {
        Ok(r) => r,
        Err(StoreError::NotFound) | Err(_) => return ScopeCheck::NotRead { globs },
    };
    match crate::afk::scope::breach_of(runner, &repo, run, branch).await {
        Ok(None) => ScopeCheck::InScope { globs },
        Ok(Some(b)) => ScopeCheck::Outside {
            globs,
            count: b.count,
        },
        Err(_) => ScopeCheck::NotRead { globs },
    }
}

/// Where lab's receipt starts in a forge pull request's description:
/// everything after it is lab's, rewritten as rounds go; everything before
/// it (the agent's description, a person's edits) is kept.
pub const MARKER: &str =
    "<!-- lab: the receipt below is written by lab; edits to it are replaced -->";

impl Receipt {
    /// The receipt as Markdown for a forge's pull request description:
    /// lab's words and the operator's and issue's settings only. No check
    /// output and no path the agent chose goes to the forge (those are on
    /// lab's page). The second value leaves usage out: what changes only
    /// with tokens does not rewrite the description.
    pub fn markdown(&self) -> (String, String) {
        let run = &self.run;
        let mut lines = vec![
            "### lab's receipt".to_owned(),
            String::new(),
            format!(
                "- **Run** {} of issue #{}, attempt {}",
                run.id, self.claim.issue_number, self.claim.attempt
            ),
            format!(
                "- **Agent** {}: model `{}` (from {}), effort `{}` (from {})",
                run.provider, run.model.value, run.model.layer, run.effort.value, run.effort.layer
            ),
        ];
        for k in &run.knobs {
            lines.push(format!(
                "- **Knob** `{}` = `{}` (from {})",
                k.key,
                k.value.shown(),
                k.source.as_str()
            ));
        }
        if let Some(p) = self.approved_plan() {
            // Who approved which version, never the plan's text: it is the
            // planning run's words.
            lines.push(format!(
                "- **Plan** version {} approved by {}{}",
                p.version,
                p.by().replace('`', "'"),
                match self.rejected_plans() {
                    0 => String::new(),
                    n => format!(" after {n} rejected version(s)"),
                }
            ));
        }
        lines.push(match &self.scope {
            ScopeCheck::Unrestricted => "- **Scope** unrestricted".to_owned(),
            ScopeCheck::InScope { globs } => {
                format!("- **Scope** every change within `{}`", globs.join("`, `"))
            }
            ScopeCheck::Outside { globs, count } => format!(
                "- **Scope** {count} path(s) outside `{}`",
                globs.join("`, `")
            ),
            ScopeCheck::NotRead { globs } => {
                format!("- **Scope** `{}` (not read yet)", globs.join("`, `"))
            }
        });
        for (round, cause, _) in self.rounds() {
            lines.push(format!(
                "- **Round {round}**: {}",
                match cause {
                    crate::domain::RoundCause::Issue => "the issue",
                    crate::domain::RoundCause::Check => "the check command failed",
                    crate::domain::RoundCause::ForgeCheck => "the forge's checks failed",
                    crate::domain::RoundCause::Review => "a review asked for changes",
                    crate::domain::RoundCause::Scope => "the branch left its scope",
                    crate::domain::RoundCause::Conflict => "a conflict with the base",
                }
            ));
        }
        for (_, step) in &self.steps {
            match step {
                Step::Round(_) => {}
                Step::Check(c) => lines.push(format!(
                    "- **Check** of round {}: `{}` {} in {:.1} s",
                    c.round,
                    c.command.replace('`', "'"),
                    match c.status {
                        Some(0) => "passed".to_owned(),
                        Some(n) => format!("failed (exit status {n})"),
                        None => "did not finish".to_owned(),
                    },
                    c.duration_ms as f64 / 1000.0
                )),
            }
        }
        for r in &self.reviews {
            // The verdict and its counts, never the reviewer's words.
            let blocking = r.blocking().count();
            lines.push(format!(
                "- **Review** of round {} by run {}: {} ({blocking} blocking, {} advisory)",
                r.round,
                r.run_id,
                r.verdict,
                r.findings.len() - blocking
            ));
        }
        if let Some(o) = self.claim.outcome {
            lines.push(format!("- **Outcome** {o}"));
        }
        let key = lines.join("\n");
        if let Some(u) = &run.usage {
            let tokens =
                u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_creation_tokens;
            lines.push(format!(
                "- **Used** {tokens} tokens, {}",
                crate::domain::compact_cost(u.cost_usd())
            ));
        }
        (lines.join("\n"), key)
    }
}

/// A pull request description with `receipt` as lab's part: what stands
/// before lab's marker in `body` (all of it, when it has none) is kept.
pub fn with_receipt(body: &str, receipt: &str) -> String {
    let kept = body.split(MARKER).next().unwrap_or("").trim_end();
    if kept.is_empty() {
        format!("{MARKER}\n{receipt}\n")
    } else {
        format!("{kept}\n\n{MARKER}\n{receipt}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_keeps_what_stands_before_lab_s_part() {
        let first = with_receipt("What I did.", "R1");
        assert_eq!(first, format!("What I did.\n\n{MARKER}\nR1\n"));
        let edited = first.replace("What I did.", "What I did, and a person's note.");
        assert_eq!(
            with_receipt(&edited, "R2"),
            format!("What I did, and a person's note.\n\n{MARKER}\nR2\n")
        );
        assert_eq!(with_receipt("", "R"), format!("{MARKER}\nR\n"));
    }
}
