//! A stand-in for Anthropic's Messages API on loopback, for the real
//! Claude Code: every request is kept (path, headers, body), and each
//! `POST /v1/messages` gets what the test set ([`Answer`]): a streamed
//! text turn by default, or a failure the real API sends.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One request the stand-in received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// What the stand-in answers a Messages call with.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A streamed turn that says `text` and ends.
    Text(String),
    /// A failure the real API sends: `status` with its JSON error body
    /// (`529` `overloaded_error`, `401` `authentication_error`, …).
    Fail {
        status: u16,
        kind: String,
        message: String,
    },
}

impl Answer {
    /// The API's `529 Overloaded`.
    pub fn overloaded() -> Answer {
        Answer::Fail {
            status: 529,
            kind: "overloaded_error".into(),
            message: "Overloaded".into(),
        }
    }
}

#[derive(Clone)]
struct Shared {
    seen: Arc<Mutex<Vec<Seen>>>,
    answer: Arc<Mutex<Answer>>,
}

/// The stand-in, serving until it is dropped.
pub struct StandIn {
    pub url: String,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StandIn {
    pub async fn start() -> StandIn {
        let shared = Shared {
            seen: Arc::default(),
            answer: Arc::new(Mutex::new(Answer::Text("Done.".into()))),
        };
        let app = axum::Router::new().fallback(any).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        StandIn { url, shared, task }
    }

    /// What every later Messages call gets.
    pub fn answer(&self, a: Answer) {
        *self.shared.answer.lock().unwrap() = a;
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// The Messages calls so far.
    pub fn messages(&self) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.method == Method::POST && s.path == "/v1/messages")
            .collect()
    }
}

async fn any(
    State(s): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let seen = Seen {
        method: method.clone(),
        path: uri.path().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let model = seen.body["model"].as_str().unwrap_or("claude").to_owned();
    s.seen.lock().unwrap().push(seen);
    if method != Method::POST || uri.path() != "/v1/messages" {
        return StatusCode::NOT_FOUND.into_response();
    }
    let answer = s.answer.lock().unwrap().clone();
    match answer {
        Answer::Text(text) => (
            [("content-type", "text/event-stream")],
            text_turn(&model, &text),
        )
            .into_response(),
        Answer::Fail {
            status,
            kind,
            message,
        } => (
            StatusCode::from_u16(status).unwrap(),
            axum::Json(json!({"type": "error", "error": {"type": kind, "message": message}})),
        )
            .into_response(),
    }
}

/// The Messages API's stream of one assistant turn saying `text`.
pub fn text_turn(model: &str, text: &str) -> String {
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_standin", "type": "message",
                "role": "assistant", "model": model, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": 3, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block":
                {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta":
                {"type": "text_delta", "text": text}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
                "stop_sequence": null}, "usage": {"output_tokens": 2}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    events
        .iter()
        .map(|(e, d)| format!("event: {e}\ndata: {d}\n\n"))
        .collect()
}
