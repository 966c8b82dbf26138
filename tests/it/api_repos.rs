use serde_json::{Value, json};

use crate::on_both;
use crate::support::{Backend, TestServer, git, wait};

async fn create_list_show_change_delete(b: Backend) {
    let s = TestServer::start(b).await;
    let r = s.add_repo("alpha").await;
    let id = r["id"].as_i64().unwrap();
    assert_eq!(r["name"], "alpha");
    assert_eq!(r["default_branch"], "main");
    assert_eq!(r["provider"], "claude-code");
    assert_eq!(r["afk_label"], "ready-for-agent");
    assert_eq!(r["afk_max_concurrent"], 1);
    assert_eq!(r["afk_enabled"], false);
    assert!(r["url"].is_null());

    // By id and by name.
    assert_eq!(s.get(&format!("/api/v1/repos/{id}")).await.ok(), r);
    assert_eq!(s.get("/api/v1/repos/alpha").await.ok(), r);

    s.add_repo("beta").await;
    let list = s.get("/api/v1/repos").await.ok();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "beta"]);

    // A duplicate name is a conflict.
    let path = s.tmp().join("alpha");
    let e = s
        .post("/api/v1/repos", json!({"name": "alpha", "path": path}))
        .await
        .expect(409);
    assert_eq!(e["error"]["code"], "conflict");
    assert!(e["error"]["message"].as_str().unwrap().contains("alpha"));

    // PATCH: partial, canonical, clearing.
    let v = s
        .patch(
            "/api/v1/repos/alpha",
            json!({"model_default": "Opus", "afk_effort_default": "LOW", "afk_options": {"ultracode": "false"},
                   "afk_enabled": true, "afk_label": "agent-ok", "afk_max_concurrent": 3, "default_branch": "dev"}),
        )
        .await
        .ok();
    assert_eq!(v["model_default"], "opus");
    assert_eq!(v["afk_effort_default"], "low");
    assert_eq!(v["afk_options"], json!({"ultracode": "false"}));
    assert_eq!(
        (
            v["afk_enabled"].clone(),
            v["afk_label"].clone(),
            v["afk_max_concurrent"].clone()
        ),
        (json!(true), json!("agent-ok"), json!(3))
    );
    let v = s
        .patch(
            &format!("/api/v1/repos/{id}"),
            json!({"model_default": "", "afk_options": {"ultracode": null}, "afk_label": null}),
        )
        .await
        .ok();
    assert!(v["model_default"].is_null());
    assert_eq!(v["afk_options"], json!({}));
    assert_eq!(v["afk_label"], "ready-for-agent");
    assert_eq!(v["afk_effort_default"], "low", "untouched fields stay");

    // Renaming onto a taken name is a conflict and changes nothing.
    s.patch("/api/v1/repos/alpha", json!({"name": "beta"}))
        .await
        .expect(409);
    assert_eq!(s.get("/api/v1/repos/alpha").await.ok()["name"], "alpha");

    // DELETE by name, then it is gone.
    assert_eq!(s.delete("/api/v1/repos/alpha").await.status, 204);
    s.get("/api/v1/repos/alpha").await.expect(404);
    s.get(&format!("/api/v1/repos/{id}")).await.expect(404);
    s.delete("/api/v1/repos/alpha").await.expect(404);
    s.stop().await;
}

