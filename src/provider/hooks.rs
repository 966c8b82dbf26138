//! What a CLI's hook payload says about its agent (ADR 13), and how the
//! hooks are put on its command line. Pure: payloads in, signals out.
//!
//! Formats, as checked against the pinned CLIs:
//! - Claude Code 2.1.332: every hook gets a JSON object on stdin with
//!   `session_id`, `transcript_path`, `cwd` and `hook_event_name`;
//!   `UserPromptSubmit` adds `prompt`, `SessionStart` `source`,
//!   `Notification` `message`, `title` and `notification_type`,
//!   `StopFailure` `error`, `Stop` `background_tasks` (a list of
//!   `{id, type, status, description, …}`: shells, sub-agents, monitors,
//!   workflows still running or pending; empty when nothing is in flight),
//!   `PermissionRequest` `tool_name` and `tool_input` (sent as the question
//!   shows, where the permission `Notification` comes about 6 s later).
//!   (The binary's own hook-input builders, and
//!   <https://code.claude.com/docs/en/hooks>.)
//! - Codex 0.171.0: the `notify` program gets one JSON argument,
//!   `{"type": "agent-turn-complete", "thread-id", "turn-id", "cwd",
//!   "input-messages", "last-assistant-message"}` (`UserNotification` in
//!   `codex-rs/core/src/user_notification.rs`).

use serde_json::Value;

/// What one hook event says about the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// A turn is under way.
    Working,
    /// It asks a person; the question.
    Waiting(String),
    /// The turn ended and nothing is asked; why, when it ended on an error.
    Idle(Option<String>),
    /// The session (re)started: idle, unless lab already knows better (a run
    /// started with a prompt is working from its start).
    Started,
}

/// The Claude Code hook events lab installs, each of which maps to a signal.
pub const CLAUDE_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PostToolUse",
    "Notification",
    "PermissionRequest",
    "Stop",
    "StopFailure",
];

/// Seconds Claude Code gives a hook of lab's (labctl gives up after 2).
pub const CLAUDE_HOOK_TIMEOUT: u64 = 10;

