use serde_json::json;

use crate::on_both;
use crate::support::{Backend, TestServer};

async fn settings_start_empty_for_every_provider(b: Backend) {
    let s = TestServer::start(b).await;
    let v = s.get("/api/v1/settings").await.ok();
    for id in ["claude-code", "codex"] {
        let p = &v["providers"][id];
        for k in [
            "model_default",
            "effort_default",
            "afk_model_default",
            "afk_effort_default",
        ] {
            assert!(p[k].is_null(), "{id}.{k}: {p}");
        }
        assert_eq!(p["afk_options"], json!({}));
    }
    assert_eq!(
        v["afk"],
        json!({"max_concurrent": 2, "tick_seconds": 30, "run_timeout_minutes": 60,
               "max_rounds": 3, "max_plan_rounds": 3, "max_attempts": 2, "max_tokens": null, "max_cost_usd": null,
               "memory_per_run_mb": 1024})
    );
    // Budgets are set, and `null` takes the cap away again.
    let v = s
        .patch(
            "/api/v1/settings",
            json!({"afk": {"max_tokens": 2_000_000, "max_cost_usd": 2.5, "max_rounds": 5}}),
        )
        .await
        .ok();
    assert_eq!(
        (
            &v["afk"]["max_tokens"],
            &v["afk"]["max_cost_usd"],
            &v["afk"]["max_rounds"]
        ),
        (&json!(2_000_000), &json!(2.5), &json!(5))
    );
    let v = s
        .patch("/api/v1/settings", json!({"afk": {"max_cost_usd": null}}))
        .await
        .ok();
    assert!(v["afk"]["max_cost_usd"].is_null(), "{v}");
    assert_eq!(v["afk"]["max_tokens"], 2_000_000);
    // A repo's check command and budgets; a control character is refused.
    s.add_repo("r").await;
    let r = s
        .patch(
            "/api/v1/repos/r",
            json!({"check_command": "cargo test\nmake lint", "afk_max_cost_usd": 1.25, "afk_run_timeout_minutes": 30}),
        )
        .await
        .ok();
    assert_eq!(r["check_command"], "cargo test\nmake lint");
    assert_eq!(
        (&r["afk_max_cost_usd"], &r["afk_run_timeout_minutes"]),
        (&json!(1.25), &json!(30))
    );
    let e = s
        .patch("/api/v1/repos/r", json!({"check_command": "make\u{1b}[2J"}))
        .await
        .expect(400);
    assert_eq!(e["error"]["field"], "check_command", "{e}");
    assert_eq!(
        s.get("/api/v1/repos/r").await.ok()["check_command"],
        "cargo test\nmake lint"
    );
    s.stop().await;
}

async fn patch_sets_canonical_values_and_merges_options(b: Backend) {
    let s = TestServer::start(b).await;
    let v = s
        .patch(
            "/api/v1/settings",
            json!({"providers": {"claude-code": {"model_default": "OPUS", "afk_effort_default": "Max",
                   "afk_options": {"ultracode": true}}}, "afk": {"max_concurrent": 4}}),
        )
        .await
        .ok();
    let p = &v["providers"]["claude-code"];
    assert_eq!(p["model_default"], "opus");
    assert_eq!(p["afk_effort_default"], "max");
    assert_eq!(p["afk_options"], json!({"ultracode": "true"}));
    assert_eq!(v["afk"]["max_concurrent"], 4);

    // A second PATCH merges options key by key and leaves other fields.
    let v = s
        .patch(
            "/api/v1/settings",
            json!({"providers": {"claude-code": {"afk_options": {"permission_mode": "DONTASK"}}}}),
        )
        .await
        .ok();
    let p = &v["providers"]["claude-code"];
    assert_eq!(
        p["afk_options"],
        json!({"ultracode": "true", "permission_mode": "dontAsk"})
    );
    assert_eq!(p["model_default"], "opus");

    // null and "" clear.
    let v = s
        .patch(
            "/api/v1/settings",
            json!({"providers": {"claude-code": {"model_default": null, "afk_effort_default": "",
                   "afk_options": {"ultracode": null, "permission_mode": ""}}}}),
        )
        .await
        .ok();
    let p = &v["providers"]["claude-code"];
    assert!(
        p["model_default"].is_null() && p["afk_effort_default"].is_null(),
        "{p}"
    );
    assert_eq!(p["afk_options"], json!({}));
    // What the PATCH answered is what a GET reads.
    assert_eq!(s.get("/api/v1/settings").await.ok(), v);
    s.stop().await;
}