async fn invalid_repos_are_rejected_and_nothing_is_written(b: Backend) {
    let s = TestServer::start(b).await;
    let good = git::init_repo(&s.tmp(), "good");
    let not_git = s.tmp().join("plain");
    std::fs::create_dir_all(&not_git).unwrap();
    let cases: Vec<(Value, &str)> = vec![
        (json!({"path": good}), "name"),
        (json!({"name": "x"}), "path"),
        (json!({"name": "123", "path": good}), "name"),
        (json!({"name": "a b", "path": good}), "name"),
        (json!({"name": "x", "path": "relative/dir"}), "path"),
        (json!({"name": "x", "path": not_git}), "path"),
        (
            json!({"name": "x", "path": s.tmp().join("missing")}),
            "path",
        ),
        (
            json!({"name": "x", "path": good, "url": "https://h/x.git"}),
            "url",
        ),
        (json!({"name": "x", "url": "--upload-pack=evil"}), "url"),
        (
            json!({"name": "x", "path": good, "provider": "gemini"}),
            "provider",
        ),
        (
            json!({"name": "x", "path": good, "model_default": "gpt-6-sol"}),
            "model_default",
        ),
        (
            json!({"name": "x", "path": good, "provider": "codex", "effort_default": "max"}),
            "effort_default",
        ),
        (
            json!({"name": "x", "path": good, "afk_options": {"ultracode": "on"}}),
            "afk_options.ultracode",
        ),
        (
            json!({"name": "x", "path": good, "afk_options": {"approval": "never"}}),
            "afk_options.approval",
        ),
        (
            json!({"name": "x", "path": good, "default_branch": "-x"}),
            "default_branch",
        ),
        (
            json!({"name": "x", "path": good, "afk_max_concurrent": 0}),
            "afk_max_concurrent",
        ),
        (
            json!({"name": "x", "path": good, "afk_label": ""}),
            "__ok__",
        ),
    ];
    for (body, field) in cases {
        let r = s.post("/api/v1/repos", body.clone()).await;
        if field == "__ok__" {
            assert_eq!(r.status, 201, "{body}: {}", r.body);
            assert_eq!(r.body["afk_label"], "ready-for-agent");
            s.delete("/api/v1/repos/x").await.expect(204);
            continue;
        }
        let e = r.expect(400);
        assert_eq!(e["error"]["field"], field, "{body}: {e}");
        assert_eq!(
            s.get("/api/v1/repos").await.ok(),
            json!([]),
            "{body} wrote something"
        );
    }
    s.stop().await;
}

async fn a_provider_change_reports_values_that_do_not_fit(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("p").await;
    s.patch(
        "/api/v1/repos/p",
        json!({"model_default": "opus", "afk_options": {"ultracode": true}}),
    )
    .await
    .ok();
    let before = s.get("/api/v1/repos/p").await.ok();
    let e = s
        .patch("/api/v1/repos/p", json!({"provider": "codex"}))
        .await
        .expect(400);
    let fields: Vec<&str> = e["error"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["model_default", "afk_options.ultracode"]);
    assert_eq!(
        s.get("/api/v1/repos/p").await.ok(),
        before,
        "nothing written"
    );
    let v = s
        .patch("/api/v1/repos/p", json!({"provider": "codex", "model_default": "gpt-5.5", "afk_options": {"ultracode": null}}))
        .await
        .ok();
    assert_eq!(v["provider"], "codex");
    assert_eq!(v["model_default"], "gpt-5.5");
    s.stop().await;
}

async fn resolve(s: &TestServer, repo: &str, query: &str) -> Value {
    s.get(&format!("/api/v1/repos/{repo}/resolve?{query}"))
        .await
        .ok()
}

fn vs(v: &Value) -> (String, String) {
    (
        v["value"].as_str().unwrap().to_owned(),
        v["source"].as_str().unwrap().to_owned(),
    )
}

fn pair(v: &str, s: &str) -> (String, String) {
    (v.to_owned(), s.to_owned())
}

