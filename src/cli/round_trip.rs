//! labctl reads lab's answers as the server's own body types and prints
//! `--json` by serialising what it decoded. These tests fail when a body
//! type stops round-tripping: when what the server serialises cannot be
//! decoded again, or decodes into something that prints differently.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::client::decode;
use crate::diff::{Diff, FileDiff, FileStatus};
use crate::domain::{AgentState, Layer, Outcome, RunKind, RunState, Sourced, StopCause};
use crate::http::agent::AgentStateBody;
use crate::http::error::{ErrorBody, ErrorDetail};
use crate::http::providers::ProviderBody;
use crate::http::runs::{LimitsBody, RunBody, RunIssueBody, UsageBody};
use crate::http::screen::{Cursor, ScreenBody};
use crate::issues::PullRequest;
use crate::service::pulls::{MergeDone, PullView};
use crate::validate::FieldError;

/// What the server sends for `body`, decoded as labctl decodes it and
/// printed again as `--json` prints it, is what the server sent.
#[track_caller]
fn round_trips<T: Serialize + DeserializeOwned>(body: &T) {
    let sent = serde_json::to_vec(body).expect("the server serialises it");
    let read: T = decode(&sent).unwrap_or_else(|e| {
        panic!(
            "labctl cannot read what lab sends: {e}\n{}",
            String::from_utf8_lossy(&sent)
        )
    });
    assert_eq!(
        serde_json::to_string_pretty(&read).expect("labctl prints it"),
        serde_json::to_string_pretty(
            &serde_json::from_slice::<serde_json::Value>(&sent).expect("JSON")
        )
        .expect("JSON"),
        "--json would print something else than lab sent"
    );
}

fn sourced(value: &str, layer: Layer) -> Sourced {
    Sourced {
        value: value.to_owned(),
        layer,
    }
}

/// A run with every optional part present, or every one absent.
fn run(full: bool) -> RunBody {
    let some = |s: &str| full.then(|| s.to_owned());
    RunBody {
        id: 7,
        kind: if full { RunKind::Afk } else { RunKind::Manual },
        repo: "web".into(),
        repo_id: full.then_some(3),
        provider: "claude-code".into(),
        model: sourced("opus", Layer::RepoAfk),
        effort: sourced("high", Layer::Request),
        options: if full {
            BTreeMap::from([("ultracode".to_owned(), sourced("true", Layer::GlobalAfk))])
        } else {
            BTreeMap::new()
        },
        prompt: "do it".into(),
        phase: if full {
            crate::domain::Phase::Done
        } else {
            crate::domain::Phase::Working
        },
        state: if full {
            RunState::Exited
        } else {
            RunState::Running
        },
        state_reason: some("the agent ended"),
        node: "n1".into(),
        session: "lab-7".into(),
        tmux_socket: "/tmp/lab/tmux".into(),
        attach_command: "tmux -S /tmp/lab/tmux attach -t =lab-7".into(),
        workspace: some("/data/ws/7"),
        workspace_removed: full,
        branch: some("lab/7"),
        log_path: some("/data/logs/7.log"),
        pid: full.then_some(4242),
        exit_status: full.then_some(0),
        exit_signal: None,
        sandboxed: !full,
        limits: LimitsBody {
            memory_max_mb: full.then_some(2048),
            pids_max: None,
        },
        log_dropped_bytes: 12,
        workspace_bytes: full.then_some(1 << 20),
        stop_cause: full.then_some(StopCause::TimeLimit),
        agent_state: full.then(|| AgentStateBody {
            state: AgentState::Waiting,
            reason: Some("May I?".into()),
            since: "2026-01-02T03:04:05.678Z".into(),
        }),
        created_at: "2026-01-02T03:04:05.678Z".into(),
        started_at: some("2026-01-02T03:04:06.000Z"),
        ended_at: some("2026-01-02T04:04:06.000Z"),
        cli_session_id: some("b7c1"),
        usage: full.then_some(UsageBody {
            input_tokens: 1200,
            output_tokens: 340,
            cache_read_tokens: 50_000,
            cache_creation_tokens: 7,
            turns: 3,
            cost_usd: Some(0.25),
            unpriced_tokens: 0,
        }),
        issue: full.then(|| RunIssueBody {
            repo: "web".into(),
            number: 12,
            title: "Add dark mode".into(),
            url: None,
        }),
        attempt: 2,
        round: 1,
        knobs: vec![crate::http::knobs::SourcedKnobBody {
            key: "changeScope".into(),
            value: crate::knob::Value::Text("surgical".into()),
            source: crate::knob::Source::Issue,
        }],
        outcome: full.then_some(Outcome::PrGreen),
    }
}

