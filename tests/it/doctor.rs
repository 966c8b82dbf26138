//! `lab doctor`, `labctl doctor`, and the same findings in `lab serve`'s log.

use std::process::Command;

use crate::on_both;
use crate::support::process::LabProcess;
use crate::support::{Backend, TestServer, agent, wait};

/// A CLI from before lab's time: its version is not the pinned one and it
/// rejects `--effort`.
fn old_claude(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("old-claude");
    crate::support::agent::write_script(
        &p,
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '1.0.0 (Claude Code)'; exit 0; fi\n\
         echo \"error: unknown option '--effort'\" >&2; exit 1\n",
    );
    p
}

/// Runs `lab doctor` on `data` with `env`: its exit code and what it printed.
pub(crate) fn lab_doctor(
    data: &std::path::Path,
    db: Option<&str>,
    env: &[(&str, &std::path::Path)],
) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lab"));
    cmd.arg("doctor")
        .arg("--data-dir")
        .arg(data)
        .env("HOME", data.with_extension("home"));
    for v in ["LAB_CLAUDE_CODE_BIN", "LAB_CODEX_BIN"] {
        cmd.env_remove(v);
    }
    if let Some(db) = db {
        cmd.arg("--database-url").arg(db);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

async fn doctor_fails_on_a_cli_that_rejects_labs_argv(b: Backend) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let db = b.fresh_url().await;
    let old = old_claude(tmp.path());
    let (code, out) = lab_doctor(&data, db.as_deref(), &[("LAB_CLAUDE_CODE_BIN", &old)]);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains(
            "FAIL  claude-code rejects lab's command line: error: unknown option '--effort'"
        ),
        "{out}"
    );
    assert!(
        out.contains("1.0.0") && out.contains("lab was checked with 2.1.332"),
        "{out}"
    );
    assert!(
        out.contains("ok    tmux") && out.contains("ok    git"),
        "{out}"
    );

    // And `lab serve` logs the same, as warnings, at start-up.
    let lab = LabProcess::start(&data, db.as_deref(), &old, &[]).await;
    let warned = "the rejection in lab serve's log";
    let log = wait::until(warned, wait::secs(10).every_ms(100), async || {
        let log = lab.log();
        if log.contains("rejects lab's command line") {
            Ok(log)
        } else {
            Err(log)
        }
    })
    .await;
    assert!(
        log.contains("WARN") && log.contains("rejects lab's command line"),
        "{log}"
    );
    drop(lab);
    agent::kill_tmux(&data.join("tmux.sock"));
}

async fn labctl_doctor_asks_the_server(b: Backend) {
    let s = TestServer::start(b).await;
    // The fake agent is no real CLI: its version is not the pinned one.
    let out = crate::labctl::labctl(&s, &["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(1), "an error found is a failure");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let areas: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["area"].as_str().unwrap())
        .collect();
    for a in [
        "tmux",
        "git",
        "data dir",
        "database",
        "claude-code",
        "codex",
    ] {
        assert!(areas.contains(&a), "{a} missing: {v}");
    }
    assert_eq!(v["worst"], "error", "{v}");
    let out = crate::labctl::labctl(&s, &["doctor"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok    tmux"));
    s.stop().await;
}

/// A CLI that never answers: the doctor still answers within its one
/// limit (its checks run side by side), naming the CLI that did not answer.
async fn the_doctor_answers_in_time_when_a_cli_hangs(b: Backend) {
    let hang_dir = tempfile::tempdir().unwrap();
    let hang = hang_dir.path().join("hanging-cli");
    agent::write_script(&hang, "#!/bin/sh\nexec sleep 1000\n");
    let s = TestServer::start_tweaked(b, |c| {
        for p in ["claude-code", "codex"] {
            c.provider_bins.insert(p.parse().unwrap(), hang.clone());
        }
    })
    .await;
    let began = std::time::Instant::now();
    let v = s.get("/api/v1/doctor").await.ok();
    let took = began.elapsed();
    assert!(
        took <= lab::doctor::LIMIT + std::time::Duration::from_secs(3),
        "the doctor took {took:?}"
    );
    for p in ["claude-code", "codex"] {
        let f = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["area"] == p && f["level"] == "error")
            .unwrap_or_else(|| panic!("no error for {p}: {v}"));
        let msg = f["message"].as_str().unwrap();
        assert!(
            msg.contains("hanging-cli") && msg.contains("did not answer"),
            "{msg}"
        );
    }
    for a in ["tmux", "git", "database"] {
        assert!(
            v["findings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["area"] == a && f["level"] == "ok"),
            "{a}: {v}"
        );
    }
    s.stop().await;
}

/// The doctor says whether runs are sandboxed here, and without a sandbox
/// names what is refused and the fix.
async fn the_doctor_reports_the_sandbox(b: Backend) {
    let sandbox = |v: &serde_json::Value| {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["area"] == "sandbox")
            .cloned()
            .unwrap_or_else(|| panic!("no sandbox finding: {v}"))
    };
    let s = TestServer::start(b.clone()).await;
    let v = s.get("/api/v1/doctor").await.ok();
    let f = sandbox(&v);
    assert_eq!(f["level"], "ok", "{f}");
    assert!(f["message"].as_str().unwrap().contains("user 1000"), "{f}");
    // And whether runs' memory and processes are capped (cgroups).
    let limits = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["area"] == "limits")
        .cloned()
        .unwrap_or_else(|| panic!("no limits finding: {v}"));
    assert_eq!(limits["level"], "ok", "{limits}");
    assert!(
        limits["message"].as_str().unwrap().contains("cgroup v"),
        "{limits}"
    );
    s.stop().await;
    let s = TestServer::start_unsandboxed(b).await;
    let f = sandbox(&s.get("/api/v1/doctor").await.ok());
    assert_eq!(f["level"], "error", "{f}");
    assert!(f["message"].as_str().unwrap().contains("refused"), "{f}");
    assert!(f["fix"].as_str().unwrap().contains("bubblewrap"), "{f}");
    s.stop().await;
}

on_both!(
    doctor_fails_on_a_cli_that_rejects_labs_argv,
    labctl_doctor_asks_the_server,
    the_doctor_answers_in_time_when_a_cli_hangs,
    the_doctor_reports_the_sandbox,
);
