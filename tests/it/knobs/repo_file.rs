//! A repo's `.lab.toml` (issue 27): it sets the repo layer (a refused one
//! keeps the last), its check command and label, read from a URL repo's
//! remote too.

use super::page;
use crate::on_both;
use crate::pages_input::session;
use crate::support::{Backend, TestServer, wait};
use serde_json::json;

on_both!(
    a_repo_file_sets_the_repo_layer_and_a_refused_one_keeps_the_last,
    a_repo_file_s_check_command_checks_the_pull_request,
    a_repo_file_s_label_is_the_one_taken_off_when_a_run_ends,
    a_url_repo_s_file_is_read_from_its_remote,
);

/// Commits `text` as the repo's `.lab.toml` on its default branch.
fn commit_lab_toml(repo: &std::path::Path, text: &str) {
    std::fs::write(repo.join(".lab.toml"), text).unwrap();
    crate::support::git::git(repo, &["add", ".lab.toml"]);
    crate::support::git::git(repo, &["commit", "-qm", "lab config"]);
}

/// A repo's `.lab.toml` may name its check command: with none set by the
/// operator, it is what an AFK run's pull request is checked with (red, a
/// second round, green).
async fn a_repo_file_s_check_command_checks_the_pull_request(b: Backend) {
    let s = TestServer::start(b).await;
    crate::afk::behave(&s, &crate::afk_follow::two_rounds(true));
    let repo = crate::afk::afk_repo(&s, "r").await;
    let path = std::path::PathBuf::from(repo["path"].as_str().unwrap());
    commit_lab_toml(&path, "check_command = \"test -f FIXED\"\n");
    let n = crate::afk::issue(&s, "r", "Make the file's check pass").await;
    crate::afk_follow::green_in_round_2(&s, n).await;
    let told = std::fs::read_to_string(s.tmp().join("records/round2.txt")).unwrap();
    assert!(
        told.contains("The check command is: test -f FIXED"),
        "{told}"
    );
    s.stop().await;
}

/// The label a repo's `.lab.toml` names is the one lab takes issues by and
/// the one it takes off when their run ends, so an issue whose run failed is
/// not taken again; the AFK status and the issue page's Ready button name it.
async fn a_repo_file_s_label_is_the_one_taken_off_when_a_run_ends(b: Backend) {
    let s = TestServer::start(b).await;
    crate::afk::behave(&s, "exit 3\n");
    let repo = crate::afk::afk_repo(&s, "r").await;
    let path = std::path::PathBuf::from(repo["path"].as_str().unwrap());
    commit_lab_toml(&path, "label = \"agent-ok\"\n");
    s.patch("/api/v1/settings", json!({"afk": {"max_attempts": 1}}))
        .await
        .ok();
    let n = s
        .post(
            "/api/v1/repos/r/issues",
            json!({"title": "t", "labels": ["agent-ok", "bug"]}),
        )
        .await
        .expect(201)["number"]
        .as_i64()
        .unwrap();
    let c = crate::afk::outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "failed", "{c}");
    let i = wait::until(
        "the file's label taken off",
        wait::secs(20).every_ms(100),
        async || {
            let i = s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok();
            let mut labels: Vec<String> = i["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_owned())
                .collect();
            labels.sort();
            if labels == ["bug", "lab:failed"] {
                Ok(i)
            } else {
                Err(i)
            }
        },
    )
    .await;
    assert!(!i["comments"].as_array().unwrap().is_empty(), "{i}");
    // Not taken again: a few more ticks make no second run.
    s.after_ticks(3).await;
    let runs = s.get("/api/v1/runs?kind=afk").await.ok();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    let st = s.get("/api/v1/afk/status").await.ok();
    assert_eq!(st["repos"][0]["label"], "agent-ok", "{st}");
    // The issue page's Ready button puts the file's label back.
    let cookie = session(&s).await;
    let page = page(&s, &cookie, &format!("/repos/r/issues/{n}")).await;
    assert!(page.contains("agent-ok"), "the page names the file's label");
    s.stop().await;
}

/// A repo given by URL: its `.lab.toml` is read from what the remote has
/// (lab fetches its mirror for the claim), before any run made the mirror.
async fn a_url_repo_s_file_is_read_from_its_remote(b: Backend) {
    let s = TestServer::start(b).await;
    crate::afk::behave(&s, "while :; do sleep 1; done\n");
    let src = crate::support::git::init_repo(&s.tmp(), "upstream");
    commit_lab_toml(&src, "label = \"from-remote\"\n[afk]\neffort = \"low\"\n");
    let url = format!("file://{}", src.display());
    s.post("/api/v1/repos", json!({"name": "u", "url": url}))
        .await
        .expect(201);
    s.patch("/api/v1/settings", json!({"afk": {"tick_seconds": 1}}))
        .await
        .ok();
    s.patch("/api/v1/repos/u", json!({"afk_enabled": true}))
        .await
        .ok();
    s.post(
        "/api/v1/repos/u/issues",
        json!({"title": "t", "labels": ["from-remote"]}),
    )
    .await
    .expect(201);
    let run = wait::until(
        "a run by the remote file's label",
        wait::secs(30).every_ms(100),
        async || {
            let st = s.get("/api/v1/afk/status").await.ok();
            st["recent"]
                .as_array()
                .unwrap()
                .first()
                .and_then(|c| c["run_id"].as_i64())
                .ok_or(st)
        },
    )
    .await;
    let r = s.wait_state(run, "running").await;
    assert_eq!(r["effort"], json!({"value": "low", "source": "repo file"}));
    let v = s.get("/api/v1/repos/u").await.ok();
    assert_eq!(v["config_file"]["label"], "from-remote", "{v}");
    s.stop().await;
}

