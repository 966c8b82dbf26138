//! `GET /api/v1/runs/{id}/receipt`: an AFK run's receipt (issue 28 §5),
//! the body `labctl` and the checks outside read. Built by
//! `service::receipt`; this module only shapes it.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, ErrorBody};
use super::extract::ApiPath;
use super::knobs::SourcedKnobBody;
use super::runs::{RunIssueBody, UsageBody};
use crate::domain::{Outcome, Phase, RoundCause, Sourced, Step, rfc3339};
use crate::service::receipt::{self, Receipt};
use crate::state::AppState;

/// What lab knows of the work behind an AFK run's pull request, written by
/// lab, never by the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReceiptBody {
    pub run_id: i64,
    pub repo: String,
    /// The issue it worked on.
    pub issue: Option<RunIssueBody>,
    /// Its pull request, once opened.
    pub pull_request: Option<PullRef>,
    #[schema(schema_with = super::schema::provider_id)]
    pub provider: String,
    pub model: Sourced,
    pub effort: Sourced,
    pub options: BTreeMap<String, Sourced>,
    /// Its knobs, each with where its value came from.
    pub knobs: Vec<SourcedKnobBody>,
    /// Each round: the first is the issue's, each next one what lab sent
    /// the agent back for (`check`, `forge-check`, `review`, `scope`,
    /// `conflict`).
    pub rounds: Vec<ReceiptRound>,
    /// Each run of the repo's check command.
    pub checks: Vec<ReceiptCheck>,
    /// The run's scope, checked now on its branch as lab's repo holds it.
    pub scope: ScopeBody,
    /// The plan its work followed, when its issue was planned first.
    pub plan: Option<ReceiptPlan>,
    /// Each review run's verdict on its pull request (issue 28 §3): lab's
    /// counts, the findings themselves are at `…/issues/{n}/reviews`.
    pub reviews: Vec<ReceiptReview>,
    /// Which attempt at the issue it is.
    pub attempt: i64,
    /// Tokens and cost, from its CLI's transcript.
    pub usage: Option<UsageBody>,
    pub phase: Phase,
    pub outcome: Option<Outcome>,
    /// What lab said of the outcome on the issue.
    pub outcome_detail: Option<String>,
}

/// The approved plan behind a run's work: its version, who approved it,
/// and how many versions were rejected before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReceiptPlan {
    pub version: i64,
    pub approved_by: String,
    pub approved_at: String,
    pub rejected_versions: u64,
}

