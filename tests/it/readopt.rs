//! A real `lab serve` process, killed with -9 while runs are live, then
//! started again: every live run is re-adopted, none respawned, none lost.

use serde_json::json;

use crate::on_both;
use crate::support::process::LabHome;
use crate::support::{Backend, agent, git, wait};

/// The sessions on lab's socket but the relay's.
fn sessions(socket: &std::path::Path) -> Vec<String> {
    let out = std::process::Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(["list-sessions", "-F", "#{session_name}"])
        .output()
        .unwrap();
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| *l != lab::run::relay::SESSION)
        .map(str::to_owned)
        .collect();
    v.sort();
    v
}

async fn kill_9_then_restart_readopts_every_live_run(b: Backend) {
    let home = LabHome::new(&b).await;
    let (tmp, data, db, socket) = (&home.tmp, &home.data, &home.db, home.socket());

    let mut lab = home.start(&[]).await;
    let path = git::init_repo(tmp.path(), "r");
    lab.post("/api/v1/repos", json!({"name": "r", "path": path}))
        .await
        .ok();
    let mut live = Vec::new();
    for i in 0..3 {
        let r = lab
            .post(
                "/api/v1/runs",
                json!({"repo": "r", "prompt": format!("stay {i}")}),
            )
            .await
            .ok();
        assert_eq!(r["state"], "running");
        live.push(r);
    }
    let ends_while_down = lab
        .post(
            "/api/v1/runs",
            json!({"repo": "r", "prompt": "FAKE_EXIT=7 FAKE_SLEEP_MS=1500"}),
        )
        .await
        .ok();
    let vanishes = lab
        .post("/api/v1/runs", json!({"repo": "r", "prompt": "stay"}))
        .await
        .ok();
    let pids: Vec<i64> = live.iter().map(|r| r["pid"].as_i64().unwrap()).collect();
    // Wait for every agent to have started (it records its argv once).
    for r in live.iter().chain([&ends_while_down, &vanishes]) {
        agent::record(tmp.path(), r["id"].as_i64().unwrap(), "argv").await;
    }
    let argv_mtime = |id: i64| {
        std::fs::metadata(tmp.path().join("records").join(id.to_string()).join("argv"))
            .unwrap()
            .modified()
            .unwrap()
    };
    let before: Vec<_> = live
        .iter()
        .map(|r| argv_mtime(r["id"].as_i64().unwrap()))
        .collect();

    // A second server on the same data dir (and so the same tmux server and
    // runs) is refused, and takes nothing over.
    let mut second = std::process::Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .args(
            db.as_deref()
                .map(|u| vec!["--database-url", u])
                .unwrap_or_default(),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let Ok(status) = wait::within(wait::secs(10), async || second.try_wait().unwrap()).await else {
        second.kill().unwrap();
        second.wait().unwrap();
        panic!("a second lab serve on the same data dir kept running");
    };
    let mut said = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut said).unwrap();
    assert!(!status.success(), "{said}");
    assert!(
        said.contains("another lab server is using the data dir"),
        "{said}"
    );

    // kill -9 lets go of the data dir: the tmux server lab started holds no
    // lock of lab's, so the next start below is not refused.
    lab.kill9();
    // While lab is down: one agent exits, one session disappears, and a
    // session nobody made appears on lab's socket.
    let gone = vanishes["session"].as_str().unwrap();
    agent::tmux(&socket, &["kill-session", "-t", &format!("={gone}")]);
    agent::tmux(
        &socket,
        &["new-session", "-d", "-s", "intruder", "--", "sleep", "300"],
    );
    // The agent that ends while lab is down has ended: its shim wrote how.
    let exit_file = data
        .join("runs")
        .join(ends_while_down["id"].as_i64().unwrap().to_string())
        .join("exit.json");
    wait::until(
        "the agent's end while lab is down",
        wait::secs(10),
        async || exit_file.exists(),
    )
    .await;

    let lab2 = home.start(&[]).await;
    for (i, r) in live.iter().enumerate() {
        let id = r["id"].as_i64().unwrap();
        let now = lab2.get(&format!("/api/v1/runs/{id}")).await.ok();
        assert_eq!(
            now["state"], "running",
            "run {id} was not re-adopted: {now}"
        );
        assert_eq!(now["pid"].as_i64().unwrap(), pids[i], "same process");
        assert!(agent::pid_alive(pids[i]));
        assert_eq!(argv_mtime(id), before[i], "run {id} was spawned again");
    }
    let ended = lab2
        .wait_run(ends_while_down["id"].as_i64().unwrap(), 10, |r| {
            r["state"] == "exited"
        })
        .await;
    assert_eq!(ended["exit_status"], 7);
    let lost = lab2
        .get(&format!("/api/v1/runs/{}", vanishes["id"]))
        .await
        .ok();
    // Its workspace and session id remain: lost, resumable (ADR 18).
    assert_eq!(lost["state"], "lost");
    assert!(
        lost["state_reason"]
            .as_str()
            .unwrap()
            .contains("session was gone"),
        "{lost}"
    );
    // No duplicate sessions: the three live runs, and the intruder, reported.
    let mut want: Vec<String> = live
        .iter()
        .map(|r| r["session"].as_str().unwrap().to_owned())
        .collect();
    want.push("intruder".into());
    want.sort();
    assert_eq!(sessions(&socket), want);
    let status = lab2.get("/api/v1/status").await.ok();
    assert_eq!(status["stray_sessions"], json!(["intruder"]));
    assert!(
        lab2.log().contains("stray tmux session"),
        "reported in the log"
    );
    // And they stay manageable: stop one.
    let id = live[0]["id"].as_i64().unwrap();
    let stopped = lab2
        .post(&format!("/api/v1/runs/{id}/stop"), json!(null))
        .await
        .ok();
    assert_eq!(stopped["state"], "stopped");
    drop(lab2);
}

