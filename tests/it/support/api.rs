//! The one client of lab's API in the tests, whether the server runs inside
//! the test (`TestServer`) or as a `lab serve` process (`LabProcess`): both
//! dereference to their `Api`.

use reqwest::StatusCode;
use serde_json::Value;

use super::wait;

/// lab's API at `url`, called with `token`.
pub struct Api {
    pub url: String,
    pub token: String,
    http: reqwest::Client,
}

/// A response: status and JSON body (the text when the body is not JSON).
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub body: Value,
}

impl Resp {
    #[track_caller]
    pub fn ok(self) -> Value {
        assert!(
            self.status.is_success(),
            "expected success, got {}: {}",
            self.status,
            self.body
        );
        self.body
    }

    #[track_caller]
    pub fn expect(self, status: u16) -> Value {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.body);
        self.body
    }
}

impl Api {
    pub fn new(url: String, token: String) -> Api {
        Api {
            url,
            token,
            http: reqwest::Client::new(),
        }
    }

    /// A request to `path` with this client's token, to finish and `send`.
    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token)
    }

    pub async fn send(&self, rb: reqwest::RequestBuilder) -> Resp {
        let resp = rb.send().await.expect("request sent");
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Resp { status, body }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(self.req(reqwest::Method::GET, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.send(self.req(reqwest::Method::POST, path).json(&body))
            .await
    }

    pub async fn patch(&self, path: &str, body: Value) -> Resp {
        self.send(self.req(reqwest::Method::PATCH, path).json(&body))
            .await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.send(self.req(reqwest::Method::DELETE, path)).await
    }

    /// Polls a run until `pred` holds (at most `secs` seconds).
    pub async fn wait_run(&self, id: i64, secs: u64, pred: impl Fn(&Value) -> bool) -> Value {
        let path = format!("/api/v1/runs/{id}");
        wait::until(
            format!("run {id} to get there"),
            wait::secs(secs),
            async || {
                let r = self.get(&path).await.ok();
                if pred(&r) { Ok(r) } else { Err(r) }
            },
        )
        .await
    }

    /// Waits (up to 20 s) for a run's state.
    pub async fn wait_state(&self, id: i64, state: &str) -> Value {
        self.wait_run(id, 20, |r| r["state"] == state).await
    }
}
