//! Notifications (issue 13 §5): a local receiving server records what lab
//! posts when runs wait, end, fail and open pull requests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::on_both;
use crate::support::agent;
use crate::support::{Backend, TestServer, id, wait};

/// One request the receiver got.
#[derive(Clone, Debug)]
pub(crate) struct Got {
    path: String,
    pub headers: HashMap<String, String>,
    pub body: String,
    /// What the receiver answered.
    status: u16,
}

impl Got {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Default)]
struct Log {
    got: Vec<Got>,
    /// How many more requests to each path answer 500.
    fail: HashMap<String, usize>,
}

/// A local HTTP server that records every POST and answers 200, or 500
/// while told to.
#[derive(Clone)]
pub(crate) struct Receiver {
    pub url: String,
    log: Arc<Mutex<Log>>,
}

async fn take(
    State(log): State<Arc<Mutex<Log>>>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let mut l = log.lock().unwrap();
    let status = match l.fail.get_mut(&path) {
        Some(n) if *n > 0 => {
            *n -= 1;
            StatusCode::INTERNAL_SERVER_ERROR
        }
        _ => StatusCode::OK,
    };
    l.got.push(Got {
        path,
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("?").to_owned()))
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
        status: status.as_u16(),
    });
    status
}

impl Receiver {
    pub async fn start() -> Receiver {
        let log = Arc::new(Mutex::new(Log::default()));
        let app = axum::Router::new()
            .route("/{*path}", axum::routing::post(take))
            .with_state(log.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { url, log }
    }

    pub fn fail_next(&self, path: &str, n: usize) {
        self.log.lock().unwrap().fail.insert(path.to_owned(), n);
    }

    pub fn got(&self, path: &str) -> Vec<Got> {
        let l = self.log.lock().unwrap();
        l.got.iter().filter(|g| g.path == path).cloned().collect()
    }

    /// The events of what `path` got, with the status each was answered.
    pub fn events(&self, path: &str) -> Vec<(String, u16)> {
        self.got(path)
            .iter()
            .map(|g| {
                (
                    g.json()["event"].as_str().unwrap_or("?").to_owned(),
                    g.status,
                )
            })
            .collect()
    }

    /// Waits until `path` got `n` requests.
    pub async fn wait_for(&self, path: &str, n: usize) -> Vec<Got> {
        let what = format!("{n} requests to /{path}");
        wait::until(what, wait::secs(20), async || {
            let got = self.got(path);
            if got.len() >= n {
                Ok(got)
            } else {
                Err(format!("{got:?}"))
            }
        })
        .await
    }
}

pub(crate) const ALL: [&str; 4] = ["waiting", "ended", "failed", "pr_opened"];

pub(crate) async fn notify(s: &TestServer, list: Value) -> Value {
    s.patch("/api/v1/settings", json!({ "notifications": list }))
        .await
        .ok()
}

/// A run that waits, then ends: the webhook gets `waiting` then `ended`, in
/// that order, with the contract's fields; its first answer is a 500, and
/// lab sends that one again and each event once. ntfy and Slack endpoints
/// get theirs in their own shapes, only for the events they asked for.
async fn events_arrive_in_order_and_a_500_is_tried_again(b: Backend) {
    let rx = Receiver::start().await;
    rx.fail_next("hook", 1);
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    notify(
        &s,
        json!([
            {"kind": "webhook", "url": format!("{}/hook", rx.url), "events": ALL},
            {"kind": "ntfy", "url": format!("{}/ntfy-topic", rx.url), "events": ["waiting"], "token": "tk_secret"},
            {"kind": "slack", "url": format!("{}/slack", rx.url), "events": ["ended"]},
        ]),
    )
    .await;
    let run = s.start_run("r", "FAKE_ASK_MS=1500 FAKE_EXIT=0").await;
    let run_id = id(&run);
    let got = rx.wait_for("hook", 3).await;
    assert_eq!(
        rx.events("hook"),
        [
            ("waiting".to_owned(), 500),
            ("waiting".to_owned(), 200),
            ("ended".to_owned(), 200)
        ]
    );
    let w = got[1].json();
    assert_eq!(w["run"], run_id);
    assert_eq!(w["repo"], "r");
    assert_eq!(w["state"], "waiting");
    assert_eq!(w["phase"], "working");
    assert!(
        w["reason"].as_str().unwrap().contains("not logged in"),
        "{w}"
    );
    assert_eq!(w["url"], format!("{}/runs/{run_id}", s.url));
    assert!(w["at"].as_str().unwrap().ends_with('Z'), "{w}");
    let e = got[2].json();
    assert_eq!((&e["state"], &e["run"]), (&json!("exited"), &json!(run_id)));
    assert_eq!(e["phase"], "done");
    assert!(e["pull_request"].is_null());
    assert_eq!(got[2].headers["content-type"], "application/json");

    let ntfy = rx.wait_for("ntfy-topic", 1).await;
    let n = &ntfy[0];
    assert!(
        n.headers["title"].contains(&format!("run {run_id} of r is waiting")),
        "{n:?}"
    );
    assert_eq!(n.headers["click"], format!("{}/runs/{run_id}", s.url));
    assert!(n.headers["tags"].contains("hourglass"));
    assert_eq!(n.headers["authorization"], "Bearer tk_secret");
    assert!(n.body.contains("not logged in"), "{n:?}");

    let slack = rx.wait_for("slack", 1).await;
    let text = slack[0].json()["text"].as_str().unwrap().to_owned();
    assert!(
        text.starts_with(&format!(
            "<{}/runs/{run_id}|lab: run {run_id} of r ended (exited)>",
            s.url
        )),
        "{text}"
    );
    assert!(!slack[0].headers.contains_key("authorization"));

    // Each event went out once (after its retry), and nothing else: once
    // nothing is pending and every attempt ended, nothing more goes out.
    s.outbox_settled().await;
    assert_eq!(rx.got("hook").len(), 3);
    assert_eq!(rx.got("ntfy-topic").len(), 1);
    assert_eq!(rx.got("slack").len(), 1);
    s.stop().await;
}

/// With nothing to send, the loop does not read the outbox again while
/// nothing is written (its shortest gap is 50 ms here; three AFK ticks
/// take 3 s); a run's end is still sent at once, as the write to runs that
/// queued it wakes the loop.
async fn an_idle_outbox_is_not_read_at_every_tick(b: Backend) {
    let rx = Receiver::start().await;
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    notify(
        &s,
        json!([{"kind": "webhook", "url": format!("{}/hook", rx.url), "events": ["ended"]}]),
    )
    .await;
    let reads = |v: Value| v["notifications"]["reads"].as_u64().unwrap();
    // Time, as the AFK loop's ticks (one a second here) witness it.
    s.patch("/api/v1/settings", json!({"afk": {"tick_seconds": 1}}))
        .await
        .ok();
    s.outbox_settled().await;
    let reads0 = reads(s.get("/api/v1/status").await.ok());
    s.after_ticks(3).await;
    let reads1 = reads(s.get("/api/v1/status").await.ok());
    assert!(
        reads1 - reads0 <= 1,
        "outbox reads in 3 AFK ticks with nothing written: {}",
        reads1 - reads0
    );
    let started = std::time::Instant::now();
    let run = id(&s.start_run("r", "FAKE_EXIT=0").await);
    let got = rx.wait_for("hook", 1).await;
    assert_eq!(got[0].json()["run"], run);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "sent {:?} after the start",
        started.elapsed()
    );
    s.stop().await;
}

