//! An AFK run's receipt (issue 28 §5): written by lab from what it did,
//! read through `GET /api/v1/runs/{id}/receipt` and on the pull request's
//! page.

use serde_json::json;

use crate::afk::{afk_repo, behave, issue};
use crate::afk_follow::{green_in_round_2, two_rounds};
use crate::on_both;
use crate::support::{Backend, TestServer, id};

on_both!(a_receipt_tells_each_round_and_check_of_a_pull_request);

/// Red, a check round, green: the receipt names both rounds and what
/// started them, both checks with their command, status and output, the
/// knobs and values with where each came from, the scope checked on the
/// branch, the attempt and the outcome. A manual run has none; a run's own
/// token cannot read it.
async fn a_receipt_tells_each_round_and_check_of_a_pull_request(b: Backend) {
    let s = TestServer::start(b).await;
    behave(&s, &two_rounds(true));
    afk_repo(&s, "r").await;
    s.patch(
        "/api/v1/repos/r",
        json!({"check_command": "echo checking; test -f FIXED",
               "knobs": {"writes": ["*.md", "FIXED"]}}),
    )
    .await
    .ok();
    let n = issue(&s, "r", "Make the check pass").await;
    let c = green_in_round_2(&s, n).await;
    let run = c["run_id"].as_i64().unwrap();
    let r = s.get(&format!("/api/v1/runs/{run}/receipt")).await.ok();
    assert_eq!(r["run_id"], run, "{r}");
    assert_eq!(r["issue"]["number"], n, "{r}");
    assert_eq!(r["pull_request"]["number"], 1, "{r}");
    let causes: Vec<(i64, &str)> = r["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["round"].as_i64().unwrap(), x["cause"].as_str().unwrap()))
        .collect();
    assert_eq!(causes, [(1, "issue"), (2, "check")], "{r}");
    let checks: Vec<(i64, Option<i64>)> = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["round"].as_i64().unwrap(), x["status"].as_i64()))
        .collect();
    assert_eq!(checks, [(1, Some(1)), (2, Some(0))], "{r}");
    assert_eq!(r["checks"][0]["command"], "echo checking; test -f FIXED");
    assert!(
        r["checks"][0]["output_tail"]
            .as_str()
            .unwrap()
            .contains("checking"),
        "{r}"
    );
    assert!(r["checks"][0]["duration_ms"].as_i64().unwrap() >= 0);
    assert_eq!(
        r["scope"],
        json!({"writes": ["*.md", "FIXED"], "state": "in-scope", "outside": null})
    );
    assert!(
        r["knobs"]
            .as_array()
            .unwrap()
            .contains(&json!({"key": "writes", "value": ["*.md", "FIXED"], "source": "repo"})),
        "{r}"
    );
    assert!(r["model"]["source"].is_string(), "{r}");
    assert_eq!(r["attempt"], 1);
    assert_eq!(r["outcome"], "pr-green");
    assert_eq!(r["phase"], "done");
    // labctl shows it, and its --json is the API's body.
    let out = crate::labctl::ok(&crate::labctl::labctl(&s, &["receipt", &run.to_string()]));
    assert!(
        out.contains("ROUND  CAUSE")
            && out.lines().any(|l| l.starts_with("2      check"))
            && out.contains("echo checking; test -f FIXED")
            && out.contains("in-scope (*.md, FIXED)"),
        "{out}"
    );
    let as_json = crate::labctl::ok(&crate::labctl::labctl(
        &s,
        &["receipt", &run.to_string(), "--json"],
    ));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&as_json).unwrap(),
        r
    );
    // The pull request's page shows it.
    let cookie = crate::pages_input::session(&s).await;
    let page = crate::pages_input::visit(&s, &cookie, reqwest::Method::GET, "/repos/r/pulls/1")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(r#"<div id="receipt""#)
            && page.contains("<li>round 2: check</li>")
            && page.contains("knob writes")
            && page.contains("in-scope (*.md, FIXED)"),
        "{page}"
    );
    // A manual run has none; a live run's token does not reach a receipt;
    // an unknown run is a 404.
    s.add_repo("m").await;
    let manual = s.start_run("m", "hello").await;
    let e = s
        .get(&format!("/api/v1/runs/{}/receipt", id(&manual)))
        .await
        .expect(409);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is a manual run"),
        "{e}"
    );
    let token = s.run_token(id(&manual)).await;
    let denied = s
        .send(
            reqwest::Client::new()
                .get(format!("{}/api/v1/runs/{run}/receipt", s.url))
                .bearer_auth(&token),
        )
        .await;
    assert_eq!(denied.status, 403, "{}", denied.body);
    s.get("/api/v1/runs/9999/receipt").await.expect(404);
    s.stop().await;
}