async fn the_agent_gets_only_allow_listed_variables(b: Backend) {
    let home = LabHome::new(&b).await;
    let tmp = &home.tmp;
    let lab = home
        .start(&[
            ("CLAUDE_CODE_EFFORT_LEVEL", "low"),
            ("LAB_GITHUB_TOKEN", "ghp_secret"),
            ("NOT_LISTED", "secret"),
            ("KEEP_ME", "yes"),
            ("LAB_RUN_ENV", "KEEP_ME"),
        ])
        .await;
    let path = git::init_repo(tmp.path(), "r");
    lab.post("/api/v1/repos", json!({"name": "r", "path": path}))
        .await
        .ok();
    let r = lab
        .post("/api/v1/runs", json!({"repo": "r", "effort": "max"}))
        .await
        .ok();
    let id = r["id"].as_i64().unwrap();
    let env = agent::env(&agent::record(tmp.path(), id, "env").await);
    let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    assert!(!names.contains(&"CLAUDE_CODE_EFFORT_LEVEL"), "{names:?}");
    assert!(!names.contains(&"LAB_GITHUB_TOKEN"), "{names:?}");
    assert!(!names.contains(&"LAB_CLAUDE_CODE_BIN"), "{names:?}");
    assert!(!names.contains(&"LAB_DATA_DIR"), "{names:?}");
    assert!(
        names.contains(&"KEEP_ME"),
        "variables the operator lists pass: {names:?}"
    );
    for never in ["NOT_LISTED", "TMUX", "TMUX_PANE", "LAB_RUN_ENV"] {
        assert!(
            !names.contains(&never),
            "{never} reached the run: {names:?}"
        );
    }
    // lab's tmux server never saw lab's environment either.
    let global = agent::tmux(&home.socket(), &["show-environment", "-g"]);
    for never in ["LAB_GITHUB_TOKEN", "ghp_secret", "NOT_LISTED", "LAB_"] {
        assert!(
            !global.contains(never),
            "{never} in tmux's environment:\n{global}"
        );
    }
    let mut lab_vars: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| n.starts_with("LAB_"))
        .collect();
    lab_vars.sort();
    assert_eq!(
        lab_vars,
        [
            "LAB_NODE",
            "LAB_RUN_ID",
            "LAB_RUN_KIND",
            "LAB_TOKEN",
            "LAB_URL"
        ]
    );
    let argv = agent::argv(&agent::record(tmp.path(), id, "argv").await);
    assert!(
        argv.windows(2)
            .any(|w| w[0] == b"--effort" && w[1] == b"max")
    );
    // Everything lab made in its data dir is its user's alone: the token,
    // the database, logs, locks, the run's folder and its workspace.
    let open = readable_by_others(&home.data);
    assert!(open.is_empty(), "group or others may read: {open:?}");
    drop(lab);
}

on_both!(
    kill_9_then_restart_readopts_every_live_run,
    the_agent_gets_only_allow_listed_variables
);

/// Paths under `dir` whose mode gives group or others any access.
fn readable_by_others(dir: &std::path::Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut open = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(meta) = e.path().symlink_metadata() else {
                continue;
            };
            if meta.file_type().is_symlink() {
                continue;
            }
            if meta.permissions().mode() & 0o077 != 0 {
                open.push(format!(
                    "{} {:o}",
                    e.path().display(),
                    meta.permissions().mode() & 0o777
                ));
            }
            if meta.is_dir() {
                todo.push(e.path());
            }
        }
    }
    open
}
