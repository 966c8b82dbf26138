//! What a run's token reaches, by repo id: a rename, or a new repo taking
//! the old name, changes nothing.

use reqwest::Method;
use serde_json::json;

use crate::on_both;
use crate::support::{Backend, TestServer, git, id};

/// Rename `r2` to `r2old` while a run of it is live and make a new `r2`:
/// the run's token still reads its own repo's issues (by the new name and
/// by id), and not the new `r2`'s.
async fn a_run_token_follows_its_repo_through_a_rename(b: Backend) {
    let s = TestServer::start(b).await;
    let old = s.add_repo("r2").await;
    let old_id = id(&old);
    s.post(
        "/api/v1/repos/r2/issues",
        json!({"title": "Old repo's issue"}),
    )
    .await
    .expect(201);
    let run = s.working_run("r2").await;
    let token = s.run_token(id(&run)).await;
    s.patch("/api/v1/repos/r2", json!({"name": "r2old"}))
        .await
        .ok();
    let elsewhere = s.tmp().join("new");
    std::fs::create_dir(&elsewhere).unwrap();
    let path = git::init_repo(&elsewhere, "r2");
    s.post("/api/v1/repos", json!({"name": "r2", "path": path}))
        .await
        .expect(201);
    s.post(
        "/api/v1/repos/r2/issues",
        json!({"title": "New repo's secret"}),
    )
    .await
    .expect(201);

    let http = reqwest::Client::new();
    let call = |path: &str| {
        http.request(Method::GET, format!("{}{path}", s.url))
            .bearer_auth(&token)
    };
    for (path, want) in [
        ("/api/v1/repos/r2/issues".to_owned(), 403),
        ("/api/v1/repos/r2/issues/1".to_owned(), 403),
        ("/api/v1/repos/r2old/issues".to_owned(), 200),
        ("/api/v1/repos/r2old/issues/1".to_owned(), 200),
        (format!("/api/v1/repos/{old_id}/issues"), 200),
        ("/api/v1/repos/nosuch/issues".to_owned(), 403),
    ] {
        let r = s.send(call(&path)).await;
        assert_eq!(r.status.as_u16(), want, "GET {path}: {}", r.body);
        if want == 200 {
            assert!(
                !r.body.to_string().contains("secret"),
                "GET {path} read the new repo: {}",
                r.body
            );
        }
    }
    s.stop().await;
}

on_both!(a_run_token_follows_its_repo_through_a_rename);
