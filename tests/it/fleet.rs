//! One lab across machines (issue 29 §2–§5), with three nodes on this
//! machine (each its own data dir, port and tmux server; one PostgreSQL):
//! every route of a run through a node that does not own it; the node
//! credential refused from the outside and from a run; a node killed with
//! live AFK runs: its runs `lost` (`node down`) on the others within the
//! bound, its issues run again exactly once, and once back it takes its
//! manual run up again and closes the AFK sessions the fleet gave away.

use std::collections::HashMap;
use std::path::Path;

use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION};
use serde_json::{Value, json};

use crate::on_postgres;
use crate::pages_input::{client, csrf_of, session, visit};
use crate::support::process::LabProcess;
use crate::support::{Backend, TestServer, agent, git, wait};

on_postgres!(
    any_node_serves_every_run,
    a_browser_on_one_node_watches_and_answers_a_run_of_another,
    the_node_credential_is_refused_from_outside_and_from_a_run,
    a_dead_node_is_noticed_and_its_issues_run_again_once,
);

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

async fn any_node_serves_every_run(pg: Backend) {
    let nodes = three(&pg).await;
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    let b_id = b.runner().node().to_owned();
    a.add_repo("r").await;

    // Started through A, on B (`node`), answered by B.
    let run = a
        .post(
            "/api/v1/runs",
            json!({"repo": "r", "prompt": "FAKE_LINES=3", "node": b_id}),
        )
        .await
        .expect(201);
    let id = run["id"].as_i64().unwrap();
    assert_eq!(run["node"], b_id.as_str(), "{run}");
    b.wait_state(id, "running").await;
    // A node that does not exist, or a start on it, is refused plainly.
    let e = a
        .post("/api/v1/runs", json!({"repo": "r", "node": "nowhere"}))
        .await
        .expect(404);
    assert!(e.to_string().contains("nowhere"), "{e}");

    // Screen, output and input through C, which does not own the run.
    let screen = wait::until("the screen through C", wait::secs(10), async || {
        let (st, by, body) = raw(
            c,
            Method::GET,
            &format!("/api/v1/runs/{id}/screen?format=text"),
            None,
        )
        .await;
        (st == 200 && by == b_id && body.contains("fake-agent line 3"))
            .then_some(body.clone())
            .ok_or(format!("{st} {by} {body}"))
    })
    .await;
    assert!(screen.contains("\"state\":\"running\""), "{screen}");
    let (st, by, out) = raw(c, Method::GET, &format!("/api/v1/runs/{id}/output"), None).await;
    assert_eq!((st, by.as_str()), (200, b_id.as_str()), "{out}");
    assert!(out.contains("fake-agent line 1"), "{out}");
    let (st, by, body) = raw(
        c,
        Method::POST,
        &format!("/api/v1/runs/{id}/input"),
        Some(json!({"text": "typed-through-c"})),
    )
    .await;
    assert_eq!((st, by.as_str()), (202, b_id.as_str()), "{body}");
    wait::until(
        "the typed text on the screen, read through A",
        wait::secs(10),
        async || {
            let (_, _, body) = raw(
                a,
                Method::GET,
                &format!("/api/v1/runs/{id}/screen?format=text"),
                None,
            )
            .await;
            body.contains("typed-through-c").then_some(()).ok_or(body)
        },
    )
    .await;
    let (st, by, diff) = raw(c, Method::GET, &format!("/api/v1/runs/{id}/diff"), None).await;
    assert_eq!((st, by.as_str()), (200, b_id.as_str()), "{diff}");
    assert!(diff.contains("\"work_tree\":true"), "{diff}");
    // A bad input is B's clear refusal, passed on as it is.
    let (st, _, body) = raw(
        c,
        Method::POST,
        &format!("/api/v1/runs/{id}/input"),
        Some(json!({"keys": ["Nope"]})),
    )
    .await;
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("keys[0]"), "{body}");

    // The pages, through C: the run's page, its live screen, the start
    // form's node select.
    let cookie = session(c).await;
    let page = visit(c, &cookie, Method::GET, &format!("/runs/{id}")).await;
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["x-lab-served-by"], b_id.as_str());
    let page = page.text().await.unwrap();
    assert!(page.contains(&b_id), "the page names the node");
    let live = visit(c, &cookie, Method::GET, &format!("/live/runs/{id}")).await;
    assert_eq!(live.status(), 200);
    let mut live = live;
    let mut seen = String::new();
    while !seen.contains("event: screen") {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), live.chunk())
            .await
            .expect("a live event within 10 s")
            .unwrap()
            .expect("the stream goes on");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("typed-through-c"), "{seen}");
    drop(live);
    let form = visit(c, &cookie, Method::GET, "/runs/new")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        form.contains("name=\"node\"") && form.contains(&format!("value=\"{b_id}\"")),
        "the start form has a node select"
    );

    // The page's stop form, through C: B stops it.
    let stopped = client()
        .post(format!("{}/runs/{id}/stop", c.url))
        .header(COOKIE, &cookie)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(format!("csrf={}", csrf_of(&page)))
        .send()
        .await
        .unwrap();
    assert_eq!(stopped.status(), 303, "{}", stopped.text().await.unwrap());
    assert_eq!(stopped.headers()[LOCATION], format!("/runs/{id}").as_str());
    let ended = b
        .wait_run(id, 15, |r| {
            !["starting", "running", "waiting", "stopping"].contains(&r["state"].as_str().unwrap())
        })
        .await;
    assert_eq!(ended["state"], "stopped", "{ended}");

    // A second run on B, stopped and resumed through C; its session lost
    // on B first (resume takes a lost run).
    let run = c
        .post(
            "/api/v1/runs",
            json!({"repo": "r", "prompt": "hello", "node": b_id}),
        )
        .await
        .expect(201);
    let id2 = run["id"].as_i64().unwrap();
    b.wait_state(id2, "running").await;
    let (st, by, body) = raw(c, Method::POST, &format!("/api/v1/runs/{id2}/stop"), None).await;
    assert_eq!((st, by.as_str()), (200, b_id.as_str()), "{body}");
    let (st, by, body) = raw(c, Method::POST, &format!("/api/v1/runs/{id2}/resume"), None).await;
    assert_eq!(
        (st, by.as_str()),
        (409, b_id.as_str()),
        "a stopped run is not lost: B says so through C: {body}"
    );
    assert!(body.contains("lost"), "{body}");

    // A third run on B, started by labctl through C, loses its session on
    // B (its tmux session killed); resumed through C, B runs it again.
    let out = crate::labctl::ok(&crate::labctl::labctl(
        c,
        &["start", "r", "--node", &b_id, "--json", "--prompt", "stay"],
    ));
    let run3: Value = serde_json::from_str(&out).unwrap();
    let id3 = run3["id"].as_i64().unwrap();
    assert_eq!(run3["node"], b_id.as_str(), "{run3}");
    b.wait_state(id3, "running").await;
    agent::tmux(
        b.runner().tmux().socket(),
        &[
            "kill-session",
            "-t",
            &format!("={}", run3["session"].as_str().unwrap()),
        ],
    );
    b.wait_state(id3, "lost").await;
    let (st, by, body) = raw(c, Method::POST, &format!("/api/v1/runs/{id3}/resume"), None).await;
    assert_eq!((st, by.as_str()), (200, b_id.as_str()), "{body}");
    b.wait_state(id3, "running").await;

    // The start form through C, naming B: B starts it.
    let started = client()
        .post(format!("{}/runs/new", c.url))
        .header(COOKIE, &cookie)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(format!(
            "csrf={}&repo=r&node={b_id}&prompt=hi",
            csrf_of(&form)
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 303, "{}", started.text().await.unwrap());
    let to = started.headers()[LOCATION].to_str().unwrap().to_owned();
    let id4: i64 = to.trim_start_matches("/runs/").parse().unwrap();
    let run4 = a.get(&format!("/api/v1/runs/{id4}")).await.ok();
    assert_eq!(run4["node"], b_id.as_str(), "{run4}");

    // Removal through A of the first run: B removes its workspace.
    let (st, by, body) = raw(a, Method::DELETE, &format!("/api/v1/runs/{id}"), None).await;
    assert_eq!(st, 204, "{body}");
    assert_eq!(by, b_id);
    c.get(&format!("/api/v1/runs/{id}")).await.expect(404);

    // The runs' list names the node, on every node.
    let list = a.get("/api/v1/runs").await.ok();
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .all(|r| r["node"] == b_id.as_str()),
        "{list}"
    );
}

