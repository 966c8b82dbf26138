//! labctl's own limits: a prompt too large is refused before it is sent,
//! naming the prompt's limit; a server that never answers is given up on.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::on_both;
use crate::support::{Backend, TestServer};

/// A 5 MB prompt file: labctl names the prompt's limit (not the request
/// body's), exits 5, and starts nothing.
async fn a_prompt_file_over_the_limit_is_refused_before_sending(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let file = s.tmp().join("prompt.txt");
    std::fs::write(&file, "x".repeat(5 * 1024 * 1024)).unwrap();
    let out = crate::labctl::labctl(&s, &["start", "r", "--prompt-file", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(
        err.contains("prompt") && err.contains(&lab::validate::MAX_PROMPT.to_string()),
        "{err}"
    );
    assert!(!err.contains("1048576"), "{err}");
    assert_eq!(s.get("/api/v1/runs").await.ok(), serde_json::json!([]));
    s.stop().await;
}

on_both!(a_prompt_file_over_the_limit_is_refused_before_sending);

/// Runs labctl against `url` with `LAB_TIMEOUT` set; gives up after 20 s.
fn labctl_timing(url: &str, timeout: &str, args: &[&str]) -> (Option<i32>, String, Duration) {
    let began = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_labctl"))
        .args(args)
        .env("LAB_URL", url)
        .env("LAB_TOKEN", "t")
        .env("LAB_TIMEOUT", timeout)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while began.elapsed() < Duration::from_secs(20) {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            return (out.status.code(), err, began.elapsed());
        }
        // Not a quiet window: how often this wait looks whether labctl
        // ended (it is what the test times), up to its 20 s bound.
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    (None, "still waiting after 20 s".into(), began.elapsed())
}

/// A server that takes the connection and never answers: labctl gives up
/// after LAB_TIMEOUT seconds with exit code 7 and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labctl_gives_up_on_a_server_that_never_answers() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            open.push(sock);
        }
    });
    let (code, err, took) = tokio::task::spawn_blocking(move || labctl_timing(&url, "1", &["ps"]))
        .await
        .unwrap();
    assert_eq!(code, Some(7), "{err}");
    assert!(
        err.contains("did not answer within 1 s") && err.contains("LAB_TIMEOUT"),
        "{err}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    held.abort();
}

#[test]
fn labctl_refuses_a_timeout_that_is_not_a_number() {
    let (code, err, _) = labctl_timing("http://127.0.0.1:9", "soon", &["ps"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("LAB_TIMEOUT") || err.contains("--timeout"),
        "{err}"
    );
}
