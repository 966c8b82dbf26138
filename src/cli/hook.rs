//! `labctl hook <provider>`: what a run's CLI hooks run (ADR 13). It reads
//! the CLI's event payload (Claude Code: stdin; Codex: its last argument)
//! and posts it to lab with the run's own token. It never holds the agent
//! up or fails it: it gives up after [`WAIT`], prints nothing (Claude Code
//! may give a hook's output to the model; Codex's notifier writes on its
//! terminal), and always exits 0.

use std::io::Read;
use std::time::Duration;

use serde_json::{Map, Value};

use super::client::{Client, seg};
use crate::http::agent::{HookAnswer, HookBody};

/// The longest the hook waits for lab, reading included.
pub const WAIT: Duration = Duration::from_secs(2);

/// The most of stdin read, and the most a payload posted may weigh.
const MAX_READ: u64 = 1024 * 1024;
const MAX_POST: usize = 64 * 1024;
/// The most characters a string of the payload keeps (a tool's output or
/// the last message can be long; lab needs the first words).
const MAX_STRING: usize = 2000;
/// The most elements an array keeps.
const MAX_ITEMS: usize = 20;

/// Posts one event; every failure is silent.
pub async fn hook(lab_url: &str, token: Option<String>, provider: &str, args: &[String]) {
    let Some(run) = std::env::var("LAB_RUN_ID").ok().filter(|r| !r.is_empty()) else {
        return;
    };
    let Some(payload) = read_payload(provider, args) else {
        return;
    };
    let Ok(client) = Client::new(lab_url, token, Some(WAIT)) else {
        return;
    };
    let path = format!("/api/v1/runs/{}/hook", seg(&run));
    let body = HookBody { payload };
    let _ = tokio::time::timeout(WAIT, client.post::<_, HookAnswer>(&path, &body)).await;
}

/// The payload as an object, trimmed to [`MAX_POST`]; `None` when there is
/// none or it is not a JSON object. The payload is the agent CLI's own JSON,
/// which lab reads, not labctl: it stays a JSON object here.
fn read_payload(provider: &str, args: &[String]) -> Option<Map<String, Value>> {
    let text = if provider == "codex" || !args.is_empty() {
        // Codex passes the event as its notifier's last argument; its stdin
        // is Codex's terminal, which this must never read.
        args.last()?.clone()
    } else {
        let mut s = String::new();
        std::io::stdin()
            .take(MAX_READ)
            .read_to_string(&mut s)
            .ok()?;
        s
    };
    let Value::Object(map) = serde_json::from_str(&text).ok()? else {
        return None;
    };
    Some(fit(map))
}

/// Cuts long strings and arrays; if that is still too big, keeps only the
/// top-level strings, numbers and booleans (every field lab reads is one).
fn fit(map: Map<String, Value>) -> Map<String, Value> {
    let trimmed: Map<String, Value> = map.into_iter().map(|(k, v)| (k, trim(v))).collect();
    if serde_json::to_string(&trimmed).map_or(usize::MAX, |t| t.len()) <= MAX_POST {
        return trimmed;
    }
    trimmed
        .into_iter()
        .filter(|(_, v)| !v.is_object() && !v.is_array())
        .collect()
}

fn trim(v: Value) -> Value {
    match v {
        Value::String(s) if s.chars().count() > MAX_STRING => {
            Value::String(s.chars().take(MAX_STRING).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().take(MAX_ITEMS).map(trim).collect()),
        Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (k, trim(v))).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_codex_payload_comes_from_the_last_argument() {
        let arg = r#"{"type":"agent-turn-complete","turn-id":"1"}"#.to_owned();
        let v = read_payload("codex", &[arg]).unwrap();
        assert_eq!(v["type"], "agent-turn-complete");
        assert_eq!(read_payload("codex", &[]), None);
        assert_eq!(read_payload("codex", &["[1,2]".into()]), None);
        assert_eq!(read_payload("codex", &["not json".into()]), None);
    }

    #[test]
    fn big_payloads_are_cut_to_what_lab_reads() {
        let big = "x".repeat(10 * MAX_STRING);
        let v = fit(
            json!({"hook_event_name": "PostToolUse", "tool_response": {"stdout": big}, "list": (0..100).collect::<Vec<_>>()})
                .as_object()
                .unwrap()
                .clone(),
        );
        assert_eq!(
            v["tool_response"]["stdout"].as_str().unwrap().len(),
            MAX_STRING
        );
        assert_eq!(v["list"].as_array().unwrap().len(), MAX_ITEMS);
        let wide: Map<String, Value> = (0..200)
            .map(|i| (format!("k{i}"), json!({"s": "y".repeat(MAX_STRING)})))
            .chain([("hook_event_name".to_owned(), json!("Stop"))])
            .collect();
        let v = fit(wide);
        assert!(serde_json::to_string(&v).unwrap().len() <= MAX_POST);
        assert_eq!(Value::Object(v), json!({"hook_event_name": "Stop"}));
    }
}