/// In real Chromium, logged in at C: B's run's page draws its screen live
/// and its reply box types into it, as on B itself.
async fn a_browser_on_one_node_watches_and_answers_a_run_of_another(pg: Backend) {
    use thirtyfour::prelude::*;
    let nodes = three(&pg).await;
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    a.add_repo("r").await;
    let run = crate::screen::scripted(
        b,
        "tui",
        &format!("{}\n{}", crate::screen::DRAW, crate::screen::READER),
    )
    .await;
    let rid = run["id"].as_i64().unwrap();
    b.record(rid, "drawn").await;
    let br = crate::support::browser::Browser::start(&c.url, "fleet/run_page").await;
    br.login(&c.token).await;
    br.go(&format!("/runs/{rid}")).await;
    let screen = br.driver.find(By::Id("screen")).await.unwrap();
    wait::until("B's drawing on C's page", wait::secs(10), async || {
        let t = screen.text().await.unwrap();
        t.contains("Do you want to proceed?").then_some(()).ok_or(t)
    })
    .await;
    let node = br.driver.find(By::Id("node")).await.unwrap();
    assert_eq!(node.text().await.unwrap(), b.runner().node());
    br.fill("text", "from C").await;
    br.submit("Send ⏎").await;
    wait::until("the reply at B's agent", wait::secs(10), async || {
        let got = String::from_utf8(b.record(rid, "typed").await).unwrap();
        (got == "from C\n").then_some(()).ok_or(got)
    })
    .await;
    wait::until("the echo on C's page", wait::secs(10), async || {
        let t = screen.text().await.unwrap();
        t.contains("from C").then_some(()).ok_or(t)
    })
    .await;
    br.shot("run_page_through_another_node").await;
    br.quit().await;
}

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