/// A failed attempt is tried again when its retry comes due, with nothing
/// written meanwhile: the row's due time wakes the loop (the backstop is
/// 10 s; the retries here come after 50 ms, then 100 ms).
async fn a_retry_is_sent_when_it_comes_due(b: Backend) {
    let rx = Receiver::start().await;
    rx.fail_next("hook", 2);
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    notify(
        &s,
        json!([{"kind": "webhook", "url": format!("{}/hook", rx.url), "events": ["ended"]}]),
    )
    .await;
    s.start_run("r", "FAKE_EXIT=0").await;
    rx.wait_for("hook", 1).await;
    let first = std::time::Instant::now();
    rx.wait_for("hook", 3).await;
    // Woken by the backstop instead, they would take 20 s.
    assert!(
        first.elapsed() < std::time::Duration::from_secs(9),
        "two retries took {:?}",
        first.elapsed()
    );
    s.outbox_settled().await;
    assert_eq!(
        rx.events("hook"),
        [
            ("ended".to_owned(), 500),
            ("ended".to_owned(), 500),
            ("ended".to_owned(), 200)
        ]
    );
    let st = s.get("/api/v1/status").await.ok();
    assert_eq!(st["notifications"]["attempts"], 3, "{st}");
    s.stop().await;
}

/// A run waits (one `waiting` per entry, however many passes see it), opens
/// a pull request and is lost; lab restarts in between and sends nothing
/// twice.
async fn pull_requests_and_failures_are_sent_once_across_a_restart(b: Backend) {
    let rx = Receiver::start().await;
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    notify(
        &s,
        json!([{"kind": "webhook", "url": format!("{}/hook", rx.url), "events": ALL}]),
    )
    .await;
    let run = s.start_run("r", "FAKE_ASK_MS=60000").await;
    let run_id = id(&run);
    rx.wait_for("hook", 1).await;
    crate::support::git::commit_in_run(&run);
    let pr = s
        .post(
            &format!("/api/v1/runs/{run_id}/pull"),
            json!({"title": "A change", "body": "done"}),
        )
        .await
        .expect(201);
    let got = rx.wait_for("hook", 2).await;
    let p = got[1].json();
    assert_eq!(p["event"], "pr_opened");
    assert_eq!(p["pull_request"]["url"], pr["url"]);
    assert_eq!(p["state"], "waiting");

    let s = s.restart().await;
    // The new server's screen check sees the run waiting still: no new
    // entry.
    s.after_a_look(run_id).await;
    s.outbox_settled().await;
    assert_eq!(rx.events("hook").len(), 2, "{:?}", rx.events("hook"));
    let session = format!("={}", run["session"].as_str().unwrap());
    agent::tmux(
        s.runner().tmux().socket(),
        &["kill-session", "-t", &session],
    );
    // Lost (resumable, ADR 18): told under the `failed` event.
    s.wait_state(run_id, "lost").await;
    let got = rx.wait_for("hook", 3).await;
    assert_eq!(got[2].json()["event"], "failed");
    assert_eq!(got[2].json()["state"], "lost");
    s.outbox_settled().await;
    assert_eq!(
        rx.events("hook"),
        [
            ("waiting".to_owned(), 200),
            ("pr_opened".to_owned(), 200),
            ("failed".to_owned(), 200)
        ]
    );
    s.stop().await;
}