/// One review run's verdict, as the receipt counts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReceiptReview {
    pub round: i64,
    pub run_id: i64,
    pub verdict: crate::domain::Verdict,
    pub blocking: u64,
    pub advisory: u64,
    /// When it was submitted (RFC 3339).
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PullRef {
    pub url: String,
    pub number: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReceiptRound {
    pub round: i64,
    pub cause: RoundCause,
    /// When it started (RFC 3339).
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReceiptCheck {
    /// The round it checked.
    pub round: i64,
    pub command: String,
    /// Its exit status; `null` when it did not exit on its own.
    pub status: Option<i32>,
    pub duration_ms: i64,
    /// The end of what it printed (at most 2 KiB).
    pub output_tail: String,
    /// When it ended (RFC 3339).
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScopeBody {
    /// The run's `writes` globs; `[]` is unrestricted.
    pub writes: Vec<String>,
    /// `unrestricted`, `in-scope`, `outside` or `not-read` (the branch is
    /// not in lab's repo yet).
    pub state: String,
    /// How many changed paths are outside it (`outside` only; the paths
    /// are on the run's page).
    pub outside: Option<u64>,
}

impl From<Receipt> for ReceiptBody {
    fn from(r: Receipt) -> Self {
        let plan = r.approved_plan().map(|p| ReceiptPlan {
            version: p.version,
            approved_by: p.by(),
            approved_at: rfc3339(p.at()),
            rejected_versions: r.rejected_plans() as u64,
        });
        let rounds = r
            .rounds()
            .into_iter()
            .map(|(round, cause, at)| ReceiptRound {
                round,
                cause,
                at: rfc3339(at),
            })
            .collect();
        let Receipt {
            run,
            claim,
            steps,
            scope,
            plans: _,
            reviews,
        } = r;
        let reviews = reviews
            .iter()
            .map(|v| {
                let blocking = v.blocking().count() as u64;
                ReceiptReview {
                    round: v.round,
                    run_id: v.run_id,
                    verdict: v.verdict,
                    blocking,
                    advisory: v.findings.len() as u64 - blocking,
                    at: rfc3339(v.created_at),
                }
            })
            .collect();

        let mut checks = Vec::new();
        for (at, step) in steps {
            match step {
                Step::Round(_) => {}
                Step::Check(c) => checks.push(ReceiptCheck {
                    round: c.round,
                    command: c.command,
                    status: c.status,
                    duration_ms: c.duration_ms,
                    output_tail: c.output_tail,
                    at: rfc3339(at),
                }),
            }
        }
        let outside = match &scope {
            receipt::ScopeCheck::Outside { count, .. } => Some(*count as u64),
            _ => None,
        };
        ReceiptBody {
            run_id: run.id,
            phase: run.phase(),
            issue: run.issue.map(|i| RunIssueBody {
                repo: run.repo_name.clone(),
                number: i.number,
                title: i.title,
                url: i.url,
            }),
            repo: run.repo_name,
            pull_request: claim.pr_url.map(|url| PullRef {
                url,
                number: claim.pr_number,
            }),
            provider: run.provider,
            model: run.model,
            effort: run.effort,
            options: run.options,
            knobs: run.knobs.into_iter().map(Into::into).collect(),
            rounds,
            checks,
            scope: ScopeBody {
                writes: scope.globs().to_vec(),
                state: scope.state().to_owned(),
                outside,
            },
            plan,
            reviews,
            attempt: claim.attempt,
            usage: run.usage.as_ref().map(UsageBody::from),
            outcome: claim.outcome,
            outcome_detail: claim.detail,
        }
    }
}

impl ReceiptBody {
    /// The receipt's facts as `(label, value)` rows, in the words labctl
    /// and the pull request's page both print: the issue and its pull
    /// request, the resolved values and knobs with where each came from,
    /// the plan, the scope, the attempt, what it used, each review's
    /// verdict, the outcome. lab's words and the operator's settings only.
    pub fn facts(&self) -> Vec<(String, String)> {
        let mut rows = vec![
            ("run".to_owned(), self.run_id.to_string()),
            (
                "issue".to_owned(),
                self.issue.as_ref().map_or("-".to_owned(), |i| {
                    format!("{}#{} {}", i.repo, i.number, i.title)
                }),
            ),
            (
                "pull request".to_owned(),
                self.pull_request
                    .as_ref()
                    .map_or("-".to_owned(), |p| p.url.clone()),
            ),
            ("provider".to_owned(), self.provider.clone()),
            (
                "model".to_owned(),
                format!("{} (from {})", self.model.value, self.model.layer),
            ),
            (
                "effort".to_owned(),
                format!("{} (from {})", self.effort.value, self.effort.layer),
            ),
        ];
        for k in &self.knobs {
            rows.push((
                format!("knob {}", k.key),
                format!("{} (from {})", k.value.shown(), k.source.as_str()),
            ));
        }
        rows.push((
            "plan".to_owned(),
            match &self.plan {
                None => "none (the issue was not planned first)".to_owned(),
                Some(p) => format!(
                    "version {} approved by {} at {}{}",
                    p.version,
                    p.approved_by,
                    p.approved_at,
                    match p.rejected_versions {
                        0 => String::new(),
                        n => format!(", after {n} rejected version(s)"),
                    }
                ),
            },
        ));
        let scope = match self.scope.outside {
            Some(n) => format!("{n} path(s) outside {}", self.scope.writes.join(", ")),
            None if self.scope.writes.is_empty() => "unrestricted".to_owned(),
            None => format!("{} ({})", self.scope.state, self.scope.writes.join(", ")),
        };
        rows.push(("scope".to_owned(), scope));
        rows.push(("attempt".to_owned(), self.attempt.to_string()));
        rows.push(("phase".to_owned(), self.phase.to_string()));
        rows.push((
            "used".to_owned(),
            match &self.usage {
                None => "not known yet".to_owned(),
                Some(u) => format!(
                    "{} tokens, {}, {} turn(s)",
                    u.input_tokens
                        + u.output_tokens
                        + u.cache_read_tokens
                        + u.cache_creation_tokens,
                    crate::domain::compact_cost(u.cost_usd),
                    u.turns
                ),
            },
        ));
        if self.reviews.is_empty() {
            rows.push(("reviews".to_owned(), "none".to_owned()));
        }
        for r in &self.reviews {
            rows.push((
                format!("review of round {}", r.round),
                format!(
                    "{} by run {} ({} blocking, {} advisory) at {}",
                    r.verdict, r.run_id, r.blocking, r.advisory, r.at
                ),
            ));
        }
        rows.push((
            "outcome".to_owned(),
            self.outcome.map_or("-".to_owned(), |o| o.to_string()),
        ));
        rows
    }
}

/// An AFK run's receipt: its issue, knobs and resolved values with where
/// each came from, each round and what started it, each check lab ran, its
/// scope checked now, its attempt, tokens and cost, and its outcome.
#[utoipa::path(get, path = "/runs/{id}/receipt", tag = "runs", params(("id" = i64, Path)),
    responses((status = 200, body = ReceiptBody),
              (status = 404, body = ErrorBody),
              (status = 409, description = "The run is a manual run: it has no receipt", body = ErrorBody)))]
async fn run_receipt(
    State(app): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<ReceiptBody>> {
    let id = super::runs::run_id(&id)?;
    Ok(Json(
        receipt::of_run(app.scheduler.runner(), id).await?.into(),
    ))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(run_receipt))
}