/// A repo's `.lab.toml` is its repo layer under the operator's settings
/// (provenance `repo file`); a refused version keeps the last valid one,
/// says so on the repo (API and page) and on the next claimed issue.
async fn a_repo_file_sets_the_repo_layer_and_a_refused_one_keeps_the_last(b: Backend) {
    let s = TestServer::start(b).await;
    crate::afk::behave(&s, "while :; do sleep 1; done\n");
    let repo = crate::afk::afk_repo(&s, "r").await;
    let path = std::path::PathBuf::from(repo["path"].as_str().unwrap());
    let commit = |text: &str| commit_lab_toml(&path, text);
    commit("label = \"agent-ok\"\n[afk]\neffort = \"low\"\n[knobs]\nchangeScope = \"refactor\"\n");
    s.patch("/api/v1/repos/r", json!({"afk_max_concurrent": 3}))
        .await
        .ok();
    let n = s
        .post(
            "/api/v1/repos/r/issues",
            json!({"title": "t", "labels": ["agent-ok"]}),
        )
        .await
        .expect(201)["number"]
        .as_i64()
        .unwrap();
    let run = wait::until(
        "a run by the file's label",
        wait::secs(30).every_ms(100),
        async || {
            let st = s.get("/api/v1/afk/status").await.ok();
            st["recent"]
                .as_array()
                .unwrap()
                .first()
                .and_then(|c| c["run_id"].as_i64())
                .ok_or(st)
        },
    )
    .await;
    let r = s.wait_state(run, "running").await;
    assert_eq!(
        r["effort"],
        json!({"value": "low", "source": "repo file"}),
        "{r}"
    );
    assert_eq!(
        r["knobs"][0],
        json!({"key": "changeScope", "value": "refactor", "source": "repo file"})
    );
    let v = s.get("/api/v1/repos/r").await.ok();
    let good = v["config_file"]["commit"].as_str().unwrap().to_owned();
    assert!(v["config_file"]["error"].is_null(), "{v}");
    assert_eq!(v["config_file"]["label"], "agent-ok");
    // The repo page and labctl say what the file sets.
    let shown = page(&s, &session(&s).await, "/repos/r").await;
    let values = shown
        .split("id=\"config-file-values\"")
        .nth(1)
        .expect("the file's values on the repo page");
    assert!(
        values.contains("knobs.changeScope") && values.contains("refactor"),
        "{values}"
    );
    let out = crate::labctl::ok(&crate::labctl::labctl(&s, &["repo", "show", "r"]));
    assert!(out.contains("knobs.changeScope = refactor"), "{out}");
    assert!(out.contains("label = agent-ok"), "{out}");
    // The operator's word wins over the file's.
    s.patch("/api/v1/repos/r", json!({"afk_effort_default": "high"}))
        .await
        .ok();
    let res = s.get("/api/v1/repos/r/resolve?kind=afk").await.ok();
    assert_eq!(res["effort"]["source"], "repo.afk");
    // A broken version: refused whole, the last valid one kept.
    commit("label = \"agent-ok\"\n[afk]\nmodel = \"gpt-5.5\"\n");
    let second = s
        .post(
            "/api/v1/repos/r/issues",
            json!({"title": "u", "labels": ["agent-ok"]}),
        )
        .await
        .expect(201)["number"]
        .as_i64()
        .unwrap();
    let told = wait::until(
        "the claimed issue told",
        wait::secs(30).every_ms(100),
        async || {
            let i = s
                .get(&format!("/api/v1/repos/r/issues/{second}"))
                .await
                .ok();
            (!i["comments"].as_array().unwrap().is_empty()).then_some(i)
        },
    )
    .await;
    let c = told["comments"][0]["body"].as_str().unwrap();
    assert!(
        c.contains(&format!("the last valid version (commit {})", &good[..12])),
        "{c}"
    );
    assert!(
        c.contains("afk.model") && c.contains("unknown model 'gpt-5.5'"),
        "{c}"
    );
    let v = s.get("/api/v1/repos/r").await.ok();
    assert_eq!(
        v["config_file"]["commit"],
        good.as_str(),
        "the last valid version stays"
    );
    assert!(
        v["config_file"]["error"]
            .as_str()
            .unwrap()
            .contains("unknown model"),
        "{v}"
    );
    let cookie = session(&s).await;
    let page = page(&s, &cookie, "/repos/r").await;
    assert!(
        page.contains("id=\"config-file-error\""),
        "the repo page names the error"
    );
    let doctor = s.get("/api/v1/doctor").await.ok();
    assert!(
        doctor.to_string().contains(".lab.toml"),
        "lab doctor names it: {doctor}"
    );
    let _ = n;
    s.stop().await;
}
