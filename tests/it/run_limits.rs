//! Limits on every run (issue 23, ADR 24): a memory cap that ends a run
//! past it `failed`, out of memory, while lab and the other runs go on; a
//! process cap; a size cap on the private `/tmp`; the caps as applied in
//! the run's body and the settings that set them.

use serde_json::json;

use crate::on_both;
use crate::support::{Backend, TestServer, agent, id};

/// A run over its memory limit ends `failed`, out of memory; another run
/// and lab itself go on.
async fn a_run_over_its_memory_limit_ends_out_of_memory(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    s.add_repo("other").await;
    s.patch("/api/v1/repos/r", json!({"memory_max_mb": 64}))
        .await
        .expect(200);
    let bystander = s.working_run("other").await;
    let hog = s.tmp().join("hog.sh");
    agent::write_script(
        &hog,
        "python3 -c 'import time; x = bytearray(400 * 1024 * 1024); time.sleep(60)'\nsleep 60\n",
    );
    let run = s
        .start_run("r", &format!("FAKE_RUN={}", hog.display()))
        .await;
    assert_eq!(run["limits"]["memory_max_mb"], 64, "{run}");
    let ended = s.wait_run(id(&run), 30, |r| r["state"] != "running").await;
    assert_eq!(ended["state"], "failed", "{ended}");
    let reason = ended["state_reason"].as_str().unwrap();
    assert!(reason.contains("out of memory"), "{reason}");
    // The other run lives on, and lab answers.
    let other = s
        .get(&format!("/api/v1/runs/{}", id(&bystander)))
        .await
        .ok();
    assert_eq!(other["state"], "running", "{other}");
    assert_eq!(other["limits"]["memory_max_mb"], 8192, "{other}");
    let st = s.get("/api/v1/status").await.ok();
    assert_eq!(st["sandbox"]["view"], "deny-by-default", "{st}");
    assert_eq!(st["sandbox"]["uid"], 1000, "{st}");
    assert_ne!(st["sandbox"]["cgroups"], "none", "{st}");
    s.stop().await;
}

/// A process cap holds however many processes the agent starts, and the
/// private `/tmp` cannot grow past its size.
async fn processes_and_tmp_are_capped(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    s.patch("/api/v1/repos/r", json!({"pids_max": 40}))
        .await
        .expect(200);
    let script = s.tmp().join("fork.sh");
    agent::write_script(
        &script,
        r#"python3 - > "$FAKE_REC/jobs" <<'PY'
import os, time
kids = []
for i in range(100):
    try:
        pid = os.fork()
    except OSError:
        continue
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
print(len(kids))
for k in kids:
    os.kill(k, 9)
    os.waitpid(k, 0)
PY
if dd if=/dev/zero of=/tmp/big bs=1M count=1100 2>"$FAKE_REC/dd"; then echo full > "$FAKE_REC/tmp"; else echo capped > "$FAKE_REC/tmp"; fi
rm -f /tmp/big
echo done > "$FAKE_REC/done"
sleep 30
"#,
    );
    let run = s
        .start_run("r", &format!("FAKE_RUN={}", script.display()))
        .await;
    assert_eq!(run["limits"]["pids_max"], 40, "{run}");
    s.record(id(&run), "done").await;
    let jobs: usize = String::from_utf8(s.record(id(&run), "jobs").await)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(jobs < 40, "{jobs} processes started under a cap of 40");
    let tmp = String::from_utf8(s.record(id(&run), "tmp").await).unwrap();
    assert_eq!(tmp.trim(), "capped");
    s.stop().await;
}

