//! The node-to-node credential (issue 29 §2, ADR 34) is refused from the
//! outside and from a run: a replay, a stale time, another key, a run's
//! token, a signature made for another node or another request; a
//! forwarded start is never forwarded again; the key never reaches a run.

use reqwest::Method;
use reqwest::header::CONTENT_TYPE;
use serde_json::json;

use super::three;
use crate::on_postgres;
use crate::support::Backend;

on_postgres!(the_node_credential_is_refused_from_outside_and_from_a_run);

async fn the_node_credential_is_refused_from_outside_and_from_a_run(pg: Backend) {
    let nodes = three(&pg).await;
    let (a, b) = (&nodes[0], &nodes[1]);
    a.add_repo("r").await;
    let run = b.start_run("r", "stay").await;
    let id = run["id"].as_i64().unwrap();
    b.wait_state(id, "running").await;
    let path = format!("/api/v1/runs/{id}/screen");
    let key =
        lab::fleet::key::FleetKey::new(&b.runner().store().fleet_key("unused").await.unwrap());
    let http = reqwest::Client::new();
    let send = async |headers: reqwest::header::HeaderMap| {
        let r = http
            .get(format!("{}{path}", b.url))
            .headers(headers)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    let to_b = b.runner().node().to_owned();
    let signed = |at: i64| key.sign("a-node", &to_b, at, &Method::GET, &path, None, b"");

    // Signed with the fleet's key: taken, once.
    let good = signed(lab::store::now_ms());
    assert_eq!(send(good.clone()).await.0, 200);
    let (st, body) = send(good).await;
    assert_eq!(st, 401, "a replay is refused: {body}");
    assert!(body.contains("used already"), "{body}");
    // A signature made for B opens nothing at C (each node remembers only
    // what it took itself): the refusal says it is the node credential's.
    let c = &nodes[2];
    let r = http
        .get(format!("{}{path}", c.url))
        .headers(signed(lab::store::now_ms()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(
        r.headers()
            .get("x-lab-node-refused")
            .and_then(|v| v.to_str().ok()),
        Some("forged")
    );
    // Too old, another key, garbage, a run's token as the signature.
    let (st, body) = send(signed(lab::store::now_ms() - 120_000)).await;
    assert_eq!(st, 401, "{body}");
    let other = lab::fleet::key::FleetKey::new("0123");
    let (st, _) = send(other.sign(
        "a-node",
        &to_b,
        lab::store::now_ms(),
        &Method::GET,
        &path,
        None,
        b"",
    ))
    .await;
    assert_eq!(st, 401);
    let token = b.run_token(id).await;
    let mut forged = signed(lab::store::now_ms());
    forged.insert("x-lab-node-signature", token.parse().unwrap());
    let (st, body) = send(forged).await;
    assert_eq!(st, 401, "{body}");
    assert!(body.contains("node credential was refused"), "{body}");
    // A signature of one request does not open another.
    let mut moved = signed(lab::store::now_ms());
    moved.insert("x-lab-node", "b-node".parse().unwrap());
    assert_eq!(send(moved).await.0, 401);

    // A start another node forwarded is answered where it lands: one that
    // names a third node is refused, never forwarded again.
    let start = serde_json::to_vec(&json!({"repo": "r", "prompt": "p", "node": c.runner().node()}))
        .unwrap();
    let mut h = key.sign(
        "a-node",
        &to_b,
        lab::store::now_ms(),
        &Method::POST,
        "/api/v1/runs",
        None,
        &start,
    );
    h.insert(CONTENT_TYPE, "application/json".parse().unwrap());
    let r = http
        .post(format!("{}/api/v1/runs", b.url))
        .headers(h)
        .body(start)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 409);
    let said = r.text().await.unwrap();
    assert!(said.contains("never forwarded again"), "{said}");
    assert_eq!(
        c.get("/api/v1/runs").await.ok().as_array().unwrap().len(),
        1
    );

    // A run's token is never forwarded: through A it reaches nothing of B.
    let r = http
        .get(format!("{}{path}", a.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("x-lab-served-by").is_none());
    assert_ne!(r.status().as_u16(), 200);
    // And the run never sees the key: not in its environment.
    let env = b.record(id, "env").await;
    let key_hex = b.runner().store().fleet_key("unused").await.unwrap();
    assert!(
        !String::from_utf8_lossy(&env).contains(&key_hex),
        "the fleet key is in a run's environment"
    );
}
