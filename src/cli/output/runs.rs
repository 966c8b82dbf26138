//! How labctl shows runs: the list, one run, a start, and an AFK run's
//! receipt (the server's `RunBody` and `ReceiptBody`).

use super::{json, opt, table};
use crate::domain::{Phase, RunState, compact_cost, compact_tokens};
use crate::http::runs::{RunBody, UsageBody};

/// How long ago an RFC 3339 time was, roughly ("3m", "2h").
fn age(t: &str) -> String {
    let Ok(t) = humantime::parse_rfc3339(t) else {
        return "-".to_owned();
    };
    let secs = std::time::SystemTime::now()
        .duration_since(t)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

fn state(r: &RunBody) -> String {
    let st = match (r.state, r.exit_status, r.exit_signal) {
        (RunState::Exited, Some(code), _) => format!("exited ({code})"),
        (RunState::Exited, None, Some(sig)) => format!("exited (signal {sig})"),
        (st, _, _) => st.to_string(),
    };
    // A run outside lab's sandbox says so wherever its state is shown.
    if r.sandboxed {
        st
    } else {
        format!("{st} UNSANDBOXED")
    }
}

/// What a live run's agent is doing and for how long (`waiting 2m`), from
/// its CLI's hooks; `-` when unknown or ended.
fn agent(r: &RunBody) -> String {
    match &r.agent_state {
        Some(a) if r.ended_at.is_none() => format!("{} {}", a.state, age(&a.since)),
        _ => "-".to_owned(),
    }
}

/// Whether a run's CLI retries a model API that does not answer.
fn retrying(r: &RunBody) -> bool {
    r.agent_state
        .as_ref()
        .is_some_and(|a| a.state == crate::domain::AgentState::Retrying)
}

pub fn runs(v: &[RunBody], as_json: bool, all: bool) {
    if as_json {
        return json(v);
    }
    let rows: Vec<Vec<String>> = v
        .iter()
        .map(|r| {
            vec![
                r.id.to_string(),
                r.repo.clone(),
                r.kind.to_string(),
                issue_cell(r),
                state(r),
                agent(r),
                r.model.value.clone(),
                r.effort.value.clone(),
                r.node.clone(),
                age(&r.created_at),
                usage_cell(r.usage.as_ref()),
                match &r.state_reason {
                    // A running run's reason is its CLI's retries.
                    Some(why) if r.state != RunState::Running || retrying(r) => why.clone(),
                    _ => r.session.clone(),
                },
            ]
        })
        .collect();
    if rows.is_empty() {
        println!(
            "{}",
            if all {
                "no runs yet: labctl start REPO"
            } else {
                "no live runs (labctl ps --all shows ended ones)"
            }
        );
        return;
    }
    table(
        &[
            "ID",
            "REPO",
            "KIND",
            "ISSUE",
            "STATE",
            "AGENT",
            "MODEL",
            "EFFORT",
            "NODE",
            "AGE",
            "TOKENS/COST",
            "SESSION / REASON",
        ],
        &rows,
    );
}

/// A run's issue, attempt, round and outcome in one cell: `#12 a2 r3
/// pr-green`; `-` for a run without an issue.
fn issue_cell(r: &RunBody) -> String {
    let Some(i) = &r.issue else {
        return "-".to_owned();
    };
    let mut cell = format!("#{}", i.number);
    if r.attempt > 1 {
        cell.push_str(&format!(" a{}", r.attempt));
    }
    if r.round > 1 {
        cell.push_str(&format!(" r{}", r.round));
    }
    if let Some(o) = r.outcome {
        cell.push_str(&format!(" {o}"));
    }
    // Working and done go without saying (the state says them).
    if !matches!(r.phase, Phase::Working | Phase::Done) {
        cell.push_str(&format!(" {}", r.phase));
    }
    cell
}

/// A run's usage in one cell: every token, and the cost (`?` when a model
/// has no price); `-` until known.
fn usage_cell(u: Option<&UsageBody>) -> String {
    let Some(u) = u else {
        return "-".to_owned();
    };
    let tokens = u
        .input_tokens
        .saturating_add(u.output_tokens)
        .saturating_add(u.cache_read_tokens)
        .saturating_add(u.cache_creation_tokens);
    format!("{}/{}", compact_tokens(tokens), compact_cost(u.cost_usd))
}

/// An AFK run's receipt (`labctl receipt`): its facts, then one line per
/// round and per check.
pub fn receipt(r: &crate::http::receipt::ReceiptBody, as_json: bool) {
    if as_json {
        return json(r);
    }
    let rows = r.facts();
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in &rows {
        println!("{k:width$}  {v}");
    }
    println!();
    let rounds: Vec<Vec<String>> = r
        .rounds
        .iter()
        .map(|x| vec![x.round.to_string(), x.cause.to_string(), x.at.clone()])
        .collect();
    table(&["ROUND", "CAUSE", "AT"], &rounds);
    if !r.checks.is_empty() {
        println!();
        let checks: Vec<Vec<String>> = r
            .checks
            .iter()
            .map(|c| {
                vec![
                    c.round.to_string(),
                    c.command.clone(),
                    c.status.map_or("-".to_owned(), |s| s.to_string()),
                    format!("{:.1} s", c.duration_ms as f64 / 1000.0),
                ]
            })
            .collect();
        table(&["ROUND", "CHECK", "STATUS", "TOOK"], &checks);
    }
}

/// One run, field by field (`labctl show`).
pub fn run_detail(r: &RunBody, as_json: bool) {
    if as_json {
        return json(r);
    }
    let mut rows = vec![
        ("run", r.id.to_string()),
        ("repo", r.repo.clone()),
        ("kind", r.kind.to_string()),
        ("state", state(r)),
        ("phase", r.phase.to_string()),
        ("reason", opt(&r.state_reason)),
        ("provider", r.provider.clone()),
        ("model", r.model.value.clone()),
        ("effort", r.effort.value.clone()),
        ("branch", opt(&r.branch)),
        ("workspace", opt(&r.workspace)),
        ("session", r.session.clone()),
        ("cli session", opt(&r.cli_session_id)),
        (
            "issue",
            match &r.issue {
                None => "-".to_owned(),
                Some(i) => format!("{}#{} {} ({})", i.repo, i.number, i.title, opt(&i.url)),
            },
        ),
        ("attempt", r.attempt.to_string()),
        ("round", r.round.to_string()),
        ("outcome", opt(&r.outcome)),
        ("created", r.created_at.clone()),
        ("ended", opt(&r.ended_at)),
    ];
    match &r.usage {
        None => rows.push(("usage", "not known yet".to_owned())),
        Some(u) => {
            rows.extend([
                ("input tokens", u.input_tokens.to_string()),
                ("output tokens", u.output_tokens.to_string()),
                ("cache read", u.cache_read_tokens.to_string()),
                ("cache written", u.cache_creation_tokens.to_string()),
                ("turns", u.turns.to_string()),
                (
                    "cost",
                    match u.cost_usd {
                        Some(c) => format!("${c:.4}"),
                        None => "unknown (a model without a price)".to_owned(),
                    },
                ),
            ]);
            if u.unpriced_tokens > 0 {
                rows.push((
                    "unpriced",
                    format!(
                        "{} tokens of models lab has no price for (not in the cost)",
                        u.unpriced_tokens
                    ),
                ));
            }
        }
    }
    for (k, v) in rows {
        println!("{k:<14} {v}");
    }
}

pub fn run_started(r: &RunBody) {
    println!(
        "run {} of {}: {} ({} {}, {})",
        r.id,
        r.repo,
        state(r),
        r.model.value,
        r.effort.value,
        opt(&r.branch)
    );
    if r.state == RunState::Running {
        println!(
            "  attach: labctl attach {}   (or {})",
            r.id, r.attach_command
        );
        println!("  output: labctl logs -f {}", r.id);
    }
}
