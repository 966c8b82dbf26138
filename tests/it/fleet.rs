//! One lab across machines (issue 29 §2–§5), with three nodes on this
//! machine (each its own data dir, port and tmux server; one PostgreSQL).
//! `serve`: every route of a run through a node that does not own it (the
//! API, labctl and a real browser); `credential`: the node credential
//! refused from the outside and from a run; `dead_node`: a node killed with
//! live AFK runs: its runs `lost` (`node down`) on the others within the
//! bound, its issues run again exactly once, it is forgotten only once
//! down, and once back it takes its manual run up again and closes the AFK
//! sessions the fleet gave away.

use reqwest::Method;
use serde_json::Value;

use crate::support::{Backend, TestServer, wait};

mod credential;
mod dead_node;
mod serve;

/// Three servers on one fresh database, each having seen the others beat.
async fn three(pg: &Backend) -> Vec<TestServer> {
    let url = pg.fresh_url().await;
    let mut nodes = Vec::new();
    for _ in 0..3 {
        let dir = tempfile::Builder::new()
            .prefix("lab-fleet-")
            .tempdir()
            .unwrap();
        nodes.push(TestServer::start_with(dir, url.clone(), |_| {}).await);
    }
    for n in &nodes {
        all_up(n, 3).await;
    }
    nodes
}

/// Waits until `api` lists `count` nodes, every one `up`.
async fn all_up(api: &crate::support::api::Api, count: usize) {
    wait::until(
        format!("{count} nodes up"),
        wait::secs(20).every_ms(100),
        async || {
            let all = api.get("/api/v1/nodes").await.ok();
            let up = all
                .as_array()
                .unwrap()
                .iter()
                .filter(|n| n["state"] == "up")
                .count();
            (up == count).then_some(()).ok_or(all)
        },
    )
    .await
}

/// A raw request with the admin token of `s`: status, who served it, body.
async fn raw(
    s: &crate::support::api::Api,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, String, String) {
    let mut rb = s.req(method, path);
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb.send().await.unwrap();
    let status = r.status().as_u16();
    let by = r
        .headers()
        .get("x-lab-served-by")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, by, r.text().await.unwrap())
}
