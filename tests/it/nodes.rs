//! The fleet's nodes (issue 29 §1): a node records itself and beats; every
//! node lists them with their state and live runs; a node whose beat is old
//! is `down`.

use serde_json::{Value, json};

use crate::labctl::{labctl, ok};
use crate::on_both;
use crate::support::{Backend, TestServer, wait};

on_both!(a_node_records_itself_and_one_without_a_beat_is_down);

async fn a_node_records_itself_and_one_without_a_beat_is_down(b: Backend) {
    let s = TestServer::start(b).await;
    let me = s.runner().node().to_owned();
    let nodes = wait::until(
        "this node's first beat",
        wait::secs(10).every_ms(100),
        async || {
            let all = s.get("/api/v1/nodes").await.ok();
            all.as_array()
                .is_some_and(|a| a.iter().any(|n| n["id"] == me.as_str()))
                .then_some(all.clone())
                .ok_or(all)
        },
    )
    .await;
    let n = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == me.as_str())
        .unwrap();
    assert_eq!(n["state"], "up", "{n}");
    assert_eq!(n["url"], s.url.as_str(), "{n}");
    assert_eq!(n["version"], env!("CARGO_PKG_VERSION"), "{n}");
    assert_eq!(n["runs"], 0, "{n}");
    assert!(n["capacity"]["cores"].as_u64().unwrap() >= 1, "{n}");
    assert!(
        n["capacity"]["clis"]
            .as_array()
            .unwrap()
            .contains(&json!("claude-code")),
        "{n}"
    );

    // A node that last beat a minute ago is down to this one.
    let gone = lab::domain::Node {
        id: "gone-1".into(),
        url: "http://10.0.0.9:7878".into(),
        version: "0.0.1".into(),
        started_at: 1,
        last_seen: lab::store::now_ms() - 60_000,
        draining: false,
        capacity: Default::default(),
    };
    s.runner().store().beat_node(&gone).await.unwrap();
    let all = s.get("/api/v1/nodes").await.ok();
    let states: Vec<(&Value, &Value)> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (&n["id"], &n["state"]))
        .collect();
    assert!(
        states.contains(&(&json!("gone-1"), &json!("down")))
            && states.contains(&(&json!(me), &json!("up"))),
        "{all}"
    );

    // A live run counts on its node; labctl lists the fleet.
    s.add_repo("r").await;
    s.start_run("r", "stay").await;
    let listed = ok(&labctl(&s, &["node", "ls"]));
    assert!(
        listed.contains(&me) && listed.contains("gone-1") && listed.contains("down"),
        "{listed}"
    );
    let json: Value = serde_json::from_str(&ok(&labctl(&s, &["node", "ls", "--json"]))).unwrap();
    let mine = json
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == me.as_str())
        .unwrap();
    assert_eq!(mine["runs"], 1, "{json}");
    s.stop().await;
}