#[test]
fn a_run_round_trips() {
    round_trips(&run(true));
    round_trips(&run(false));
    round_trips(&vec![run(true), run(false)]);
}

fn pull() -> PullView {
    PullView {
        pull: PullRequest {
            number: 1,
            title: "Work".into(),
            body: "Resolves #12".into(),
            url: "http://lab/repos/web/pulls/1".into(),
            api_url: None,
            head: "lab/7".into(),
            base: "main".into(),
            state: "open".into(),
            issue: Some(12),
            run_id: Some(7),
        },
        merged_sha: None,
        merged_at: None,
        diff: Some(Diff {
            base: "a1".into(),
            head: "b2".into(),
            work_tree: false,
            files: vec![FileDiff {
                path: "new.txt".into(),
                old_path: Some("old.txt".into()),
                status: FileStatus::Renamed,
                added: 1,
                removed: 0,
                binary: false,
                patch: "@@ -0,0 +1 @@\n+new\n".into(),
                truncated: false,
            }],
            truncated: false,
        }),
        diff_error: None,
    }
}

/// A pull request's fields are flattened into its view.
#[test]
fn a_pull_request_and_a_merge_round_trip() {
    round_trips(&pull());
    round_trips(&MergeDone {
        sha: "c3".into(),
        fast_forward: true,
        pull: pull(),
    });
}

/// Fields the server leaves out when empty stay out.
#[test]
fn bodies_with_fields_left_out_round_trip() {
    round_trips(&ScreenBody {
        run: 7,
        state: RunState::Waiting,
        rows: 40,
        cols: 120,
        text: Some("$ ".into()),
        html: None,
        ansi: None,
        history: 0,
        cursor: Cursor {
            row: 0,
            col: 2,
            visible: true,
        },
        offset: 99,
    });
    round_trips(&ErrorBody {
        error: ErrorDetail {
            code: "invalid".into(),
            message: "unknown model 'x'".into(),
            field: None,
            value: None,
            allowed: None,
            errors: Vec::new(),
        },
    });
    round_trips(&ErrorBody {
        error: ErrorDetail {
            code: "invalid".into(),
            message: "unknown model 'x'".into(),
            field: Some("model_default".into()),
            value: Some("x".into()),
            allowed: Some(vec!["opus".into()]),
            errors: vec![
                FieldError::new("model_default", "unknown model 'x'")
                    .with_value("x")
                    .with_allowed(&["opus"]),
            ],
        },
    });
}

#[test]
fn every_provider_round_trips() {
    let all: Vec<ProviderBody> = crate::provider::all()
        .iter()
        .map(|p| ProviderBody::from(*p))
        .collect();
    assert!(!all.is_empty());
    round_trips(&all);
}