async fn an_invalid_patch_writes_nothing(b: Backend) {
    let s = TestServer::start(b).await;
    s.patch(
        "/api/v1/settings",
        json!({"providers": {"codex": {"model_default": "gpt-6-sol"}}}),
    )
    .await
    .ok();
    let before = s.get("/api/v1/settings").await.ok();
    let cases = [
        (
            json!({"providers": {"codex": {"model_default": "gpt-4", "effort_default": "high"}}}),
            "providers.codex.model_default",
            Some("gpt-4"),
        ),
        (
            json!({"providers": {"codex": {"effort_default": "minimal"}}}),
            "providers.codex.effort_default",
            Some("minimal"),
        ),
        (
            json!({"providers": {"claude-code": {"afk_options": {"ultracode": "maybe"}}}}),
            "providers.claude-code.afk_options.ultracode",
            Some("maybe"),
        ),
        (
            json!({"providers": {"claude-code": {"afk_options": {"turbo": true}}}}),
            "providers.claude-code.afk_options.turbo",
            Some("turbo"),
        ),
        (
            json!({"providers": {"claude-code": {"afk_options": {"ultracode": 1}}}}),
            "providers.claude-code.afk_options.ultracode",
            Some("1"),
        ),
        (
            json!({"providers": {"gemini": {"model_default": "x"}}}),
            "providers.gemini",
            Some("gemini"),
        ),
        (
            json!({"providers": {"codex": {"model_default": "gpt-6-luna"}}, "afk": {"tick_seconds": 0}}),
            "afk.tick_seconds",
            Some("0"),
        ),
        (
            json!({"afk": {"max_concurrent": -1}}),
            "afk.max_concurrent",
            Some("-1"),
        ),
        (
            json!({"afk": {"max_rounds": 0}}),
            "afk.max_rounds",
            Some("0"),
        ),
        (
            json!({"afk": {"max_attempts": 11}}),
            "afk.max_attempts",
            Some("11"),
        ),
        (
            json!({"afk": {"max_tokens": 5}}),
            "afk.max_tokens",
            Some("5"),
        ),
        (
            json!({"afk": {"max_cost_usd": 0.009999999999}}),
            "afk.max_cost_usd",
            None,
        ),
        (
            json!({"afk": {"memory_per_run_mb": -1}}),
            "afk.memory_per_run_mb",
            Some("-1"),
        ),
    ];
    for (body, field, value) in cases {
        let e = s.patch("/api/v1/settings", body.clone()).await.expect(400);
        assert_eq!(e["error"]["code"], "invalid", "{body}");
        assert_eq!(e["error"]["field"], field, "{body}: {e}");
        if let Some(v) = value {
            assert_eq!(e["error"]["value"], v, "{body}: {e}");
        }
        assert!(
            e["error"]["message"].as_str().unwrap().contains(field),
            "{e}"
        );
        assert_eq!(
            s.get("/api/v1/settings").await.ok(),
            before,
            "{body} wrote something"
        );
    }
    // The allowed values are listed.
    let e = s
        .patch(
            "/api/v1/settings",
            json!({"providers": {"codex": {"effort_default": "minimal"}}}),
        )
        .await
        .expect(400);
    assert_eq!(
        e["error"]["allowed"],
        json!(["low", "medium", "high", "xhigh"])
    );
    // Unknown fields are named too.
    let e = s
        .patch("/api/v1/settings", json!({"afk": {"tick": 5}}))
        .await
        .expect(400);
    assert!(
        e["error"]["message"].as_str().unwrap().contains("tick"),
        "{e}"
    );
    s.stop().await;
}

async fn empty_afk_model_and_effort_mean_inherit(b: Backend) {
    let s = TestServer::start(b).await;
    let v = s
        .patch(
            "/api/v1/settings",
            json!({"providers": {"codex": {"afk_model_default": "", "afk_effort_default": ""}}}),
        )
        .await
        .ok();
    assert!(v["providers"]["codex"]["afk_model_default"].is_null());
    s.stop().await;
}

/// A body that is not a JSON object (an array, a number) is a 400 that
/// says so, never an empty patch; the other bodies take objects too.
async fn a_body_that_is_not_an_object_is_refused(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let before = s.get("/api/v1/settings").await.ok();
    for (method, path) in [
        (reqwest::Method::PATCH, "/api/v1/settings"),
        (reqwest::Method::PATCH, "/api/v1/repos/r"),
        (reqwest::Method::POST, "/api/v1/repos/r/issues"),
        (reqwest::Method::POST, "/api/v1/runs"),
    ] {
        for body in [json!([]), json!(["x"]), json!(7), json!("s")] {
            let e = s
                .send(s.req(method.clone(), path).json(&body))
                .await
                .expect(400);
            assert_eq!(e["error"]["code"], "invalid", "{method} {path} {body}: {e}");
            let msg = e["error"]["message"].as_str().unwrap();
            assert!(msg.contains("JSON object"), "{method} {path} {body}: {msg}");
        }
    }
    assert_eq!(s.get("/api/v1/settings").await.ok(), before);
    assert_eq!(s.get("/api/v1/runs").await.ok(), json!([]));
    s.stop().await;
}

on_both!(
    settings_start_empty_for_every_provider,
    patch_sets_canonical_values_and_merges_options,
    an_invalid_patch_writes_nothing,
    empty_afk_model_and_effort_mean_inherit,
    a_body_that_is_not_an_object_is_refused,
);
