use reqwest::Method;

use crate::on_both;
use crate::support::{Backend, TestServer};

async fn token_is_required_for_the_api_but_not_for_healthz(b: Backend) {
    let s = TestServer::start(b).await;
    let http = reqwest::Client::new();
    let h = http.get(format!("{}/healthz", s.url)).send().await.unwrap();
    assert_eq!(h.status(), 200);

    for path in [
        "/api/v1/providers",
        "/api/v1/settings",
        "/api/v1/repos",
        "/api/v1/openapi.json",
    ] {
        let r = s.send(http.get(format!("{}{path}", s.url))).await;
        assert_eq!(r.status, 401, "{path}");
        assert_eq!(r.body["error"]["code"], "unauthorized");
        let r = s
            .send(
                http.get(format!("{}{path}", s.url))
                    .bearer_auth("not-the-token"),
            )
            .await;
        assert_eq!(r.status, 401, "{path}");
        let r = s
            .send(
                http.get(format!("{}{path}", s.url))
                    .header("authorization", "Basic abc"),
            )
            .await;
        assert_eq!(r.status, 401, "{path}");
    }
    // A write without the token writes nothing.
    let r = s
        .send(
            http.request(Method::PATCH, format!("{}/api/v1/settings", s.url))
                .json(&serde_json::json!({"afk": {"tick_seconds": 5}})),
        )
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(
        s.get("/api/v1/settings").await.ok()["afk"]["tick_seconds"],
        30
    );
    s.stop().await;
}

async fn the_token_file_is_private_and_stable_across_restarts(b: Backend) {
    use std::os::unix::fs::PermissionsExt;
    let s = TestServer::start(b).await;
    let path = s.data_dir().join("token");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), s.token);
    let token = s.token.clone();
    let dir_mode = std::fs::metadata(s.data_dir())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
    let s2 = s.restart().await;
    assert_eq!(s2.token, token);
    s2.stop().await;
}

on_both!(
    token_is_required_for_the_api_but_not_for_healthz,
    the_token_file_is_private_and_stable_across_restarts
);
