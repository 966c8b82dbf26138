//! A forge's plan commands (issue 28 §2): a `/lab approve` or `/lab reject
//! <reason>` comment on an issue whose plan waits, by an account the forge
//! says may write to the repo, decides the plan in that person's name.
//!
//! Trust boundary: comments are anyone's words. Only the first line's
//! command of a writer's comment, posted after the version it decides, is
//! acted on; a rejection's reason goes to the planning run fenced as data.

use super::PlanError;
use crate::afk::Scheduler;
use crate::domain::{PlanState, Stage};
use crate::repo::Repo;
use crate::store::{Claim, StoreError};

/// A plan command in a forge comment: its first line, `/lab approve` or
/// `/lab reject <reason>` (the reason may go on over the next lines).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Command {
    Approve,
    Reject(String),
}

impl Command {
    fn parse(body: &str) -> Option<Command> {
        let body = body.trim_start();
        let first = body.lines().next()?.trim();
        let rest = first
            .strip_prefix("/lab")
            .filter(|r| r.starts_with(char::is_whitespace))?;
        let mut words = rest.split_whitespace();
        match words.next()? {
            "approve" if words.next().is_none() => Some(Command::Approve),
            "reject" => {
                let after = body.split_once("reject").map_or("", |(_, r)| r).trim();
                Some(Command::Reject(after.to_owned()))
            }
            _ => None,
        }
    }
}

impl Scheduler {
    /// A forge issue whose plan waits: a `/lab approve` or `/lab reject
    /// <reason>` comment posted since the plan, by an account that may
    /// write to the repo, decides it (the oldest such comment; read at
    /// most every `forge_poll`, as a pull request is followed). The comments are people's words; only
    /// a writer's command is acted on, and its reason goes to the planning
    /// run fenced as data.
    pub(in crate::afk) async fn plan_commands(
        &self,
        claim: &Claim,
        repo: &Repo,
    ) -> Result<(), StoreError> {
        if claim.stage != Stage::PlanReview
            || repo.issues.source == crate::repo::issue_source::SourceKind::Builtin
        {
            return Ok(());
        }
        let due = self.claims.with(claim.id, |c| match c.commands_read {
            Some(at) if at.elapsed() < self.runner.cfg().forge_poll => false,
            _ => {
                c.commands_read = Some(std::time::Instant::now());
                true
            }
        });
        if !due {
            return Ok(());
        }
        let Some(plan) = self
            .runner
            .store()
            .plans_of_claim(claim.id)
            .await?
            .into_iter()
            .rev()
            .find(|p| p.state == PlanState::Proposed)
        else {
            return Ok(());
        };
        let source = self.sources.of(repo);
        let issue = match source.issue(claim.issue_number).await {
            Ok(i) => i,
            Err(e) => {
                tracing::warn!(claim = claim.id, error = %e, "could not read the issue's comments");
                return Ok(());
            }
        };
        let mut asked = std::collections::HashMap::new();
        for c in &issue.comments {
            let posted = humantime::parse_rfc3339_weak(&c.created_at)
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as i64);
            if posted.is_none_or(|at| at < plan.created_at) {
                continue;
            }
            let Some(command) = Command::parse(&c.body) else {
                continue;
            };
            // One lookup per author and pass, however many commands they
            // posted.
            let may = match asked.get(&c.author) {
                Some(m) => Ok(*m),
                None => source.may_write(&c.author).await,
            };
            match may {
                Ok(m) => {
                    asked.insert(c.author.clone(), m);
                    if !m {
                        continue;
                    }
                }
                Err(e) => {
                    tracing::warn!(claim = claim.id, error = %e, "could not read a commenter's access");
                    return Ok(());
                }
            }
            let decided = match command {
                Command::Approve => {
                    Box::pin(self.approve_plan(repo, claim.issue_number, &c.author))
                        .await
                        .map(|_| ())
                }
                Command::Reject(reason) => {
                    Box::pin(self.reject_plan(repo, claim.issue_number, &c.author, &reason))
                        .await
                        .map(|_| ())
                }
            };
            match decided {
                Ok(()) => {
                    tracing::info!(claim = claim.id, by = %c.author, "a forge comment decided the plan");
                    return Ok(());
                }
                Err(PlanError::Store(e)) => return Err(e),
                // A reject without a reason, or decided meanwhile: the next
                // command is read.
                Err(e) => {
                    tracing::info!(claim = claim.id, error = %e, "a plan command was refused")
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Command;

    #[test]
    fn a_command_is_the_first_line_of_a_comment() {
        assert_eq!(Command::parse("/lab approve"), Some(Command::Approve));
        assert_eq!(
            Command::parse("  /lab approve  \nthanks"),
            Some(Command::Approve)
        );
        assert_eq!(
            Command::parse("/lab reject Also the docs.\nAnd tests."),
            Some(Command::Reject("Also the docs.\nAnd tests.".into()))
        );
        assert_eq!(
            Command::parse("/lab reject"),
            Some(Command::Reject(String::new()))
        );
        assert_eq!(Command::parse("/lab approve it all"), None);
        assert_eq!(Command::parse("I think /lab approve"), None);
        assert_eq!(Command::parse("/labapprove"), None);
        assert_eq!(Command::parse(""), None);
    }
}
