//! Any node serves every run (issue 29 §2): each route of a run asked of a
//! node that does not own it is answered by the owner, through the API,
//! labctl and a real browser.

use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION};
use serde_json::{Value, json};

use super::{raw, three};
use crate::on_postgres;
use crate::pages_input::{client, csrf_of, session, visit};
use crate::support::{Backend, agent, wait};

on_postgres!(
    any_node_serves_every_run,
    a_browser_on_one_node_watches_and_answers_a_run_of_another,
);

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