/// A wrong endpoint is a 400 naming the field and what is allowed, and the
/// PATCH writes nothing, not even its valid fields.
async fn a_wrong_endpoint_is_refused_and_nothing_is_written(b: Backend) {
    let s = TestServer::start(b).await;
    let before = s.get("/api/v1/settings").await.ok();
    let good = json!({"kind": "webhook", "url": "https://example.com/hook", "events": ["ended"]});
    for (bad, field, says) in [
        (
            json!({"kind": "email", "url": "https://e.com/x", "events": ["ended"]}),
            "notifications.0.kind",
            "webhook, ntfy or slack",
        ),
        (
            json!({"kind": "webhook", "url": "ftp://e.com/x", "events": ["ended"]}),
            "notifications.0.url",
            "http:// or https://",
        ),
        (
            json!({"kind": "webhook", "url": "https://e.com/x", "events": ["started"]}),
            "notifications.0.events.0",
            "waiting, ended, failed or pr_opened",
        ),
        (
            json!({"kind": "webhook", "url": "https://e.com/x", "events": []}),
            "notifications.0.events",
            "at least one",
        ),
        (
            json!({"kind": "webhook", "url": "https://e.com/…", "events": ["ended"]}),
            "notifications.0.url",
            "redacted",
        ),
        (
            json!({"kind": "slack", "url": "https://e.com/x", "events": ["ended"], "token": "t"}),
            "notifications.0.token",
            "no token",
        ),
    ] {
        let e = s
            .patch(
                "/api/v1/settings",
                json!({"afk": {"max_concurrent": 7}, "notifications": [bad]}),
            )
            .await
            .expect(400);
        let text = e.to_string();
        assert!(
            text.contains(field) && text.contains(says),
            "{field}: {text}"
        );
    }
    let many: Vec<Value> = (0..21).map(|_| good.clone()).collect();
    let e = s
        .patch("/api/v1/settings", json!({"notifications": many}))
        .await
        .expect(400);
    assert!(e.to_string().contains("at most 20"), "{e}");
    // Not an object: refused by the body's shape.
    s.patch("/api/v1/settings", json!({"notifications": [["webhook"]]}))
        .await
        .expect(400);
    assert_eq!(s.get("/api/v1/settings").await.ok(), before);
    s.stop().await;
}

