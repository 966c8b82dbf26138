//! How manual runs end: stop, a killed session, Ctrl-C in the session,
//! removal, and workspace retention.

use serde_json::json;

use crate::on_both;
use crate::support::agent::{self, pid_alive};
use crate::support::{Backend, TestServer, id, wait};

async fn stop_ends_the_agent_and_its_child(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.start_run("r", "work forever").await;
    let pid = s.recorded_pid(id(&run), "pid").await;
    let child = s.recorded_pid(id(&run), "child").await;
    // The pane's process is the exec shim, the agent's ancestor (the
    // sandbox's two bubblewrap processes stand between them).
    let parent = |p: i64| -> i64 {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap();
        stat[stat.rfind(')').unwrap() + 2..]
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap()
    };
    let shim = run["pid"].as_i64().unwrap();
    let mut up = vec![parent(pid)];
    while up.len() < 4 && *up.last().unwrap() != shim {
        up.push(parent(*up.last().unwrap()));
    }
    assert_eq!(up.last(), Some(&shim), "ancestors {up:?}");
    assert!(pid_alive(pid) && pid_alive(child));
    let stopped = s
        .post(&format!("/api/v1/runs/{}/stop", id(&run)), json!(null))
        .await
        .ok();
    assert_eq!(stopped["state"], "stopped");
    // Given up on after 2 s, and then the asserts say which survived.
    let _ = wait::within(wait::secs(2), async || !pid_alive(pid) && !pid_alive(child)).await;
    assert!(!pid_alive(pid), "the agent survived");
    assert!(!pid_alive(shim), "the shim survived");
    assert!(!pid_alive(child), "its child survived");
    // Stopping again is a conflict; the state stays.
    let e = s
        .post(&format!("/api/v1/runs/{}/stop", id(&run)), json!(null))
        .await
        .expect(409);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already stopped"),
        "{e}"
    );
    // A refused stop does nothing, now or later: no task of its own runs.
    assert_eq!(
        s.get(&format!("/api/v1/runs/{}", id(&run))).await.ok()["state"],
        "stopped"
    );
    s.stop().await;
}

async fn remove_deletes_an_ended_run_and_its_workspace(b: Backend) {
    let s = TestServer::start(b).await;
    let repo = s.add_repo("r").await;
    let live = s.start_run("r", "stay").await;
    let e = s
        .delete(&format!("/api/v1/runs/{}", id(&live)))
        .await
        .expect(409);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stop it first")
    );
    // A repo with a live run cannot be removed either.
    s.delete("/api/v1/repos/r").await.expect(409);
    s.post(&format!("/api/v1/runs/{}/stop", id(&live)), json!(null))
        .await
        .ok();
    let ws = live["workspace"].as_str().unwrap().to_owned();
    assert!(std::path::Path::new(&ws).exists());
    assert_eq!(
        s.delete(&format!("/api/v1/runs/{}", id(&live)))
            .await
            .status,
        204
    );
    assert!(!std::path::Path::new(&ws).exists(), "workspace removed");
    s.get(&format!("/api/v1/runs/{}", id(&live)))
        .await
        .expect(404);
    let wt = std::process::Command::new("git")
        .args(["-C", repo["path"].as_str().unwrap(), "worktree", "list"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&wt.stdout).contains(&ws),
        "git forgot the worktree"
    );
    let branch_of = |run: &serde_json::Value| {
        crate::support::git::git(
            std::path::Path::new(repo["path"].as_str().unwrap()),
            &["branch", "--list", run["branch"].as_str().unwrap()],
        )
    };
    // The run changed nothing: no branch is left for it.
    assert_eq!(branch_of(&live), "", "an unchanged run's branch is deleted");
    // A run that committed keeps its branch: it holds the agent's work.
    let worked = s.start_run("r", "stay").await;
    let ws = std::path::Path::new(worked["workspace"].as_str().unwrap());
    std::fs::write(ws.join("work.txt"), "work\n").unwrap();
    crate::support::git::commit_all(ws, "the agent's work");
    s.post(&format!("/api/v1/runs/{}/stop", id(&worked)), json!(null))
        .await
        .ok();
    assert_eq!(
        s.delete(&format!("/api/v1/runs/{}", id(&worked)))
            .await
            .status,
        204
    );
    assert!(!branch_of(&worked).is_empty(), "its branch stays");
    s.stop().await;
}

async fn retention_removes_old_workspaces_only_of_ended_runs(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let done = s.start_run("r", "FAKE_EXIT=0").await;
    let live = s.start_run("r", "stay").await;
    s.wait_state(id(&done), "exited").await;
    // No retention set: nothing is removed.
    assert_eq!(s.runner().expire_workspaces().await.unwrap(), 0);
    s.patch(
        "/api/v1/settings",
        json!({"runs": {"workspace_retention_hours": 0}}),
    )
    .await
    .ok();
    let expired = s.runner().expire_workspaces().await.unwrap();
    assert_eq!(expired, 1, "{}", s.get("/api/v1/runs").await.ok());
    let done = s.get(&format!("/api/v1/runs/{}", id(&done))).await.ok();
    assert_eq!(done["workspace_removed"], true);
    assert!(!std::path::Path::new(done["workspace"].as_str().unwrap()).exists());
    assert!(
        std::path::Path::new(live["workspace"].as_str().unwrap()).exists(),
        "a live run keeps its workspace"
    );
    s.stop().await;
}

/// Someone kills the run's tmux session by hand: the agent goes with it
/// (nothing keeps running headless) and the run is lost (it can be resumed,
/// ADR 18), with the reason.
async fn a_killed_session_takes_the_agent_with_it(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.start_run("r", "stay").await;
    let pid = s.recorded_pid(id(&run), "pid").await;
    let session = format!("={}", run["session"].as_str().unwrap());
    agent::tmux(
        s.runner().tmux().socket(),
        &["kill-session", "-t", &session],
    );
    let failed = s.wait_state(id(&run), "lost").await;
    assert!(
        failed["state_reason"]
            .as_str()
            .unwrap()
            .contains("vanished"),
        "{failed}"
    );
    let ended = "the end of an agent running without its session";
    wait::until(ended, wait::secs(2), async || !pid_alive(pid)).await;
    s.stop().await;
}

/// Ctrl-C typed into an attached session reaches the agent (not lab's shim,
/// which records how the agent ended).
async fn ctrl_c_in_the_session_is_for_the_agent(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.working_run("r").await;
    let pane = format!("={}:", run["session"].as_str().unwrap());
    agent::tmux(
        s.runner().tmux().socket(),
        &["send-keys", "-t", &pane, "C-c"],
    );
    let ended = s.wait_state(id(&run), "exited").await;
    assert_eq!(ended["exit_signal"], 2, "{ended}");
    s.stop().await;
}

on_both!(
    stop_ends_the_agent_and_its_child,
    remove_deletes_an_ended_run_and_its_workspace,
    retention_removes_old_workspaces_only_of_ended_runs,
    a_killed_session_takes_the_agent_with_it,
    ctrl_c_in_the_session_is_for_the_agent,
);
