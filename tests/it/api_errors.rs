//! No input of any shape or size yields a 5xx, and every error is JSON.

use reqwest::Method;
use serde_json::json;

use crate::on_both;
use crate::support::{Backend, TestServer};

async fn malformed_requests_get_clear_4xx_json_errors(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let raw = |m: Method, path: &str| s.req(m, path);
    let cases: Vec<(reqwest::RequestBuilder, u16)> = vec![
        (raw(Method::PATCH, "/api/v1/settings").header("content-type", "application/json").body("{not json"), 400),
        (raw(Method::PATCH, "/api/v1/settings").header("content-type", "application/json").body("\"settings\""), 400),
        (raw(Method::PATCH, "/api/v1/settings").header("content-type", "application/json").body("null"), 400),
        (raw(Method::PATCH, "/api/v1/settings").header("content-type", "text/plain").body("{}"), 415),
        (raw(Method::PATCH, "/api/v1/settings").body("{}"), 415),
        (raw(Method::POST, "/api/v1/repos").json(&json!({"name": 5, "path": []})), 400),
        (raw(Method::POST, "/api/v1/repos").json(&json!({"name": "x", "path": "/x", "surprise": 1})), 400),
        (raw(Method::POST, "/api/v1/repos").json(&json!({"name": "x\u{0}y", "path": "/\u{0}"})), 400),
        (raw(Method::POST, "/api/v1/repos").json(&json!({"name": "x", "path": "/tmp", "afk_max_concurrent": 1e30})), 400),
        (raw(Method::POST, "/api/v1/repos").json(&json!({"name": "x", "path": "/tmp", "afk_max_concurrent": 99999999999999999999u128.to_string()})), 400),
        (raw(Method::PATCH, "/api/v1/repos/r").json(&json!({"afk_options": [1, 2]})), 400),
        (raw(Method::PATCH, "/api/v1/repos/r").json(&json!({"afk_options": null})), 400),
        (raw(Method::PATCH, "/api/v1/repos/r").json(&json!({"afk_enabled": "yes"})), 400),
        (raw(Method::POST, "/api/v1/repos").header("content-type", "application/json").body(vec![b'['; 100_000]), 400),
        (raw(Method::POST, "/api/v1/repos").header("content-type", "application/json").body(vec![0xff, 0xfe]), 400),
        (raw(Method::GET, "/api/v1/repos/%FF%FE"), 400),
        (raw(Method::GET, &format!("/api/v1/repos/{}", "a".repeat(5000))), 404),
        (raw(Method::GET, "/api/v1/repos/99999999999999999999999"), 404),
        (raw(Method::GET, "/api/v1/repos/-1"), 404),
        (raw(Method::GET, "/api/v1/nothing-here"), 404),
        (raw(Method::PUT, "/api/v1/settings"), 405),
        (raw(Method::GET, "/api/v1/repos/r/resolve?kind=manual&model=%00"), 400),
        (raw(Method::GET, "/api/v1/repos/r/resolve?kind=manual&model=x&model=y"), 400),
    ];
    for (i, (rb, want)) in cases.into_iter().enumerate() {
        let r = s.send(rb).await;
        assert_eq!(r.status.as_u16(), want, "case {i}: {}", r.body);
        assert!(
            r.body["error"]["code"].is_string(),
            "case {i}: not a JSON error: {}",
            r.body
        );
        assert!(
            !r.body["error"]["message"].as_str().unwrap().is_empty(),
            "case {i}"
        );
    }
    // Nothing was written by any of them.
    assert_eq!(
        s.get("/api/v1/repos").await.ok().as_array().unwrap().len(),
        1
    );
    s.stop().await;
}

/// A body over the limit is refused with 413 from its Content-Length, before
/// lab reads it.
async fn an_oversized_body_is_refused_with_413(b: Backend) {
    let s = TestServer::start(b).await;
    let addr = s.url.trim_start_matches("http://").to_owned();
    let text = s
        .raw_head(&format!(
            "POST /api/v1/repos HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            s.token,
            2 * 1024 * 1024
        ))
        .await;
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("\"too_large\""), "{text}");
    assert_eq!(s.get("/api/v1/repos").await.ok(), serde_json::json!([]));
    s.stop().await;
}

async fn the_openapi_document_describes_the_routes(b: Backend) {
    let s = TestServer::start(b).await;
    let doc = s.get("/api/v1/openapi.json").await.ok();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    for (path, method) in [
        ("/api/v1/providers", "get"),
        ("/api/v1/settings", "get"),
        ("/api/v1/settings", "patch"),
        ("/api/v1/repos", "get"),
        ("/api/v1/repos", "post"),
        ("/api/v1/repos/{id}", "get"),
        ("/api/v1/repos/{id}", "patch"),
        ("/api/v1/repos/{id}", "delete"),
        ("/api/v1/repos/{id}/resolve", "get"),
    ] {
        assert!(
            doc["paths"][path][method].is_object(),
            "{method} {path} missing"
        );
    }
    assert!(doc["components"]["schemas"]["ErrorBody"].is_object());
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    s.stop().await;
}