/// The layers, stored through the API and resolved through it.
async fn resolve_walks_the_layers_with_provenance(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;

    let r = resolve(&s, "r", "kind=manual").await;
    assert_eq!(r["kind"], "manual");
    assert_eq!(r["provider"], "claude-code");
    assert_eq!(vs(&r["model"]), pair("sonnet", "provider.default"));
    assert_eq!(vs(&r["effort"]), pair("high", "provider.default"));
    assert_eq!(r["options"], json!({}));
    let r = resolve(&s, "r", "kind=afk").await;
    assert_eq!(
        vs(&r["options"]["ultracode"]),
        pair("false", "provider.default")
    );
    assert_eq!(
        vs(&r["options"]["permission_mode"]),
        pair("bypassPermissions", "provider.default")
    );

    // global base
    s.patch(
        "/api/v1/settings",
        json!({"providers": {"claude-code": {"model_default": "haiku", "effort_default": "low"}}}),
    )
    .await
    .ok();
    for kind in ["manual", "afk"] {
        let r = resolve(&s, "r", &format!("kind={kind}")).await;
        assert_eq!(vs(&r["model"]), pair("haiku", "global.base"), "{kind}");
        assert_eq!(vs(&r["effort"]), pair("low", "global.base"), "{kind}");
    }
    // repo base beats global base
    s.patch("/api/v1/repos/r", json!({"model_default": "opus"}))
        .await
        .ok();
    assert_eq!(
        vs(&resolve(&s, "r", "kind=manual").await["model"]),
        pair("opus", "repo.base")
    );
    assert_eq!(
        vs(&resolve(&s, "r", "kind=afk").await["model"]),
        pair("opus", "repo.base")
    );
    // global AFK beats repo base for AFK only
    s.patch(
        "/api/v1/settings",
        json!({"providers": {"claude-code": {"afk_model_default": "fable", "afk_options": {"ultracode": true}}}}),
    )
    .await
    .ok();
    assert_eq!(
        vs(&resolve(&s, "r", "kind=manual").await["model"]),
        pair("opus", "repo.base")
    );
    let r = resolve(&s, "r", "kind=afk").await;
    assert_eq!(vs(&r["model"]), pair("fable", "global.afk"));
    assert_eq!(vs(&r["options"]["ultracode"]), pair("true", "global.afk"));
    // repo AFK beats global AFK; an explicit repo false wins over a global true
    s.patch(
        "/api/v1/repos/r",
        json!({"afk_model_default": "opusplan", "afk_options": {"ultracode": false}}),
    )
    .await
    .ok();
    let r = resolve(&s, "r", "kind=afk").await;
    assert_eq!(vs(&r["model"]), pair("opusplan", "repo.afk"));
    assert_eq!(vs(&r["options"]["ultracode"]), pair("false", "repo.afk"));
    // the request beats everything, for manual runs
    let r = resolve(&s, "r", "kind=manual&model=SONNET&effort=max").await;
    assert_eq!(vs(&r["model"]), pair("sonnet", "request"));
    assert_eq!(vs(&r["effort"]), pair("max", "request"));
    // kind defaults to manual
    assert_eq!(resolve(&s, "r", "").await["kind"], "manual");
    // Repeat resolves are answered from memory (ADR 11; a PostgreSQL node's
    // cache turns on once it listens for the other nodes' writes).
    let patience = wait::secs(10).every_ms(20);
    wait::until("a resolve that hits the cache", patience, async || {
        let before = s.get("/api/v1/status").await.ok()["cache"].clone();
        let r = resolve(&s, "r", "kind=afk").await;
        assert_eq!(vs(&r["model"]), pair("opusplan", "repo.afk"));
        let after = s.get("/api/v1/status").await.ok()["cache"].clone();
        let hits = |c: &Value| c["repos"]["hits"].as_u64().unwrap();
        if after["on"] == true && hits(&after) > hits(&before) {
            Ok(())
        } else {
            Err(after)
        }
    })
    .await;
    s.stop().await;
}

async fn resolve_rejects_what_it_cannot_honour(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let e = s
        .get("/api/v1/repos/r/resolve?kind=manual&model=gpt-5.5")
        .await
        .expect(400);
    assert_eq!(e["error"]["field"], "model");
    assert_eq!(e["error"]["value"], "gpt-5.5");
    assert!(
        e["error"]["allowed"]
            .as_array()
            .unwrap()
            .contains(&json!("opus"))
    );
    let e = s
        .get("/api/v1/repos/r/resolve?kind=afk&model=opus")
        .await
        .expect(400);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("AFK runs take no per-run override"),
        "{e}"
    );
    let e = s
        .get("/api/v1/repos/r/resolve?kind=later")
        .await
        .expect(400);
    assert_eq!(e["error"]["field"], "kind");
    s.get("/api/v1/repos/r/resolve?kind=manual&extra=1")
        .await
        .expect(400);
    s.get("/api/v1/repos/nope/resolve?kind=manual")
        .await
        .expect(404);
    s.get("/api/v1/repos/999/resolve?kind=manual")
        .await
        .expect(404);
    s.stop().await;
}

on_both!(
    create_list_show_change_delete,
    invalid_repos_are_rejected_and_nothing_is_written,
    a_provider_change_reports_values_that_do_not_fit,
    resolve_walks_the_layers_with_provenance,
    resolve_rejects_what_it_cannot_honour,
);
