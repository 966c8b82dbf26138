//! How an AFK run that does not resolve its issue ends, on the built-in
//! tracker with the fake agent: a failure tried again and then recorded, a
//! run past its time limit, an operator's stop (its own outcome, never
//! retried).

use serde_json::json;

use crate::afk::{afk_repo, behave, issue, outcome, told};
use crate::on_both;
use crate::support::agent::pid_alive;
use crate::support::{Backend, TestServer, wait};

/// A failed attempt is tried again (`afk.max_attempts`, 2 by default) as a
/// new run of the same lineage, after a back-off; the last one's failure
/// goes on the issue.
async fn a_failing_agent_is_retried_then_recorded_as_failed(b: Backend) {
    let s = TestServer::start(b).await;
    behave(&s, "echo 'cannot do this: the tests are broken'\nexit 3\n");
    afk_repo(&s, "r").await;
    let rx = crate::notifications::Receiver::start().await;
    crate::notifications::notify(
        &s,
        json!([{"kind": "webhook", "url": format!("{}/hook", rx.url),
                "events": crate::notifications::ALL}]),
    )
    .await;
    let n = issue(&s, "r", "Impossible").await;
    let path = format!("/api/v1/repos/r/issues/{n}");
    // lab relabels the issue before it comments (a comment that fails is
    // posted again, a relabel is idempotent), so both are waited for.
    let i = wait::until(
        "the issue labelled lab:failed, with the last attempt's comment",
        wait::secs(60).every_ms(200),
        async || {
            let i = s.get(&path).await.ok();
            if i["labels"] == json!(["lab:failed"])
                && i["comments"].as_array().map(Vec::len) >= Some(2)
            {
                Ok(i)
            } else {
                Err(i)
            }
        },
    )
    .await;
    let comments: Vec<&str> = i["comments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["body"].as_str().unwrap())
        .collect();
    assert_eq!(comments.len(), 2, "{comments:?}");
    assert!(
        comments[0].contains("status 3")
            && comments[0].contains("lab tries this issue again (attempt 2 of at most 2)"),
        "{}",
        comments[0]
    );
    assert!(
        comments[1].contains("(attempt 2)") && comments[1].contains("status 3"),
        "{}",
        comments[1]
    );
    // Each attempt's end is told with its outcome and its issue.
    let got = rx.wait_for("hook", 2).await;
    for g in &got {
        let b = g.json();
        assert_eq!(b["outcome"], "failed", "{b}");
        assert_eq!(b["issue"]["number"], n, "{b}");
        assert_eq!(b["issue"]["repo"], "r", "{b}");
        assert_eq!(b["issue"]["title"], "Impossible", "{b}");
        let url = b["issue"]["url"].as_str().unwrap_or("");
        assert!(url.ends_with(&format!("/repos/r/issues/{n}")), "{b}");
        assert!(!url.contains("/api/"), "{b}");
    }
    let st = s.get("/api/v1/afk/status").await.ok();
    let claims: Vec<_> = st["recent"].as_array().unwrap().iter().rev().collect();
    assert_eq!(claims.len(), 2, "{st}");
    assert_eq!(
        claims
            .iter()
            .map(|c| (
                c["attempt"].as_i64().unwrap(),
                c["outcome"].as_str().unwrap()
            ))
            .collect::<Vec<_>>(),
        [(1, "failed"), (2, "failed")]
    );
    assert!(
        claims[0]["retry_at"].is_string() && claims[1]["retry_at"].is_null(),
        "{st}"
    );
    // What the agent printed stays on its run's page: the issue is told
    // the exit and the page, never the agent's bytes (the trust boundary).
    let detail = claims[1]["detail"].as_str().unwrap();
    assert!(
        detail.contains("status 3")
            && detail.contains(&format!("/runs/{}", claims[1]["run_id"]))
            && !detail.contains("the tests are broken"),
        "{detail}"
    );
    assert!(
        comments.iter().all(|c| !c.contains("the tests are broken")),
        "{comments:?}"
    );
    // The second run says which attempt it is, and for which issue.
    let run = s
        .get(&format!("/api/v1/runs/{}", claims[1]["run_id"]))
        .await
        .ok();
    assert_eq!(
        (run["attempt"].as_i64(), run["round"].as_i64()),
        (Some(2), Some(1)),
        "{run}"
    );
    assert_eq!(run["outcome"], "failed");
    assert_eq!(run["issue"]["number"], n);
    assert_eq!(run["issue"]["title"], "Impossible");
    assert_eq!(run["issue"]["repo"], "r");
    assert!(
        run["issue"]["url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/repos/r/issues/{n}")),
        "{run}"
    );
    // No third attempt, however often the scheduler looks.
    s.after_ticks(3).await;
    assert_eq!(
        s.get("/api/v1/runs?kind=afk")
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let ledger = s.get("/api/v1/afk/ledger").await.ok();
    assert_eq!(ledger["by_repo"][0]["repo"], "r", "{ledger}");
    assert_eq!(ledger["by_repo"][0]["runs"], 2, "{ledger}");
    assert_eq!(ledger["by_repo"][0]["failed"], 2, "{ledger}");
    assert_eq!(ledger["by_repo"][0]["retries"], 1, "{ledger}");
    assert_eq!(ledger["by_repo"][0]["rounds"], 2, "{ledger}");
    assert_eq!(ledger["by_model"][0]["model"], "sonnet", "{ledger}");
    // No success: no cost per success ("-"), not an unpriced one ("?");
    // no merge: none per merged pull request either.
    let out = crate::labctl::ok(&crate::labctl::labctl(&s, &["ledger"]));
    let line = out.lines().find(|l| l.starts_with("r ")).unwrap_or("");
    assert!(
        line.trim_end().ends_with("?     -            0       -"),
        "{out}"
    );
    s.stop().await;
}

/// A run that goes past the time limit is stopped, its process tree ended.
/// (A minute of a time limit lasts 15 s here.)
async fn a_hanging_agent_times_out(b: Backend) {
    let s = TestServer::start_tweaked(b, |c| c.limit_minute_ms = 15_000).await;
    behave(
        &s,
        "sh -c 'trap \"\" TERM HUP; sleep 100000' &\necho $! > \"$FAKE_REC/../hang-child.pid\"\nwhile :; do sleep 1; done\n",
    );
    afk_repo(&s, "r").await;
    s.patch(
        "/api/v1/settings",
        json!({"afk": {"run_timeout_minutes": 1, "max_attempts": 1}}),
    )
    .await
    .ok();
    let n = issue(&s, "r", "Hangs").await;
    // The agent records beside itself: its workspace's parent is hidden.
    let pid_file = s.tmp().join("records/hang-child.pid");
    let inner: i64 = wait::until(
        "the agent's child",
        wait::secs(60).every_ms(100),
        async || {
            // The shell creates the file before it writes the pid.
            std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
        },
    )
    .await;
    let run = s.get("/api/v1/runs?kind=afk").await.ok()[0].clone();
    let child = crate::support::agent::host_pid(run["pid"].as_i64().unwrap(), inner)
        .expect("the hanging child, seen from the host");
    assert!(pid_alive(child));
    let c = outcome(&s, "r", n, 90).await;
    assert_eq!(c["outcome"], "timed-out", "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains("longer than 1 minute"),
        "{c}"
    );
    let run = s.get(&format!("/api/v1/runs/{}", c["run_id"])).await.ok();
    assert_eq!(run["state"], "stopped");
    let ended = "the end of a child that ignores TERM (it survived the timeout)";
    wait::until(ended, wait::secs(4).every_ms(100), async || {
        !pid_alive(child)
    })
    .await;
    assert_eq!(told(&s, "r", n).await["labels"], json!(["lab:timed-out"]));
    s.stop().await;
}

/// An operator's stop of an AFK run is its own outcome (issue 40 §6):
/// `stopped`, labelled `lab:stopped`, not tried again although attempts are
/// left, and not a failure in the ledger. Putting the ready label back
/// starts it again.
async fn an_operator_s_stop_is_stopped_and_not_retried(b: Backend) {
    let s = TestServer::start(b).await;
    behave(&s, "while :; do sleep 1; done\n");
    afk_repo(&s, "r").await;
    s.patch("/api/v1/settings", json!({"afk": {"max_attempts": 3}}))
        .await
        .ok();
    let n = issue(&s, "r", "Stop me").await;
    let run = wait::until("the AFK run", wait::secs(30).every_ms(100), async || {
        let runs = s.get("/api/v1/runs?kind=afk").await.ok();
        runs[0]["state"]
            .as_str()
            .is_some_and(|st| st == "running")
            .then(|| runs[0].clone())
    })
    .await;
    let id = crate::support::id(&run);
    let out = crate::labctl::ok(&crate::labctl::labctl(&s, &["stop", &id.to_string()]));
    assert!(out.contains(&id.to_string()), "{out}");
    let c = outcome(&s, "r", n, 30).await;
    assert_eq!(c["outcome"], "stopped", "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains("An operator stopped the run"),
        "{c}"
    );
    assert!(c["retry_at"].is_null(), "not tried again by itself: {c}");
    let i = told(&s, "r", n).await;
    assert_eq!(i["labels"], json!(["lab:stopped"]), "{i}");
    assert!(
        i["comments"][0]["body"]
            .as_str()
            .unwrap()
            .contains("stopped by an operator"),
        "{i}"
    );
    let ledger = s.get("/api/v1/afk/ledger").await.ok();
    let row = &ledger["by_repo"][0];
    assert_eq!(
        (row["stopped"].as_i64(), row["failed"].as_i64()),
        (Some(1), Some(0)),
        "{ledger}"
    );
    // Several ticks later there is still one run: no attempt 2.
    s.after_ticks(3).await;
    let runs = s.get("/api/v1/runs?kind=afk").await.ok();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    // The operator says so: the ready label back, and it runs again.
    s.post(
        &format!("/api/v1/repos/r/issues/{n}/labels"),
        json!({"add": ["ready-for-agent"]}),
    )
    .await
    .ok();
    wait::until("a second run", wait::secs(30).every_ms(100), async || {
        let runs = s.get("/api/v1/runs?kind=afk").await.ok();
        (runs.as_array().unwrap().len() == 2).then_some(())
    })
    .await;
    s.stop().await;
}

on_both!(
    a_failing_agent_is_retried_then_recorded_as_failed,
    a_hanging_agent_times_out,
    an_operator_s_stop_is_stopped_and_not_retried,
);