async fn providers_list_their_schema(b: Backend) {
    let s = TestServer::start(b).await;
    let v = s.get("/api/v1/providers").await.ok();
    let ids: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["claude-code", "codex"]);
    let claude = &v[0];
    let ultra = claude["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["key"] == "ultracode")
        .unwrap();
    assert_eq!(ultra["type"], "bool");
    assert_eq!(ultra["default"], "false");
    assert_eq!(ultra["values"], json!(["true", "false"]));
    for k in ["label", "description"] {
        assert!(!ultra[k].as_str().unwrap().is_empty());
    }
    assert_eq!(
        claude["efforts"],
        json!(["low", "medium", "high", "xhigh", "max"])
    );
    let codex = &v[1];
    let keys: Vec<&str> = codex["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["approval", "sandbox"]);
    s.stop().await;
}

/// What schemathesis found: serde reads a struct from an array of its
/// fields, so `[]` was an (empty) settings change; JSON Schema's `integer`
/// includes `5.0`, which lab refused.
async fn bodies_are_objects_and_whole_numbers_may_end_in_point_zero(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    for body in [
        json!([]),
        json!([{}, {}, {}]),
        json!({"afk": [5]}),
        json!({"providers": {"codex": []}}),
    ] {
        let e = s.patch("/api/v1/settings", body.clone()).await.expect(400);
        assert_eq!(e["error"]["code"], "invalid", "{body}: {e}");
    }
    s.post("/api/v1/runs", json!(["r"])).await.expect(400);
    let v = s
        .patch(
            "/api/v1/settings",
            json!({"afk": {"max_concurrent": 5.0}, "runs": {"workspace_retention_hours": 0.0}}),
        )
        .await
        .ok();
    assert_eq!(v["afk"]["max_concurrent"], 5);
    assert_eq!(v["runs"]["workspace_retention_hours"], 0);
    assert_eq!(
        s.patch("/api/v1/repos/r", json!({"afk_max_concurrent": 3.0}))
            .await
            .ok()["afk_max_concurrent"],
        3
    );
    for n in [json!(5.5), json!(1e300), json!(-0.5)] {
        let body = json!({"afk": {"tick_seconds": n}});
        let e = s.patch("/api/v1/settings", body).await.expect(400);
        assert!(e.to_string().contains("tick_seconds"), "{n}: {e}");
    }
    assert_eq!(
        s.get("/api/v1/settings").await.ok()["afk"]["tick_seconds"],
        30
    );
    s.stop().await;
}

/// A forge address that is no URL, or a token that cannot travel in an
/// HTTP header, was stored and made every forge call a 502.
async fn forge_addresses_and_tokens_are_usable_or_refused(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let forge = |url: &str, token: &str| json!({"issue_source": "gitea", "forge_url": url, "forge_repo": "o/r", "forge_token": token});
    for (url, token, field) in [
        ("http://[nope", "t0ken", "forge_url"),
        ("https://forge.example/?q=1", "t0ken", "forge_url"),
        ("https://forge.example", "t\u{f6}ken", "forge_token"),
        ("https://forge.example", "tok\u{7f}en", "forge_token"),
    ] {
        let e = s
            .patch("/api/v1/repos/r", forge(url, token))
            .await
            .expect(400);
        assert_eq!(e["error"]["field"], field, "{url} {token}: {e}");
    }
    // Addresses that can never work, each refused with the one to give.
    for (kind, url, fix) in [
        ("github", "https://github.com", "https://api.github.com"),
        (
            "github",
            "https://ghe.example.com",
            "https://ghe.example.com/api/v3",
        ),
        (
            "gitea",
            "https://git.example.com/api/v1",
            "https://git.example.com",
        ),
        (
            "gitea",
            "https://git.example.com/sub/api/v1/",
            "https://git.example.com/sub",
        ),
    ] {
        let e = s
            .patch(
                "/api/v1/repos/r",
                json!({"issue_source": kind, "forge_url": url, "forge_repo": "o/r"}),
            )
            .await
            .expect(400);
        assert_eq!(e["error"]["field"], "forge_url", "{url}: {e}");
        let m = e["error"]["message"].as_str().unwrap();
        assert!(m.ends_with(fix), "{url}: {m}");
    }
    assert_eq!(
        s.get("/api/v1/repos/r").await.ok()["issue_source"],
        "builtin"
    );
    // Well formed, but no forge answers there: refused with what failed,
    // and nothing written.
    let e = s
        .patch("/api/v1/repos/r", forge("http://forge", "t0ken"))
        .await
        .expect(400);
    assert_eq!(e["error"]["field"], "forge_url", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not ask the forge"),
        "{e}"
    );
    assert_eq!(
        s.get("/api/v1/repos/r").await.ok()["issue_source"],
        "builtin"
    );
    s.stop().await;
}

on_both!(
    an_oversized_body_is_refused_with_413,
    bodies_are_objects_and_whole_numbers_may_end_in_point_zero,
    forge_addresses_and_tokens_are_usable_or_refused,
    malformed_requests_get_clear_4xx_json_errors,
    the_openapi_document_describes_the_routes,
    providers_list_their_schema
);