/// A node as a `lab serve` process in `home/<name>` on `url`, holding
/// nodes down after 3 s.
async fn node(home: &Path, name: &str, url: &str, agent: &Path) -> LabProcess {
    let dir = home.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    LabProcess::start(&dir, Some(url), agent, &[("LAB_NODE_DOWN_AFTER", "3")]).await
}

fn node_id(p: &LabProcess) -> String {
    std::fs::read_to_string(p.data_dir.join("node-id"))
        .unwrap()
        .trim()
        .to_owned()
}

async fn a_dead_node_is_noticed_and_its_issues_run_again_once(pg: Backend) {
    use sqlx::Connection;
    let url = pg.fresh_url().await.expect("a PostgreSQL database");
    let tmp = tempfile::Builder::new()
        .prefix("lab-fleet-")
        .tempdir()
        .unwrap();
    let bin = agent::install(tmp.path());
    // Every AFK run works until it is stopped.
    std::fs::write(tmp.path().join("afk.sh"), "sleep 600\n").unwrap();
    let a = node(tmp.path(), "a", &url, &bin).await;
    let mut b = node(tmp.path(), "b", &url, &bin).await;
    let c = node(tmp.path(), "c", &url, &bin).await;
    let sockets: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|n| tmp.path().join(n).join("tmux.sock"))
        .collect();
    let _tmux = scopeguard(sockets.clone());
    let (a_id, b_id) = (node_id(&a), node_id(&b));
    all_up(&a, 3).await;
    // Only B takes issues at first.
    a.post("/api/v1/afk/pause", json!(null)).await;
    a.patch(
        "/api/v1/settings",
        json!({"afk": {"tick_seconds": 1, "max_concurrent": 4, "max_attempts": 3}}),
    )
    .await
    .ok();
    a.post(&format!("/api/v1/nodes/{a_id}/drain"), json!(null))
        .await
        .ok();
    let c_id = node_id(&c);
    a.post(&format!("/api/v1/nodes/{c_id}/drain"), json!(null))
        .await
        .ok();
    let path = git::init_repo(tmp.path(), "r");
    a.post(
        "/api/v1/repos",
        json!({"name": "r", "path": path, "afk_enabled": true, "afk_max_concurrent": 2}),
    )
    .await
    .expect(201);
    for i in 1..=2 {
        a.post(
            "/api/v1/repos/r/issues",
            json!({"title": format!("issue {i}"), "labels": ["ready-for-agent"]}),
        )
        .await
        .expect(201);
    }
    let manual = b
        .post("/api/v1/runs", json!({"repo": "r", "prompt": "stay"}))
        .await
        .expect(201);
    let manual = manual["id"].as_i64().unwrap();
    a.post("/api/v1/afk/resume", json!(null)).await.ok();
    let afk_runs: Vec<i64> = wait::until("two AFK runs live on B", wait::secs(30), async || {
        let runs = a.get("/api/v1/runs?kind=afk&state=running").await.ok();
        let ids: Vec<i64> = runs
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["node"] == b_id.as_str())
            .map(|r| r["id"].as_i64().unwrap())
            .collect();
        (ids.len() == 2).then_some(ids).ok_or(runs)
    })
    .await;
    for n in [&a_id, &c_id] {
        a.post(&format!("/api/v1/nodes/{n}/undrain"), json!(null))
            .await
            .ok();
    }

    // B dies: no shutdown of any kind. Its tmux (and agents) live on.
    b.kill9();
    let killed = std::time::Instant::now();
    // Not down yet (it beat within the bound): not to be forgotten.
    let e = a.delete(&format!("/api/v1/nodes/{b_id}")).await.expect(409);
    assert!(e.to_string().contains("only a down node"), "{e}");
    for run in afk_runs.iter().chain([&manual]) {
        let r = wait::until(
            "B's run lost on the other nodes",
            wait::secs(20).every_ms(100),
            async || {
                let r = c.get(&format!("/api/v1/runs/{run}")).await.ok();
                (r["state"] == "lost").then_some(r.clone()).ok_or(r)
            },
        )
        .await;
        assert!(
            r["state_reason"].as_str().unwrap().contains("node down"),
            "{r}"
        );
    }
    // Within the bound (3 s), a beat (1 s) and the test's own pace.
    assert!(
        killed.elapsed().as_secs() < 10,
        "noticed after {:?}",
        killed.elapsed()
    );
    // Its runs' screens and sessions are on B: asked of C, a conflict
    // naming B (not a 500, not a blank screen).
    for (m, path, body) in [
        (Method::GET, format!("/api/v1/runs/{manual}/screen"), None),
        (
            Method::POST,
            format!("/api/v1/runs/{manual}/input"),
            Some(json!({"text": "x"})),
        ),
        (Method::GET, format!("/api/v1/runs/{manual}/output"), None),
    ] {
        let (st, by, text) = raw(&c, m, &path, body).await;
        assert_eq!((st, by.as_str()), (409, ""), "{path}: {text}");
        assert!(text.contains(&b_id), "{path}: {text}");
    }
    let nodes = a.get("/api/v1/nodes").await.ok();
    let b_row = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == b_id.as_str())
        .unwrap();
    assert_eq!(b_row["state"], "down", "{nodes}");

    // Each issue runs again, once, elsewhere; the issue is told.
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    wait::until("both issues running again on A or C", wait::secs(30), async || {
        let live: Vec<(i64, String, i64)> =
            sqlx::query_as("SELECT issue_number, node, attempt FROM afk_claims WHERE active ORDER BY issue_number")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        (live.len() == 2 && live.iter().all(|(_, n, at)| *n != b_id && *at == 2))
            .then_some(())
            .ok_or(format!("{live:?}"))
    })
    .await;
    for n in 1..=2 {
        let issue = wait::until("the issue told", wait::secs(15), async || {
            let i = a.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok();
            let told = i["comments"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["body"].as_str().unwrap().contains("node down"));
            told.then_some(i.clone()).ok_or(i)
        })
        .await;
        let text = issue["comments"].to_string();
        assert!(text.contains(&b_id) && text.contains("workspace"), "{text}");
    }
    // Down, its runs lost and its claims taken over, B can be forgotten (a
    // machine retired); its runs still name it.
    a.delete(&format!("/api/v1/nodes/{b_id}")).await.expect(204);
    let nodes = c.get("/api/v1/nodes").await.ok();
    assert!(!nodes.to_string().contains(&b_id), "{nodes}");
    let (st, _, text) = raw(
        &c,
        Method::GET,
        &format!("/api/v1/runs/{manual}/screen"),
        None,
    )
    .await;
    assert_eq!(st, 409, "{text}");
    assert!(text.contains(&b_id), "{text}");

    // B comes back: its manual run is taken up again, its AFK sessions
    // closed (their issues went elsewhere), nothing runs twice.
    let b = LabProcess::start(
        &b.data_dir.clone(),
        Some(&url),
        &bin,
        &[("LAB_NODE_DOWN_AFTER", "3")],
    )
    .await;
    let back = b.wait_state(manual, "running").await;
    assert_eq!(back["state_reason"], Value::Null, "{back}");
    let nodes = a.get("/api/v1/nodes").await.ok();
    assert!(
        nodes.to_string().contains(&b_id),
        "B, back, is listed again: {nodes}"
    );
    wait::until("B's AFK sessions closed", wait::secs(15), async || {
        let panes = agent::tmux(&sockets[1], &["list-sessions", "-F", "#{session_name}"]);
        let left: Vec<&i64> = afk_runs
            .iter()
            .filter(|r| panes.lines().any(|l| l.ends_with(&format!("-{r}"))))
            .collect();
        left.is_empty().then_some(()).ok_or(panes)
    })
    .await;
    for r in &afk_runs {
        let r = b.get(&format!("/api/v1/runs/{r}")).await.ok();
        assert_eq!(r["state"], "lost", "{r}");
    }
    b.after_afk_ticks(2).await;
    let claims: Vec<(i64, String)> = sqlx::query_as("SELECT issue_number, node FROM afk_claims")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    let mut per: HashMap<i64, usize> = HashMap::new();
    for (i, _) in &claims {
        *per.entry(*i).or_default() += 1;
    }
    assert_eq!(per, HashMap::from([(1, 2), (2, 2)]), "{claims:?}");
    let _ = a_id;
}

/// Kills the tmux servers of `sockets` when dropped.
struct TmuxGuard(Vec<std::path::PathBuf>);
impl Drop for TmuxGuard {
    fn drop(&mut self) {
        for s in &self.0 {
            agent::kill_tmux(s);
        }
    }
}
fn scopeguard(sockets: Vec<std::path::PathBuf>) -> TmuxGuard {
    TmuxGuard(sockets)
}
