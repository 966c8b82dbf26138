//! The fleet's nodes (issue 29 §1): a node records itself and beats; every
//! node lists them with their state and live runs; a node whose beat is old
//! is `down`, and one retired for good is forgotten.

use serde_json::{Value, json};

use crate::labctl::{labctl, ok};
use crate::on_both;
use crate::support::{Backend, TestServer, wait};

on_both!(
    a_node_records_itself_and_one_without_a_beat_is_down,
    a_draining_node_starts_nothing_new,
);

/// A node `id` that last beat a minute ago (down by the default bound).
fn down_node(id: &str) -> lab::domain::Node {
    lab::domain::Node {
        id: id.into(),
        url: "http://10.0.0.9:7878".into(),
        version: "0.0.1".into(),
        started_at: 1,
        last_seen: lab::store::now_ms() - 60_000,
        draining: false,
        capacity: Default::default(),
    }
}

/// The nodes page's HTML, as the browser session `cookie` sees it.
async fn nodes_page(s: &TestServer, cookie: &str) -> String {
    crate::pages_input::visit(s, cookie, reqwest::Method::GET, "/nodes")
        .await
        .text()
        .await
        .unwrap()
}

/// This node as `GET /nodes` lists it, once it beat.
async fn first_beat(s: &TestServer) -> Value {
    let me = s.runner().node().to_owned();
    wait::until(
        "this node's first beat",
        wait::secs(10).every_ms(100),
        async || {
            let all = s.get("/api/v1/nodes").await.ok();
            let mine = all
                .as_array()
                .and_then(|a| a.iter().find(|n| n["id"] == me.as_str()).cloned());
            mine.ok_or(all)
        },
    )
    .await
}

async fn a_node_records_itself_and_one_without_a_beat_is_down(b: Backend) {
    let s = TestServer::start(b).await;
    let me = s.runner().node().to_owned();
    let n = &first_beat(&s).await;
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

    // Beats are stamped with the database's clock, in ms like this one's.
    let clock = s.runner().store().clock_ms().await.unwrap();
    assert!(
        (clock - lab::store::now_ms()).abs() < 10_000,
        "the database's clock reads {clock}"
    );

    // A node that last beat a minute ago is down to this one.
    let gone = down_node("gone-1");
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

    // A node retired for good is forgotten, and only such a node: not the
    // one answering, not one that beats, not one never seen.
    let e = s.delete(&format!("/api/v1/nodes/{me}")).await.expect(409);
    assert!(e.to_string().contains("the one answering"), "{e}");
    let near = lab::domain::Node {
        id: "near-1".into(),
        last_seen: s.runner().store().clock_ms().await.unwrap(),
        ..gone.clone()
    };
    s.runner().store().beat_node(&near).await.unwrap();
    let e = s.delete("/api/v1/nodes/near-1").await.expect(409);
    assert!(
        e.to_string().contains("is up") && e.to_string().contains("only a down node"),
        "{e}"
    );
    s.delete("/api/v1/nodes/nope").await.expect(404);
    let said = ok(&labctl(&s, &["node", "forget", "gone-1"]));
    assert!(said.contains("gone-1 is forgotten"), "{said}");
    let ids: Vec<String> = s
        .get("/api/v1/nodes")
        .await
        .ok()
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        !ids.contains(&"gone-1".to_owned()) && ids.contains(&"near-1".to_owned()),
        "{ids:?}"
    );
    // Should it beat again, it is listed again.
    s.runner().store().beat_node(&gone).await.unwrap();
    let all = s.get("/api/v1/nodes").await.ok();
    assert!(all.to_string().contains("gone-1"), "{all}");
    s.stop().await;
}

/// Drained, a node refuses new runs (manual and AFK) and its state says so;
/// undrained, it starts them again. An unknown node is a 404.
async fn a_draining_node_starts_nothing_new(b: Backend) {
    let s = TestServer::start(b).await;
    let me = s.runner().node().to_owned();
    first_beat(&s).await;
    s.add_repo("r").await;
    let said = ok(&labctl(&s, &["node", "drain", &me]));
    assert!(said.contains("is draining"), "{said}");
    for (path, body) in [
        ("/api/v1/runs", json!({"repo": "r", "prompt": "no"})),
        ("/api/v1/repos/r/afk/start", json!(null)),
    ] {
        let e = s.post(path, body).await.expect(409);
        let said = e["error"]["message"].as_str().unwrap_or_default();
        assert!(said.contains("is draining"), "{path}: {e}");
    }
    let runs = s.get("/api/v1/runs").await.ok();
    assert_eq!(runs, json!([]), "a refused start writes nothing");
    // A beat keeps the operator's drain.
    tokio::time::sleep(std::time::Duration::from_millis(
        lab::domain::BEAT_MS as u64 + 500,
    ))
    .await;
    let all = s.get("/api/v1/nodes").await.ok();
    assert_eq!(all[0]["state"], "draining", "{all}");
    s.post("/api/v1/nodes/nope/drain", json!({}))
        .await
        .expect(404);
    let back = s
        .post(&format!("/api/v1/nodes/{me}/undrain"), json!({}))
        .await
        .expect(200);
    assert_eq!(back["state"], "up", "{back}");
    // The nodes page shows it and drains it too (with its form's token).
    let cookie = crate::pages_input::session(&s).await;
    let page = nodes_page(&s, &cookie).await;
    assert!(
        page.contains(&format!("data-node=\"{me}\"")) && page.contains("(this one)"),
        "{page}"
    );
    let csrf = crate::pages_input::csrf_of(&page);
    let r = crate::issue_pages::post_form(
        &s,
        &cookie,
        &format!("/nodes/{me}/drain"),
        &format!("csrf={csrf}"),
    )
    .await;
    assert_eq!(r.status(), 303);
    let all = s.get("/api/v1/nodes").await.ok();
    assert_eq!(all[0]["state"], "draining", "{all}");
    s.post(&format!("/api/v1/nodes/{me}/undrain"), json!({}))
        .await
        .expect(200);
    s.start_run("r", "now").await;

    // A down node gets a forget button (this one does not), which forgets it.
    let gone = down_node("gone-2");
    s.runner().store().beat_node(&gone).await.unwrap();
    let page = nodes_page(&s, &cookie).await;
    assert!(
        page.contains("action=\"/nodes/gone-2/forget\"")
            && !page.contains(&format!("action=\"/nodes/{me}/forget\""))
            && page.contains("one silent for 30 s is down"),
        "{page}"
    );
    let r =
        crate::issue_pages::post_form(&s, &cookie, "/nodes/gone-2/forget", &format!("csrf={csrf}"))
            .await;
    assert_eq!(r.status(), 303);
    let all = s.get("/api/v1/nodes").await.ok();
    assert!(!all.to_string().contains("gone-2"), "{all}");
    s.stop().await;
}