/// The API shows a URL redacted and a token as set, never either; sending
/// the redacted URL back keeps the stored one (and its token); neither
/// reaches a run's environment.
async fn secrets_are_never_shown_and_never_reach_a_run(b: Backend) {
    let rx = Receiver::start().await;
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let secret = "services/T0001/B0002/sEcReTsEcReTsEcReT";
    let v = notify(
        &s,
        json!([
            {"kind": "slack", "url": format!("{}/{secret}", rx.url), "events": ["waiting"]},
            {"kind": "webhook", "url": format!("{}/hook", rx.url), "events": ["ended"], "token": "tk_hidden_1234"},
        ]),
    )
    .await;
    let shown = v.to_string();
    assert!(
        !shown.contains("sEcReT") && !shown.contains("tk_hidden"),
        "{shown}"
    );
    let list = &v["notifications"];
    assert_eq!(list[0]["url"], format!("{}/…cReT", rx.url));
    assert_eq!(list[0]["token_set"], false);
    assert_eq!(list[1]["token_set"], true);
    let got = s.get("/api/v1/settings").await.ok();
    assert!(!got.to_string().contains("sEcReT") && !got.to_string().contains("tk_hidden"));

    // Back as shown, with one more event and the order swapped: the stored
    // URLs and the token stay.
    let mut back = got["notifications"].as_array().unwrap().clone();
    back.reverse();
    for e in &mut back {
        e.as_object_mut().unwrap().remove("token_set");
    }
    back[1]["events"] = json!(["waiting", "ended"]);
    let v = notify(&s, Value::Array(back)).await;
    assert_eq!(v["notifications"][0]["token_set"], true);
    assert_eq!(v["notifications"][1]["events"], json!(["waiting", "ended"]));

    let run = s.start_run("r", "FAKE_ASK_MS=1000 FAKE_EXIT=0").await;
    let slack = rx.wait_for(secret, 2).await;
    assert!(slack[0].body.contains("is waiting"), "{slack:?}");
    let hook = rx.wait_for("hook", 1).await;
    assert_eq!(hook[0].headers["authorization"], "Bearer tk_hidden_1234");
    // The run's environment has neither.
    let env = agent::env(&s.record(id(&run), "env").await);
    for (k, v) in &env {
        assert!(
            !v.contains("sEcReT") && !v.contains("tk_hidden") && !v.contains(&rx.url),
            "{k}={v}"
        );
    }
    // `[]` removes them all.
    let v = notify(&s, json!([])).await;
    assert_eq!(v["notifications"], json!([]));
    s.stop().await;
}

