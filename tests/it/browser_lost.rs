//! A lost run's page in real headless Chromium: the state, the Resume
//! button, and the run live again after it (ADR 18).

use crate::on_both;
use crate::support::browser::Browser;
use crate::support::{Backend, TestServer, agent, id};

async fn the_resume_button_brings_a_lost_run_back(b: Backend) {
    let folder = match b {
        Backend::Sqlite => "run_lost/sqlite",
        Backend::Postgres(_) => "run_lost/postgres",
    };
    let s = TestServer::start(b).await;
    let br = Browser::start(&s.url, folder).await;
    br.login(&s.token).await;
    s.add_repo("r").await;
    let run = s.working_run("r").await;
    let rid = id(&run);
    agent::tmux(s.runner().tmux().socket(), &["kill-server"]);
    s.wait_state(rid, "lost").await;
    br.go(&format!("/runs/{rid}")).await;
    let text = br
        .wait_text("the lost state", |t| t.contains("Resume run"))
        .await;
    assert!(
        text.contains("lost") && text.contains("it can be resumed"),
        "{text}"
    );
    br.shot("lost").await;
    br.submit("Resume run").await;
    br.wait_path(&format!("/runs/{rid}")).await;
    let text = br
        .wait_text("the run live again", |t| t.contains("Stop run"))
        .await;
    assert!(!text.contains("Resume run"), "{text}");
    assert_eq!(
        s.get(&format!("/api/v1/runs/{rid}")).await.ok()["state"],
        "running"
    );
    br.shot("resumed").await;
    br.quit().await;
    s.stop().await;
}

on_both!(the_resume_button_brings_a_lost_run_back);
