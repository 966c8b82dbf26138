//! Where a machine cannot sandbox runs: a run that would ask nobody is
//! refused with the fix, unless the operator allowed it (per repo or
//! globally); every run says whether it is sandboxed, and only a sandboxed
//! one is told so (`IS_SANDBOX`).

use serde_json::json;

use crate::afk::issue;
use crate::on_both;
use crate::support::{Backend, TestServer, agent, id};

fn has_var(env: &[(String, String)], name: &str, value: &str) -> bool {
    env.iter().any(|(k, v)| k == name && v == value)
}

async fn without_a_sandbox_an_unattended_run_needs_the_operator_s_leave(b: Backend) {
    let s = TestServer::start_unsandboxed(b).await;
    // AFK off for the repo: only `afk start` starts its runs.
    s.add_repo("r").await;
    issue(&s, "r", "Work").await;
    // An AFK run acts without asking anyone (bypassPermissions): refused,
    // naming the fix, and nothing is recorded.
    let refused = s.post("/api/v1/repos/r/afk/start", json!(null)).await;
    let body = refused.expect(409);
    assert_eq!(body["error"]["code"], "unsandboxed", "{body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("bubblewrap") && msg.contains("--allow-unsandboxed"),
        "{msg}"
    );
    assert_eq!(
        s.get("/api/v1/runs").await.ok().as_array().unwrap().len(),
        0
    );
    // A manual run asks a person before it acts: it starts, unsandboxed.
    let manual = s.start_run("r", "stay").await;
    assert_eq!(manual["state"], "running", "{manual}");
    assert_eq!(manual["sandboxed"], false);
    let env = agent::env(&s.record(id(&manual), "env").await);
    assert!(!env.iter().any(|(k, _)| k == "IS_SANDBOX"), "{env:?}");
    // The operator allows it for this repo: the AFK run starts, and says so.
    let repo = s
        .patch("/api/v1/repos/r", json!({"allow_unsandboxed": true}))
        .await
        .ok();
    assert_eq!(repo["allow_unsandboxed"], true);
    let run = s
        .post("/api/v1/repos/r/afk/start", json!(null))
        .await
        .expect(201);
    assert_eq!(run["sandboxed"], false, "{run}");
    // Or globally, when the repo inherits.
    s.patch("/api/v1/repos/r", json!({"allow_unsandboxed": null}))
        .await
        .ok();
    let settings = s
        .patch(
            "/api/v1/settings",
            json!({"runs": {"allow_unsandboxed": true}}),
        )
        .await
        .ok();
    assert_eq!(settings["runs"]["allow_unsandboxed"], true);
    s.stop().await;
}

async fn a_sandboxed_run_says_so(b: Backend) {
    let s = TestServer::start(b).await;
    // AFK off for the repo: only `afk start` starts its runs.
    s.add_repo("r").await;
    issue(&s, "r", "Work").await;
    let run = s
        .post("/api/v1/repos/r/afk/start", json!(null))
        .await
        .expect(201);
    assert_eq!(run["sandboxed"], true, "{run}");
    let env = agent::env(&s.record(id(&run), "env").await);
    assert!(has_var(&env, "IS_SANDBOX", "1"), "{env:?}");
    assert!(has_var(&env, "TMPDIR", "/tmp"), "{env:?}");
    s.stop().await;
}

on_both!(
    without_a_sandbox_an_unattended_run_needs_the_operator_s_leave,
    a_sandboxed_run_says_so
);
