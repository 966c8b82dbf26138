//! AFK runs end to end on the built-in tracker, with the fake agent.

use serde_json::{Value, json};

use crate::on_both;
use crate::support::api::Api;
use crate::support::{Backend, TestServer, wait};

/// What the fake agent does in an AFK run (written next to its records).
pub(crate) fn behave(s: &TestServer, script: &str) {
    std::fs::write(s.tmp().join("afk.sh"), script).unwrap();
}

const RESOLVES: &str = r#"
labctl issue view "$LAB_ISSUE" > "$FAKE_REC/../issue-seen.txt" 2>&1 || exit 9
echo "fixed" > FIX.md
git add FIX.md
git -c user.name=agent -c user.email=agent@example.com commit -qm "Fix issue $LAB_ISSUE" || exit 8
labctl pr create --title "Fix issue $LAB_ISSUE" --body "Resolves #$LAB_ISSUE" || exit 7
"#;

pub(crate) async fn afk_repo(s: &TestServer, name: &str) -> Value {
    s.add_repo(name).await;
    s.patch("/api/v1/settings", json!({"afk": {"tick_seconds": 1}}))
        .await
        .ok();
    s.patch(
        &format!("/api/v1/repos/{name}"),
        json!({"afk_enabled": true}),
    )
    .await
    .ok()
}

pub(crate) async fn issue(s: &TestServer, repo: &str, title: &str) -> i64 {
    let v = s
        .post(
            &format!("/api/v1/repos/{repo}/issues"),
            json!({"title": title, "body": "please", "labels": ["ready-for-agent"]}),
        )
        .await
        .expect(201);
    v["number"].as_i64().unwrap()
}

/// Waits for the AFK claim of an issue to have an outcome.
pub(crate) async fn outcome(s: &TestServer, repo: &str, number: i64, secs: u64) -> Value {
    let what = format!("an outcome for {repo}#{number}");
    wait::until(what, wait::secs(secs).every_ms(200), async || {
        let st = s.get("/api/v1/afk/status").await.ok();
        st["recent"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["repo"] == repo && c["issue"] == number && !c["outcome"].is_null())
            .cloned()
            .ok_or(st)
    })
    .await
}

/// Waits (up to 10 s) for issue `number` to be commented on.
pub(crate) async fn told(s: &TestServer, repo: &str, number: i64) -> Value {
    let path = format!("/api/v1/repos/{repo}/issues/{number}");
    let what = format!("a comment on issue {number}");
    wait::until(what, wait::secs(10).every_ms(100), async || {
        let i = s.get(&path).await.ok();
        (!i["comments"].as_array().unwrap().is_empty()).then_some(i)
    })
    .await
}