/// Notification types that mean "a person must answer" (2.1.332's list:
/// `permission_prompt`, `idle_prompt`, `auth_success`, `elicitation_dialog`,
/// `agent_needs_input`, `elicitation_url_dialog`,
/// `worker_permission_prompt`, …).
const ASKING: &[&str] = &[
    "permission_prompt",
    "elicitation_dialog",
    "elicitation_url_dialog",
    "agent_needs_input",
    "worker_permission_prompt",
];

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A Claude Code hook payload's signal; `None` for events that say nothing
/// about waiting or working (and for events lab does not know).
pub fn claude(payload: &Value) -> Option<Signal> {
    match text(payload, "hook_event_name") {
        "SessionStart" => Some(Signal::Started),
        "UserPromptSubmit" | "PostToolUse" => Some(Signal::Working),
        // A turn that ends while background shells or sub-agents still
        // work is not the agent's end: it goes on when they report.
        "Stop" if in_flight(payload) > 0 => Some(Signal::Working),
        "Stop" => Some(Signal::Idle(None)),
        "PermissionRequest" => {
            let tool = match text(payload, "tool_name") {
                "" => "a tool",
                t => t,
            };
            Some(Signal::Waiting(format!(
                "Claude needs your permission to use {tool}"
            )))
        }
        "StopFailure" => Some(Signal::Idle(Some(format!(
            "the turn ended on an error: {}",
            match text(payload, "error") {
                "" => "unknown",
                e => e,
            }
        )))),
        "Notification" => {
            let kind = text(payload, "notification_type");
            if kind == "idle_prompt" {
                // "Claude is waiting for your input": the turn is over and
                // nothing was asked, which is idle.
                Some(Signal::Idle(None))
            } else if ASKING.contains(&kind) {
                let message = match text(payload, "message") {
                    "" => text(payload, "title"),
                    m => m,
                };
                Some(Signal::Waiting(if message.is_empty() {
                    kind.replace('_', " ")
                } else {
                    message.to_owned()
                }))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// How many background tasks a `Stop` says are still running or pending.
fn in_flight(payload: &Value) -> usize {
    payload
        .get("background_tasks")
        .and_then(Value::as_array)
        .map_or(0, |tasks| {
            tasks
                .iter()
                .filter(|t| {
                    matches!(
                        t.get("status").and_then(Value::as_str),
                        Some("running" | "pending") | None
                    )
                })
                .count()
        })
}

/// A Codex `notify` payload's signal.
pub fn codex(payload: &Value) -> Option<Signal> {
    match text(payload, "type") {
        "agent-turn-complete" => Some(Signal::Idle(None)),
        _ => None,
    }
}

/// `argv` as one `sh` command line (Claude Code runs a hook's `command`
/// through a shell): every word single-quoted.
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `hooks` settings that run `command` on each of [`CLAUDE_EVENTS`].
pub fn claude_hooks(command: &[String]) -> Value {
    let entry = serde_json::json!([{
        "hooks": [{
            "type": "command",
            "command": shell_words(command),
            "timeout": CLAUDE_HOOK_TIMEOUT,
        }]
    }]);
    Value::Object(
        CLAUDE_EVENTS
            .iter()
            .map(|e| ((*e).to_owned(), entry.clone()))
            .collect(),
    )
}

/// Claude Code's tools that write a file, each naming it in its input's
/// `file_path` (`NotebookEdit`: `notebook_path`), as 2.1.332 calls them.
/// A shell command's writes are not seen here: lab's check of the branch
/// catches those.
pub const CLAUDE_WRITE_TOOLS: &str = "Write|Edit|MultiEdit|NotebookEdit";

/// The `PreToolUse` hook that refuses a write outside `writes` as it is
/// tried (issue 28 §4): `labctl writes-hook --root ROOT -- GLOB…`, run by
/// the labctl of `command` (`command[0]`) on [`CLAUDE_WRITE_TOOLS`]. It
/// answers Claude Code's `permissionDecision: "deny"` with a reason that
/// names the path and the globs, which the model reads and retries within
/// scope. `None` when there is no scope (or no labctl).
pub fn claude_writes_hook(command: &[String], root: &str, writes: &[String]) -> Option<Value> {
    if writes.is_empty() {
        return None;
    }
    let mut argv = vec![
        command.first()?.clone(),
        "writes-hook".to_owned(),
        "--root".to_owned(),
        root.to_owned(),
        "--".to_owned(),
    ];
    argv.extend(writes.iter().cloned());
    Some(serde_json::json!([{
        "matcher": CLAUDE_WRITE_TOOLS,
        "hooks": [{
            "type": "command",
            "command": shell_words(&argv),
            "timeout": CLAUDE_HOOK_TIMEOUT,
        }]
    }]))
}

/// Codex's `-c notify=[…]` override: a TOML array of strings (a JSON array
/// of strings is one).
pub fn codex_notify(command: &[String]) -> String {
    format!(
        "notify={}",
        serde_json::to_string(command).unwrap_or_else(|_| "[]".into())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Payloads in the pinned CLIs' own shapes (fields as their hook-input
    /// builders write them).
    #[test]
    fn claude_payloads_map_to_signals() {
        let base = |event: &str| {
            json!({
                "session_id": "2b0c6f0e-5d0a-4f43-9d0f-1d7e3f6b9a11",
                "transcript_path": "/home/u/.claude/projects/-w/2b0c6f0e.jsonl",
                "cwd": "/w",
                "permission_mode": "default",
                "hook_event_name": event,
            })
        };
        let with = |event: &str, extra: Value| {
            let mut v = base(event);
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            v
        };
        let table = [
            (
                with(
                    "SessionStart",
                    json!({"source": "startup", "model": "sonnet"}),
                ),
                Some(Signal::Started),
            ),
            (
                with("UserPromptSubmit", json!({"prompt": "fix the tests"})),
                Some(Signal::Working),
            ),
            (
                with(
                    "PostToolUse",
                    json!({"tool_name": "Bash", "tool_input": {}, "tool_response": {}}),
                ),
                Some(Signal::Working),
            ),
            (
                with(
                    "Stop",
                    json!({"stop_hook_active": false, "last_assistant_message": "done"}),
                ),
                Some(Signal::Idle(None)),
            ),
            (
                with(
                    "Stop",
                    json!({"stop_hook_active": false, "background_tasks": []}),
                ),
                Some(Signal::Idle(None)),
            ),
            (
                // 2.1.332's shape: a shell and a sub-agent still at work.
                with(
                    "Stop",
                    json!({"stop_hook_active": false, "background_tasks": [
                        {"id": "b1", "type": "shell", "status": "running",
                         "description": "cargo test", "command": "cargo test"},
                        {"id": "a2", "type": "subagent", "status": "pending",
                         "description": "review", "agent_type": "general-purpose"}
                    ]}),
                ),
                Some(Signal::Working),
            ),
            (
                with(
                    "PermissionRequest",
                    json!({"tool_name": "Bash", "tool_input": {"command": "rm -rf x"},
                           "permission_suggestions": []}),
                ),
                Some(Signal::Waiting(
                    "Claude needs your permission to use Bash".into(),
                )),
            ),
            (
                with("StopFailure", json!({"error": "rate_limit"})),
                Some(Signal::Idle(Some(
                    "the turn ended on an error: rate_limit".into(),
                ))),
            ),
            (
                with(
                    "Notification",
                    json!({"message": "Claude needs your permission to use Bash",
                           "title": "Permission needed", "notification_type": "permission_prompt"}),
                ),
                Some(Signal::Waiting(
                    "Claude needs your permission to use Bash".into(),
                )),
            ),
            (
                with(
                    "Notification",
                    json!({"message": "", "title": "Claude has a question", "notification_type": "elicitation_dialog"}),
                ),
                Some(Signal::Waiting("Claude has a question".into())),
            ),
            (
                with(
                    "Notification",
                    json!({"message": "Claude is waiting for your input", "notification_type": "idle_prompt"}),
                ),
                Some(Signal::Idle(None)),
            ),
            (
                with(
                    "Notification",
                    json!({"message": "Logged in", "notification_type": "auth_success"}),
                ),
                None,
            ),
            (with("SessionEnd", json!({"reason": "exit"})), None),
            (with("SomethingNew", json!({})), None),
            (json!({"no": "event"}), None),
        ];
        for (payload, want) in table {
            assert_eq!(claude(&payload), want, "{payload}");
        }
    }

    /// `UserNotification::AgentTurnComplete` as Codex serialises it.
    #[test]
    fn codex_notify_payloads_map_to_signals() {
        let done = json!({
            "type": "agent-turn-complete",
            "thread-id": "b5f6c1c2-1111-2222-3333-444455556666",
            "turn-id": "12345",
            "cwd": "/w",
            "input-messages": ["Rename `foo` to `bar`."],
            "last-assistant-message": "Rename complete."
        });
        assert_eq!(codex(&done), Some(Signal::Idle(None)));
        assert_eq!(codex(&json!({"type": "agent-turn-start"})), None);
        assert_eq!(codex(&json!({})), None);
    }

    #[test]
    fn hook_commands_are_quoted_for_a_shell_and_for_toml() {
        let argv: Vec<String> = vec!["/opt/it's lab/labctl".into(), "hook".into(), "codex".into()];
        assert_eq!(
            shell_words(&argv),
            r#"'/opt/it'\''s lab/labctl' 'hook' 'codex'"#
        );
        assert_eq!(
            codex_notify(&argv),
            r#"notify=["/opt/it's lab/labctl","hook","codex"]"#
        );
        let hooks = claude_hooks(&argv);
        assert_eq!(hooks.as_object().unwrap().len(), CLAUDE_EVENTS.len());
        assert_eq!(hooks["Stop"][0]["hooks"][0]["type"], "command");
    }
}