/// Answers written as lab writes them, for the bodies built from the
/// store: labctl decodes each and prints it back unchanged.
#[test]
fn answers_as_lab_writes_them_round_trip() {
    #[track_caller]
    fn same<T: Serialize + DeserializeOwned>(text: &str) {
        let v: serde_json::Value = serde_json::from_str(text).expect("JSON");
        round_trips(&decode::<T>(text.as_bytes()).expect("labctl reads it"));
        let read: T = decode(text.as_bytes()).expect("labctl reads it");
        assert_eq!(serde_json::to_value(&read).expect("JSON"), v);
    }
    same::<crate::http::settings::SettingsBody>(
        r#"{"providers": {"claude-code": {"model_default": "opus", "effort_default": null,
            "afk_model_default": null, "afk_effort_default": null, "afk_options": {"ultracode": "true"},
            "plan_model_default": "haiku", "plan_effort_default": null, "plan_options": {},
            "review_model_default": null, "review_effort_default": "low", "review_options": {"ultracode": "false"}}},
          "afk": {"max_concurrent": 2, "tick_seconds": 30, "run_timeout_minutes": 60, "max_rounds": 3,
            "max_plan_rounds": 2, "max_attempts": 2, "max_tokens": null, "max_cost_usd": 5.0, "memory_per_run_mb": 0},
          "runs": {"workspace_retention_hours": null, "allow_unsandboxed": false, "memory_max_mb": 4096,
            "pids_max": null, "log_max_mb": 64, "carry_cli_keys": ["theme"]},
          "notifications": [{"kind": "ntfy", "url": "https://ntfy.sh/…abcd",
            "events": ["waiting", "failed"], "token_set": true}],
          "knobs": {"changeScope": "surgical", "writes": ["src/**"]},
          "plan_provider": null, "review_provider": "codex"}"#,
    );
    same::<crate::http::repos::RepoBody>(
        r#"{"id": 1, "name": "web", "path": "/src/web", "url": null, "default_branch": "main",
          "provider": "claude-code", "model_default": "opus", "effort_default": null,
          "afk_model_default": null, "afk_effort_default": null, "afk_options": {},
          "plan_provider": null, "plan_model_default": "haiku", "plan_effort_default": null,
          "plan_options": {}, "review_provider": "codex", "review_model_default": "gpt-6-luna",
          "review_effort_default": null, "review_options": {},
          "afk_enabled": true, "afk_label": "ready-for-agent", "afk_max_concurrent": 1,
          "afk_paused": false, "allow_unsandboxed": null, "check_command": null,
          "afk_max_tokens": null, "afk_max_cost_usd": 2.5, "afk_run_timeout_minutes": null,
          "memory_max_mb": null, "pids_max": null, "issue_source": "github",
          "forge_url": "https://api.github.com", "forge_repo": "o/r", "forge_token": "…1234",
          "forge_identity": {"login": "lab-bot", "is_operator": false},
          "knobs": {}, "allowed_models": ["opus"],
          "config_file": {"commit": "abc123", "error": "afk.model: unknown model", "model": "opus",
            "effort": null, "options": {}, "knobs": {"changeScope": "refactor"},
            "check_command": "make test", "label": null},
          "created_at": "2026-01-02T03:04:05.678Z", "updated_at": "2026-01-02T03:04:05.678Z"}"#,
    );
    same::<crate::http::afk::AfkStatusBody>(
        r#"{"paused": false, "live": 1, "max_concurrent": 2, "tick_seconds": 30,
          "run_timeout_minutes": 60,
          "limits": {"max_concurrent": 2, "tick_seconds": 30, "run_timeout_minutes": 60,
            "max_rounds": 3, "max_plan_rounds": 3, "max_attempts": 2, "max_tokens": 100000, "max_cost_usd": null,
            "memory_per_run_mb": 512},
          "admission": null,
          "limited": [{"provider": "claude-code", "kind": "cli", "until": "2026-01-02T03:04:05.678Z",
            "reason": "not logged in", "fix": "run claude /login"}],
          "repos": [{"repo": "web", "enabled": true, "paused": false, "label": "ready-for-agent",
            "live": 1, "max_concurrent": 1, "problem": null}],
          "recent": [{"repo": "web", "issue": 12, "run_id": 7, "node": "n1", "active": false,
            "model": "opus", "effort": "high", "pr_url": null, "pr_number": null, "outcome": "failed",
            "detail": "no can do", "attempt": 1, "rounds": 1, "retry_at": null, "checks": null}]}"#,
    );
    same::<crate::service::afk::LedgerBody>(
        r#"{"by_repo": [{"repo": "web", "model": null, "effort": null, "outcome": null, "runs": 1,
            "succeeded": 0, "failed": 1, "timed_out": 0, "stopped": 0, "rounds": 1, "retries": 0,
            "median_seconds": 12.5, "tokens": 0, "cost_usd": null, "cost_per_success_usd": null,
            "merged": 0, "cost_per_merged_usd": null}],
          "by_model": [], "by_outcome": []}"#,
    );
    same::<Vec<crate::issues::Issue>>(
        r#"[{"number": 1, "title": "Add dark mode", "body": "", "state": "open",
          "labels": ["ready-for-agent"], "url": null,
          "comments": [{"author": "lab", "body": "hi", "created_at": "2026-01-02T03:04:05Z"}],
          "knobs": {"model": "opus", "max_cost_usd": 2.5}, "author": "ann", "author_association": "MEMBER"}]"#,
    );
    same::<crate::http::status::DoctorBody>(
        r#"{"worst": "warn", "findings": [{"area": "tmux", "level": "ok", "message": "tmux 3.4"},
          {"area": "forge web", "level": "warn", "message": "m", "fix": "f",
           "permissions": [{"permission": "repo", "used_for": "u", "granted": null, "optional": true}]}]}"#,
    );
    same::<crate::http::agent::HookAnswer>(r#"{"applied": false, "agent_state": null}"#);
    same::<crate::http::afk::CliCheckBody>(
        r#"{"provider": "claude-code", "works": false, "reason": "not logged in"}"#,
    );
    same::<Vec<crate::notifications::TestSent>>(
        r#"[{"url": "https://x/…abcd", "status": 500, "error": "answered 500"}]"#,
    );
}

/// A body that lacks what the type needs is an error labctl reports, not
/// a panic; an answer without a body is `()`.
#[test]
fn what_does_not_decode_is_an_error() {
    let Err(e) = decode::<RunBody>(br#"{"id": 7}"#) else {
        panic!("a run needs its fields");
    };
    assert!(e.to_string().contains("missing field"), "{e}");
    assert!(decode::<RunBody>(b"<html>").is_err());
    decode::<()>(b"null").expect("no body is ()");
}