async fn a_resolving_agent_succeeds_with_a_pull_request(b: Backend) {
    let s = TestServer::start(b).await;
    behave(&s, RESOLVES);
    afk_repo(&s, "r").await;
    s.patch(
        "/api/v1/repos/r",
        json!({"afk_options": {"ultracode": "true"}}),
    )
    .await
    .ok();
    let n = issue(&s, "r", "Make it faster").await;
    let c = outcome(&s, "r", n, 30).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    assert_eq!(c["checks"], "none", "{c}");
    // The provider applied the repo's AFK option to lab's prompt: the
    // agent's last argument is the directive, then the template.
    let argv = crate::support::agent::argv(&s.record(c["run_id"].as_i64().unwrap(), "argv").await);
    let last = String::from_utf8(argv.last().unwrap().clone()).unwrap();
    assert!(
        last.starts_with("ultracode:") && last.contains(&format!("labctl issue view {n}")),
        "{last}"
    );
    let pr_url = c["pr_url"].as_str().unwrap().to_owned();
    // The agent read the issue through labctl, with its run token.
    let seen = std::fs::read_to_string(s.tmp().join("records").join("issue-seen.txt")).unwrap();
    assert!(
        seen.contains("Make it faster") && seen.contains("please"),
        "{seen}"
    );
    // The pull request is recorded, from the run's branch, for the issue.
    let pulls = s.get("/api/v1/repos/r/pulls").await.ok();
    let pr = &pulls[0];
    assert_eq!(pr["url"], pr_url.as_str());
    assert_eq!(pr["issue"], n);
    let run = s.get(&format!("/api/v1/runs/{}", c["run_id"])).await.ok();
    assert_eq!(run["kind"], "afk");
    assert_eq!(pr["head"], run["branch"]);
    assert_eq!(pr["base"], "main");
    // The run's prompt is lab's template, naming the issue and the branch.
    let prompt = run["prompt"].as_str().unwrap();
    assert!(
        prompt.contains(&format!("labctl issue view {n}"))
            && prompt.contains(run["branch"].as_str().unwrap()),
        "{prompt}"
    );
    // The branch holds the agent's commit.
    let repo_path = s.get("/api/v1/repos/r").await.ok()["path"]
        .as_str()
        .unwrap()
        .to_owned();
    let log = std::process::Command::new("git")
        .args([
            "-C",
            &repo_path,
            "log",
            "--format=%s",
            run["branch"].as_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&log.stdout).contains(&format!("Fix issue {n}")));
    // The issue is relabelled and commented with the pull request.
    let i = told(&s, "r", n).await;
    let labels: Vec<&str> = i["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(labels, ["lab:pr-green"]);
    assert!(
        i["comments"][0]["body"].as_str().unwrap().contains(&pr_url),
        "{i}"
    );
    // And it is not taken again, however often the scheduler looks.
    s.after_ticks(2).await;
    let runs = s.get("/api/v1/runs?kind=afk").await.ok();
    assert_eq!(runs.as_array().unwrap().len(), 1);
    // Told, the claim is done on this node: its state is gone.
    wait::until("the claim's state forgotten", wait::secs(10), async || {
        s.scheduler().claims_held() == 0
    })
    .await;
    // Merged, the pull request closes the issue it resolves, as a forge
    // does (issue 40 §7); the issue keeps its outcome label.
    let number = pr["number"].as_i64().unwrap();
    s.post(
        &format!("/api/v1/repos/r/pulls/{number}/merge"),
        json!(null),
    )
    .await
    .expect(200);
    let i = s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok();
    assert_eq!(i["state"], "closed", "{i}");
    assert_eq!(i["labels"], json!(["lab:pr-green"]), "{i}");
    let last = i["comments"].as_array().unwrap().last().unwrap();
    assert!(
        last["body"]
            .as_str()
            .unwrap()
            .contains(&format!("pull request #{number} was merged")),
        "{i}"
    );
    s.stop().await;
}

/// Resuming the paused scheduler ticks at once: with the next tick an hour
/// away, the ready issue's run starts as soon as the scheduler resumes.
async fn resuming_the_scheduler_ticks_at_once(b: Backend) {
    let s = TestServer::start(b).await;
    behave(&s, "while :; do sleep 1; done\n");
    s.patch("/api/v1/settings", json!({"afk": {"tick_seconds": 3600}}))
        .await
        .ok();
    s.post("/api/v1/afk/pause", json!(null)).await.ok();
    s.add_repo("r").await;
    s.patch("/api/v1/repos/r", json!({"afk_enabled": true}))
        .await
        .ok();
    let n = issue(&s, "r", "Now").await;
    s.post("/api/v1/afk/resume", json!(null)).await.ok();
    let runs = wait::until("the AFK run", wait::secs(20).every_ms(100), async || {
        let runs = s.get("/api/v1/runs?kind=afk").await.ok();
        (!runs.as_array().unwrap().is_empty()).then_some(runs)
    })
    .await;
    assert_eq!(runs[0]["issue"]["number"], n, "{runs}");
    // The tick that started it (counted once it is over).
    wait::until("the resume's tick", wait::secs(20), async || {
        s.scheduler().ticks() >= 1
    })
    .await;
    s.stop().await;
}

/// A run's token reaches its repo's issues and its own pull request, nothing
/// else, and stops working when the run ends.
async fn the_run_token_is_scoped_to_its_run(b: Backend) {
    let s = TestServer::start(b).await;
    behave(&s, "while :; do sleep 1; done\n");
    afk_repo(&s, "r").await;
    s.add_repo("other").await;
    let n = issue(&s, "r", "Scoped").await;
    issue(&s, "other", "Not yours").await;
    let run = wait::until("an AFK run", wait::secs(60).every_ms(100), async || {
        let runs = s.get("/api/v1/runs?kind=afk").await.ok();
        runs.as_array().unwrap().first().cloned()
    })
    .await;
    let id = run["id"].as_i64().unwrap();
    let env = crate::support::agent::env(&s.record(id, "env").await);
    let token = s.run_token(id).await;
    assert_eq!(
        env.iter().find(|(k, _)| k == "LAB_ISSUE").unwrap().1,
        n.to_string()
    );
    assert_eq!(
        env.iter().find(|(k, _)| k == "LAB_RUN_KIND").unwrap().1,
        "afk"
    );
    let as_run = Api::new(s.url.clone(), token.clone());
    use reqwest::Method;
    for (m, path, want) in [
        (Method::GET, "/api/v1/repos/r/issues".to_owned(), 200),
        (Method::GET, format!("/api/v1/repos/r/issues/{n}"), 200),
        (Method::GET, format!("/api/v1/runs/{id}"), 200),
        (Method::GET, "/api/v1/repos/other/issues".to_owned(), 403),
        (Method::GET, "/api/v1/repos".to_owned(), 403),
        (Method::GET, "/api/v1/settings".to_owned(), 403),
        (Method::GET, "/api/v1/runs".to_owned(), 403),
        (Method::POST, "/api/v1/repos/r/issues".to_owned(), 403),
        (Method::POST, format!("/api/v1/runs/{id}/stop"), 403),
        (Method::POST, format!("/api/v1/runs/{}/pull", id + 1), 403),
        (Method::GET, "/api/v1/afk/status".to_owned(), 403),
        // An agent may not set directives, its own issue's or another's
        // (one run's word never reaches another run), nor read the knobs.
        (Method::PATCH, format!("/api/v1/repos/r/issues/{n}"), 403),
        (
            Method::PATCH,
            format!("/api/v1/repos/r/issues/{}", n + 1),
            403,
        ),
        (Method::PATCH, "/api/v1/repos/r".to_owned(), 403),
        (Method::GET, "/api/v1/knobs".to_owned(), 403),
        // Its word never decides a plan, its issue's or another's, and it
        // submits plans for itself only.
        (
            Method::POST,
            format!("/api/v1/repos/r/issues/{n}/plan/approve"),
            403,
        ),
        (
            Method::POST,
            format!("/api/v1/repos/r/issues/{n}/plan/reject"),
            403,
        ),
        (
            Method::GET,
            format!("/api/v1/repos/r/issues/{n}/plans"),
            403,
        ),
        (Method::POST, format!("/api/v1/runs/{}/plan", id + 1), 403),
        // Nor a verdict on another run's pull request, nor lists them.
        (Method::POST, format!("/api/v1/runs/{}/review", id + 1), 403),
        // Nor does it see or drain the fleet's nodes.
        (Method::GET, "/api/v1/nodes".to_owned(), 403),
        (
            Method::POST,
            format!("/api/v1/nodes/{}/drain", s.runner().node()),
            403,
        ),
        (
            Method::GET,
            format!("/api/v1/repos/r/issues/{n}/reviews"),
            403,
        ),
    ] {
        let r = as_run
            .send(as_run.req(m.clone(), &path).json(&json!({})))
            .await;
        assert_eq!(r.status.as_u16(), want, "{m} {path}: {}", r.body);
    }
    // Pages do not take it either.
    let page = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = page
        .get(format!("{}/settings", s.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303, "the pages want a browser session");
    // Once the run ends, the token is dead.
    s.post(&format!("/api/v1/runs/{id}/stop"), json!(null))
        .await
        .ok();
    let r = as_run.get("/api/v1/repos/r/issues").await;
    assert_eq!(r.status, 401);
    // Forge tokens never reach a run: nothing LAB_* but lab's own four, and
    // the admin token nowhere in the environment.
    assert!(env.iter().all(|(_, v)| !v.contains(&s.token)));
    s.stop().await;
}

async fn afk_start_says_why_not(b: Backend) {
    let s = TestServer::start(b).await;
    behave(&s, "while :; do sleep 1; done\n");
    s.add_repo("r").await;
    // No issue yet.
    let e = s
        .post("/api/v1/repos/r/afk/start", json!(null))
        .await
        .expect(409);
    assert_eq!(e["error"]["code"], "no_ready_issue");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ready-for-agent"),
        "{e}"
    );
    let n = issue(&s, "r", "One").await;
    issue(&s, "r", "Two").await;
    // Paused.
    s.post("/api/v1/afk/pause", json!(null)).await.ok();
    let e = s
        .post("/api/v1/repos/r/afk/start", json!(null))
        .await
        .expect(409);
    assert_eq!(e["error"]["code"], "paused");
    s.post("/api/v1/afk/resume", json!(null)).await.ok();
    s.post("/api/v1/repos/r/afk/pause", json!(null)).await.ok();
    assert_eq!(
        s.post("/api/v1/repos/r/afk/start", json!(null))
            .await
            .expect(409)["error"]["code"],
        "paused"
    );
    s.post("/api/v1/repos/r/afk/resume", json!(null)).await.ok();
    // Started (AFK need not be on for an operator's start), then the cap.
    let run = s
        .post("/api/v1/repos/r/afk/start", json!(null))
        .await
        .expect(201);
    assert_eq!(run["kind"], "afk");
    let e = s
        .post("/api/v1/repos/r/afk/start", json!(null))
        .await
        .expect(409);
    assert_eq!(e["error"]["code"], "cap_reached", "{e}");
    let st = s.get("/api/v1/afk/status").await.ok();
    assert_eq!(st["live"], 1);
    assert_eq!(st["recent"][0]["issue"], n);
    s.stop().await;
}

on_both!(
    a_resolving_agent_succeeds_with_a_pull_request,
    resuming_the_scheduler_ticks_at_once,
    the_run_token_is_scoped_to_its_run,
    afk_start_says_why_not,
);