/// Two nodes on one database both deliver; each notification goes out once.
async fn two_nodes_send_each_notification_once(b: Backend) {
    let rx = Receiver::start().await;
    let url = b.fresh_url().await;
    let dir = || {
        tempfile::Builder::new()
            .prefix("lab-it-")
            .tempdir()
            .unwrap()
    };
    let s1 = TestServer::start_with(dir(), url.clone(), |_| {}).await;
    let s2 = TestServer::start_with(dir(), url, |_| {}).await;
    s1.add_repo("r").await;
    notify(
        &s2,
        json!([{"kind": "webhook", "url": format!("{}/hook", rx.url), "events": ["ended"]}]),
    )
    .await;
    let mut runs = Vec::new();
    for _ in 0..4 {
        runs.push(id(&s1.start_run("r", "FAKE_EXIT=0").await));
    }
    rx.wait_for("hook", 4).await;
    // Nothing pending, and every attempt of either node over.
    s1.outbox_settled().await;
    s2.outbox_settled().await;
    let mut sent: Vec<i64> = rx
        .got("hook")
        .iter()
        .map(|g| g.json()["run"].as_i64().unwrap())
        .collect();
    sent.sort();
    assert_eq!(sent, runs);
    s2.stop().await;
    s1.stop().await;
}

crate::on_postgres!(two_nodes_send_each_notification_once);

/// "Send a test": every endpoint gets `"event": "test"` at once, and lab
/// answers what each said (URLs redacted); nothing is queued. labctl
/// exits 1 when one endpoint did not take it; the settings page's button
/// shows the same.
async fn a_test_goes_to_every_endpoint_and_says_what_each_answered(b: Backend) {
    let rx = Receiver::start().await;
    let s = TestServer::start(b).await;
    let none = s.post("/api/v1/notifications/test", Value::Null).await.ok();
    assert_eq!(none, json!([]));
    notify(
        &s,
        json!([
            {"kind": "webhook", "url": format!("{}/ok", rx.url), "events": ALL},
            {"kind": "ntfy", "url": format!("{}/broken", rx.url), "events": ["failed"]},
        ]),
    )
    .await;
    rx.fail_next("broken", 1);
    let r = s.post("/api/v1/notifications/test", Value::Null).await.ok();
    assert_eq!(r[0]["status"], 200, "{r}");
    assert_eq!(r[0]["error"], Value::Null, "{r}");
    assert_eq!(r[1]["status"], 500, "{r}");
    assert!(r[1]["error"].as_str().unwrap().contains("500"), "{r}");
    assert!(
        !r.to_string().contains("/ok") && !r.to_string().contains("/broken"),
        "URLs redacted: {r}"
    );
    let hook = rx.got("ok")[0].json();
    assert_eq!(hook["event"], "test", "{hook}");
    assert_eq!(hook["run"], Value::Null, "{hook}");
    assert_eq!(
        rx.got("broken")[0].headers["title"],
        "lab: a test notification"
    );

    rx.fail_next("broken", 1);
    let out = crate::labctl::labctl(&s, &["notify", "test"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("500") && text.contains("ok"), "{text}");
    let all = crate::labctl::json(&crate::labctl::labctl(&s, &["notify", "test", "--json"]));
    assert_eq!(all.as_array().map(Vec::len), Some(2), "{all}");

    let cookie = crate::pages_input::session(&s).await;
    let page = crate::pages_input::visit(&s, &cookie, reqwest::Method::GET, "/settings")
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("Send a test"), "{page}");
    let csrf = crate::pages_input::csrf_of(&page);
    let shown = crate::pages_input::client()
        .post(format!("{}/settings/notifications/test", s.url))
        .header(reqwest::header::COOKIE, &cookie)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(shown.status(), 200);
    let shown = shown.text().await.unwrap();
    assert!(shown.contains("received"), "{shown}");
    // Four tests to each: none queued, none sent again.
    let st = s.get("/api/v1/status").await.ok();
    let n = &st["notifications"];
    assert_eq!(
        (&n["pending"], &n["attempts"]),
        (&json!(0), &json!(0)),
        "{st}"
    );
    assert_eq!(rx.got("ok").len(), 4);
    assert_eq!(rx.got("broken").len(), 4);
    s.stop().await;
}

on_both!(
    a_test_goes_to_every_endpoint_and_says_what_each_answered,
    an_idle_outbox_is_not_read_at_every_tick,
    a_retry_is_sent_when_it_comes_due,
    events_arrive_in_order_and_a_500_is_tried_again,
    pull_requests_and_failures_are_sent_once_across_a_restart,
    a_wrong_endpoint_is_refused_and_nothing_is_written,
    secrets_are_never_shown_and_never_reach_a_run,
);
