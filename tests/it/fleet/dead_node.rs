//! A dead node is noticed (issue 29 §3): `kill -9` of a node with live AFK
//! runs and a manual one, its runs `lost` on the others within the bound,
//! its issues run again exactly once elsewhere, the node forgotten only
//! once down; back, it takes its manual run up again and closes the AFK
//! sessions the fleet gave away.

use std::collections::HashMap;
use std::path::Path;

use reqwest::Method;
use serde_json::{Value, json};

use super::{all_up, raw};
use crate::on_postgres;
use crate::support::process::LabProcess;
use crate::support::{Backend, agent, git, wait};

on_postgres!(a_dead_node_is_noticed_and_its_issues_run_again_once);

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