/// The settings and a repo's overrides: validated, `null` clears (no cap
/// globally, inherit on a repo), and a refused change writes nothing.
async fn limit_settings_are_validated(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let st = s.get("/api/v1/settings").await.ok();
    assert_eq!(st["runs"]["memory_max_mb"], 8192);
    assert_eq!(st["runs"]["pids_max"], 4096);
    assert_eq!(st["runs"]["log_max_mb"], 64);
    let e = s
        .patch(
            "/api/v1/settings",
            json!({"runs": {"memory_max_mb": 1, "log_max_mb": 10}}),
        )
        .await
        .expect(400);
    assert_eq!(
        e["error"]["errors"][0]["field"], "runs.memory_max_mb",
        "{e}"
    );
    assert_eq!(
        s.get("/api/v1/settings").await.ok()["runs"]["log_max_mb"],
        64
    );
    let st = s
        .patch(
            "/api/v1/settings",
            json!({"runs": {"memory_max_mb": null, "pids_max": 100, "carry_cli_keys": ["env", "env"]}}),
        )
        .await
        .ok();
    assert!(st["runs"]["memory_max_mb"].is_null(), "{st}");
    assert_eq!(st["runs"]["carry_cli_keys"], json!(["env"]));
    s.patch(
        "/api/v1/settings",
        json!({"runs": {"carry_cli_keys": ["../x"]}}),
    )
    .await
    .expect(400);
    let r = s
        .patch("/api/v1/repos/r", json!({"memory_max_mb": 512}))
        .await
        .ok();
    assert_eq!(r["memory_max_mb"], 512);
    let run = s.working_run("r").await;
    assert_eq!(
        run["limits"],
        json!({"memory_max_mb": 512, "pids_max": 100})
    );
    s.patch("/api/v1/repos/r", json!({"pids_max": 0}))
        .await
        .expect(400);
    s.stop().await;
}

/// A run that prints more than `runs.log_max_mb` keeps only its newest
/// output on disk; its body and its page say how much was dropped, and its
/// screen is still drawn.
async fn a_log_past_its_cap_keeps_the_newest_output(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    s.patch("/api/v1/settings", json!({"runs": {"log_max_mb": 1}}))
        .await
        .expect(200);
    let script = s.tmp().join("loud.sh");
    agent::write_script(
        &script,
        "head -c 4000000 /dev/zero | tr '\\0' 'x' | fold -w 100\necho LAST LINE\nsleep 60\n",
    );
    let run = s
        .start_run("r", &format!("FAKE_RUN={}", script.display()))
        .await;
    let rid = id(&run);
    let r = s
        .wait_run(rid, 30, |r| {
            r["log_dropped_bytes"].as_u64().unwrap_or(0) > 0
        })
        .await;
    let log = std::path::PathBuf::from(r["log_path"].as_str().unwrap());
    let on_disk = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&log).unwrap().blocks() * 512
    };
    assert!(
        on_disk <= 1024 * 1024 + 64 * 1024,
        "{on_disk} bytes on disk"
    );
    crate::support::wait::until(
        "the last line drawn",
        crate::support::wait::secs(30),
        async || {
            let screen = s
                .get(&format!("/api/v1/runs/{rid}/screen?format=text"))
                .await
                .ok();
            screen["text"]
                .as_str()
                .unwrap_or("")
                .contains("LAST LINE")
                .then_some(())
        },
    )
    .await;
    // The last cut follows the last output (it waits for the log's readers
    // of the moment); then at most the cap is kept, in the file's length too.
    let r = s
        .wait_run(rid, 30, |r| {
            r["log_dropped_bytes"].as_u64().unwrap_or(0) >= 3_000_000
        })
        .await;
    let dropped = r["log_dropped_bytes"].as_u64().unwrap();
    let file_len = std::fs::metadata(&log).unwrap().len();
    // ext4 and XFS cut a file's front; another filesystem only punches.
    let fs = rustix::fs::statfs(&log).unwrap().f_type as u64;
    if [0xEF53, 0x5846_5342].contains(&fs) {
        assert!(
            file_len <= 1024 * 1024,
            "the log's length is {file_len} bytes"
        );
    }
    assert!(dropped >= 3_000_000, "{dropped}");
    let cookie = crate::pages_input::session(&s).await;
    let page =
        crate::pages_input::visit(&s, &cookie, reqwest::Method::GET, &format!("/runs/{rid}"))
            .await
            .text()
            .await
            .unwrap();
    assert!(page.contains("were dropped (runs.log_max_mb)"), "{page}");
    s.stop().await;
}

on_both!(
    a_log_past_its_cap_keeps_the_newest_output,
    a_run_over_its_memory_limit_ends_out_of_memory,
    processes_and_tmp_are_capped,
    limit_settings_are_validated,
);
