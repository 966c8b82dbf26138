//! The live scope check against the pinned Claude Code (issue 28 §4): the
//! `--settings` lab builds for a run with `writes` make the real CLI run
//! `labctl writes-hook` before a write, and a refusal in lab's format
//! (`permissionDecision: "deny"`) keeps the file unwritten and reaches the
//! model as the tool's error, naming the path and the globs; a write in
//! scope goes through.
//!
//! The model is a stand-in: a local server that speaks the Messages API's
//! stream and asks for two writes, one out of scope and one in it, then
//! ends the turn. Everything between it and the workspace is the real CLI.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use lab::provider::{self, SpawnSpec};

use crate::support::real;

/// The tool results the CLI sent back, in order.
type Results = Arc<Mutex<Vec<Value>>>;

#[derive(Clone)]
struct Model {
    workspace: String,
    results: Results,
}

/// One streamed answer: a `Write` of `path`, or the end of the turn.
fn stream(model: &str, write: Option<(&str, &str)>) -> String {
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    )];
    let stop = match write {
        Some((id, path)) => {
            let input = json!({"file_path": path, "content": "written\n"}).to_string();
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block":
                    {"type": "tool_use", "id": id, "name": "Write", "input": {}}}),
            ));
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta":
                    {"type": "input_json_delta", "partial_json": input}}),
            ));
            "tool_use"
        }
        None => {
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block":
                    {"type": "text", "text": ""}}),
            ));
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta":
                    {"type": "text_delta", "text": "Done."}}),
            ));
            "end_turn"
        }
    };
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 1}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events
        .into_iter()
        .map(|(e, d)| format!("event: {e}\ndata: {d}\n\n"))
        .collect()
}

/// The Messages API as far as this turn needs: the first call asks for a
/// write out of scope, the next (its result in hand) for one in scope, then
/// the turn ends. Each tool result is kept.
async fn messages(State(m): State<Model>, Json(body): Json<Value>) -> impl IntoResponse {
    let results: Vec<Value> = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|msg| msg["content"].as_array())
        .flatten()
        .filter(|c| c["type"] == "tool_result")
        .cloned()
        .collect();
    let seen = results.len();
    *m.results.lock().unwrap() = results;
    let model = body["model"].as_str().unwrap_or("claude");
    let readme = format!("{}/README.md", m.workspace);
    let in_scope = format!("{}/src/ok.rs", m.workspace);
    let text = match seen {
        0 => stream(model, Some(("toolu_out", &readme))),
        1 => stream(model, Some(("toolu_in", &in_scope))),
        _ => stream(model, None),
    };
    ([("content-type", "text/event-stream")], text)
}

fn text_of(result: &Value) -> String {
    match &result["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => other.to_string(),
    }
}

/// The `--settings` lab gives a Claude Code run with `writes = ["src/**"]`
/// in `workspace`, its hooks run by the labctl this test suite built; for
/// a planning or review run when `read_only`.
fn settings_of(workspace: &Path, read_only: bool) -> String {
    let p = provider::get("claude-code").unwrap();
    let spec = SpawnSpec {
        model: "sonnet".into(),
        effort: "low".into(),
        working_dir: workspace.to_path_buf(),
        hook_command: Some(vec![
            env!("CARGO_BIN_EXE_labctl").into(),
            "hook".into(),
            "claude-code".into(),
        ]),
        writes: vec!["src/**".into()],
        read_only,
        ..SpawnSpec::default()
    };
    let line = p.command_line(&spec);
    let at = line.args.iter().position(|a| a == "--settings").unwrap();
    line.args[at + 1].clone()
}

/// Runs the pinned CLI for one turn against the stand-in model, in a
/// fresh workspace with `src/`, in permission mode `mode`, with lab's
/// settings for a run that is `read_only` or not; the tool results the
/// model got back, and the workspace.
async fn one_turn(
    mode: &str,
    read_only: bool,
) -> (Vec<Value>, std::path::PathBuf, tempfile::TempDir, String) {
    let bin = real::cli("claude-code");
    let dir = tempfile::tempdir().unwrap();
    let workspace = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let results = Results::default();
    let app = axum::Router::new()
        .route("/v1/messages", axum::routing::post(messages))
        .with_state(Model {
            workspace: workspace.to_string_lossy().into_owned(),
            results: results.clone(),
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(&bin)
            .args(["-p", "--permission-mode", mode, "--settings"])
            .arg(settings_of(&workspace, read_only))
            .args(["--", "Write the two files."])
            .current_dir(&workspace)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("ANTHROPIC_BASE_URL", &api)
            .env("ANTHROPIC_API_KEY", "sk-ant-not-a-key")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            // What lab says under its sandbox (bypass mode as root).
            .env("IS_SANDBOX", "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the CLI ended its turn")
    .unwrap();
    let said = format!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    let results = results.lock().unwrap().clone();
    (results, workspace, dir, said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_refuses_a_write_out_of_scope_through_lab_s_hook() {
    let (results, workspace, _dir, said) = one_turn("acceptEdits", false).await;
    assert_eq!(
        results.len(),
        2,
        "two tool results reached the model: {results:?}\n{said}"
    );
    let refused = &results[0];
    assert_eq!(refused["tool_use_id"], "toolu_out", "{refused}");
    assert_eq!(refused["is_error"], true, "{refused}");
    let why = text_of(refused);
    assert!(
        why.contains("lab refused this write")
            && why.contains("`README.md` is out of scope")
            && why.contains("`src/**`"),
        "the model reads lab's reason: {why}"
    );
    assert!(
        !workspace.join("README.md").exists(),
        "the refused write did not happen"
    );
    let allowed = &results[1];
    assert_eq!(allowed["tool_use_id"], "toolu_in", "{allowed}");
    assert_ne!(allowed["is_error"], true, "{allowed}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("src/ok.rs")).unwrap(),
        "written\n",
        "a write in scope goes through (so the refusal was the hook's, not the mode's)"
    );
}

/// A planning or review run, in the bypass mode lab's AFK runs use: the
/// deny rules lab's settings carry refuse every write, in scope or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_writes_nothing_in_a_read_only_run() {
    let (results, workspace, _dir, said) = one_turn("bypassPermissions", true).await;
    assert_eq!(results.len(), 2, "{results:?}\n{said}");
    for r in &results {
        assert_eq!(r["is_error"], true, "{r}\n{said}");
    }
    assert!(!workspace.join("README.md").exists(), "{said}");
    assert!(!workspace.join("src/ok.rs").exists(), "{said}");
}
