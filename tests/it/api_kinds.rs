//! Plan and review runs' own settings (issue 28, ADR 32) through the API,
//! labctl and the pages, on both databases: `plan_*` / `review_*` beside
//! `afk_*`, each kind's provider, `afk.max_plan_rounds`, and what a run of
//! each kind resolves to.

use reqwest::header::COOKIE;
use serde_json::json;

use crate::labctl::{json as labctl_json, labctl, ok};
use crate::on_both;
use crate::support::{Backend, TestServer};

async fn settings_round_trip_plan_and_review_defaults(b: Backend) {
    let s = TestServer::start(b).await;
    let v = s.get("/api/v1/settings").await.ok();
    assert!(
        v["plan_provider"].is_null() && v["review_provider"].is_null(),
        "{v}"
    );
    assert_eq!(v["afk"]["max_plan_rounds"], 3);
    assert_eq!(v["providers"]["codex"]["plan_options"], json!({}));
    let v = s
        .patch(
            "/api/v1/settings",
            json!({"plan_provider": "codex", "afk": {"max_plan_rounds": 5},
                   "providers": {"codex": {"plan_model_default": "GPT-6-LUNA",
                       "review_effort_default": "Low", "review_options": {"sandbox": "read-only"}},
                     "claude-code": {"plan_options": {"ultracode": true}}}}),
        )
        .await
        .ok();
    let codex = &v["providers"]["codex"];
    assert_eq!(codex["plan_model_default"], "gpt-6-luna", "{v}");
    assert_eq!(codex["review_effort_default"], "low");
    assert_eq!(codex["review_options"], json!({"sandbox": "read-only"}));
    assert!(codex["afk_model_default"].is_null());
    assert_eq!(
        v["providers"]["claude-code"]["plan_options"],
        json!({"ultracode": "true"})
    );
    assert_eq!(v["plan_provider"], "codex");
    assert_eq!(v["afk"]["max_plan_rounds"], 5);
    // As stored: read back.
    assert_eq!(s.get("/api/v1/settings").await.ok(), v);
    // `null` clears each back to inherit / the default.
    let v = s
        .patch(
            "/api/v1/settings",
            json!({"plan_provider": null, "afk": {"max_plan_rounds": null},
                   "providers": {"codex": {"plan_model_default": null, "review_options": {"sandbox": null}}}}),
        )
        .await
        .ok();
    assert!(v["plan_provider"].is_null());
    assert_eq!(v["afk"]["max_plan_rounds"], 3);
    assert!(v["providers"]["codex"]["plan_model_default"].is_null());
    assert_eq!(v["providers"]["codex"]["review_options"], json!({}));
    assert_eq!(v["providers"]["codex"]["review_effort_default"], "low");
    s.stop().await;
}

async fn bad_kind_values_are_refused_by_name_and_write_nothing(b: Backend) {
    let s = TestServer::start(b).await;
    let before = s.get("/api/v1/settings").await.ok();
    for (body, field) in [
        (
            json!({"providers": {"codex": {"plan_model_default": "opus", "model_default": "gpt-6-luna"}}}),
            "providers.codex.plan_model_default",
        ),
        (
            json!({"providers": {"codex": {"review_options": {"ultracode": true}}}}),
            "providers.codex.review_options.ultracode",
        ),
        (
            json!({"review_provider": "nope", "afk": {"max_rounds": 4}}),
            "review_provider",
        ),
        (
            json!({"afk": {"max_plan_rounds": 21, "max_rounds": 4}}),
            "afk.max_plan_rounds",
        ),
        (
            json!({"providers": {"codex": {"plan_options": {"sandbox": 3}}}}),
            "providers.codex.plan_options.sandbox",
        ),
    ] {
        let e = s.patch("/api/v1/settings", body.clone()).await.expect(400);
        assert_eq!(e["error"]["field"], field, "{body}: {e}");
        assert_eq!(s.get("/api/v1/settings").await.ok(), before, "{body} wrote");
    }
    // A repo's review values are checked against its review provider.
    s.add_repo("r").await;
    let repo = s.get("/api/v1/repos/r").await.ok();
    let e = s
        .patch(
            "/api/v1/repos/r",
            json!({"review_provider": "codex", "review_model_default": "opus", "afk_label": "x"}),
        )
        .await
        .expect(400);
    assert_eq!(e["error"]["field"], "review_model_default", "{e}");
    let e = s
        .patch("/api/v1/repos/r", json!({"plan_provider": "gemini"}))
        .await
        .expect(400);
    assert_eq!(e["error"]["field"], "plan_provider", "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("codex"),
        "{e}"
    );
    assert_eq!(s.get("/api/v1/repos/r").await.ok(), repo);
    s.stop().await;
}

async fn a_claude_code_repo_has_codex_review_its_work(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    s.patch(
        "/api/v1/settings",
        json!({"providers": {
            "codex": {"review_model_default": "gpt-6-luna", "afk_model_default": "gpt-5.5"},
            "claude-code": {"review_model_default": "haiku", "afk_model_default": "opus"}}}),
    )
    .await
    .ok();
    let r = s
        .patch(
            "/api/v1/repos/r",
            json!({"review_provider": "codex", "review_effort_default": "low",
                   "plan_model_default": "fable", "afk_effort_default": "max"}),
        )
        .await
        .ok();
    assert_eq!(r["review_provider"], "codex");
    assert!(r["plan_provider"].is_null());
    let review = s.get("/api/v1/repos/r/resolve?kind=review").await.ok();
    assert_eq!(review["kind"], "review");
    assert_eq!(review["provider"], "codex");
    assert_eq!(
        review["model"],
        json!({"value": "gpt-6-luna", "source": "global.review"})
    );
    assert_eq!(
        review["effort"],
        json!({"value": "low", "source": "repo.review"})
    );
    assert!(review["options"].get("ultracode").is_none(), "{review}");
    // The plan stays on the repo's provider, over its AFK layers.
    let plan = s.get("/api/v1/repos/r/resolve?kind=plan").await.ok();
    assert_eq!(plan["provider"], "claude-code");
    assert_eq!(
        plan["model"],
        json!({"value": "fable", "source": "repo.plan"})
    );
    assert_eq!(
        plan["effort"],
        json!({"value": "max", "source": "repo.afk"})
    );
    // No per-run override for them.
    let e = s
        .get("/api/v1/repos/r/resolve?kind=plan&model=opus")
        .await
        .expect(400);
    assert_eq!(e["error"]["field"], "model");
    // labctl explains them too, and sets and shows them.
    let v = labctl_json(&labctl(&s, &["resolve", "r", "--kind", "review", "--json"]));
    assert_eq!(v["provider"], "codex");
    let text = ok(&labctl(&s, &["resolve", "r", "--kind", "review"]));
    assert!(text.contains("global.review"), "{text}");
    let v = labctl_json(&labctl(
        &s,
        &[
            "repo",
            "set",
            "r",
            "--plan-provider",
            "codex",
            "--plan-model",
            "",
            "--json",
        ],
    ));
    assert_eq!(v["plan_provider"], "codex");
    assert!(v["plan_model_default"].is_null(), "{v}");
    let shown = ok(&labctl(&s, &["repo", "show", "r"]));
    assert!(shown.contains("review on codex"), "{shown}");
    let v = labctl_json(&labctl(
        &s,
        &[
            "settings",
            "set",
            "--provider",
            "codex",
            "--review-model",
            "gpt-5.5",
            "--review-provider",
            "codex",
            "--max-plan-rounds",
            "4",
            "--json",
        ],
    ));
    assert_eq!(v["providers"]["codex"]["review_model_default"], "gpt-5.5");
    assert_eq!(v["review_provider"], "codex");
    assert_eq!(v["afk"]["max_plan_rounds"], 4);
    let shown = ok(&labctl(&s, &["settings", "show"]));
    assert!(shown.contains("review runs on codex"), "{shown}");
    s.stop().await;
}

async fn the_pages_show_and_save_the_kinds_fields(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    s.patch("/api/v1/repos/r", json!({"review_provider": "codex"}))
        .await
        .ok();
    let cookie = crate::pages_input::session(&s).await;
    let get = async |path: &str| {
        crate::pages_input::client()
            .get(format!("{}{path}", s.url))
            .header(COOKIE, &cookie)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let page = get("/settings").await;
    for name in [
        "plan_provider",
        "review_provider",
        "afk.max_plan_rounds",
        "providers.codex.plan_model_default",
        "providers.claude-code.review_effort_default",
        "providers.claude-code.plan_options.ultracode",
    ] {
        assert!(
            page.contains(&format!("name=\"{name}\"")),
            "{name} not on the settings page"
        );
    }
    let page = get("/repos/r").await;
    for name in [
        "plan_provider",
        "review_provider",
        "plan_model_default",
        "review_model_default",
        "plan_options.ultracode",
    ] {
        assert!(
            page.contains(&format!("name=\"{name}\"")),
            "{name} not on the repo page"
        );
    }
    // The review fields are codex's (the repo's review provider): its
    // models, not Claude Code's options.
    assert!(!page.contains("name=\"review_options.ultracode\""));
    assert!(page.contains("gpt-6-luna"));
    // It explains what each kind resolves to, with where each value is from.
    assert!(
        page.contains("Review run (on codex)"),
        "no review explanation"
    );
    assert!(
        page.contains("data-what=\"plan-model\""),
        "no plan explanation"
    );

    // The settings page saves them; a wrong one is shown and writes nothing.
    let page = get("/settings").await;
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the form has a CSRF token")
        .to_owned();
    let post = async |fields: &[(&str, &str)]| {
        let enc = |v: &str| {
            percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC).to_string()
        };
        let mut body = format!("csrf={csrf}");
        for (k, v) in fields {
            body.push_str(&format!("&{}={}", enc(k), enc(v)));
        }
        crate::pages_input::client()
            .post(format!("{}/settings", s.url))
            .header(COOKIE, &cookie)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body)
            .send()
            .await
            .unwrap()
    };
    let before = s.get("/api/v1/settings").await.ok();
    let r = post(&[
        ("plan_provider", "codex"),
        ("review_provider", ""),
        ("afk.max_plan_rounds", "99"),
        ("providers.codex.model_default", ""),
        ("providers.codex.plan_model_default", "gpt-6-luna"),
    ])
    .await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("from 1 to 20"));
    assert_eq!(s.get("/api/v1/settings").await.ok(), before);
    let r = post(&[
        ("plan_provider", "codex"),
        ("review_provider", ""),
        ("afk.max_plan_rounds", "4"),
        ("providers.codex.model_default", ""),
        ("providers.codex.plan_model_default", "gpt-6-luna"),
        ("providers.codex.review_options.sandbox", "read-only"),
    ])
    .await;
    assert_eq!(r.status(), 303, "{}", r.text().await.unwrap());
    let v = s.get("/api/v1/settings").await.ok();
    assert_eq!(v["plan_provider"], "codex");
    assert_eq!(v["afk"]["max_plan_rounds"], 4);
    assert_eq!(v["providers"]["codex"]["plan_model_default"], "gpt-6-luna");
    assert_eq!(
        v["providers"]["codex"]["review_options"],
        json!({"sandbox": "read-only"})
    );
    s.stop().await;
}

on_both!(
    settings_round_trip_plan_and_review_defaults,
    bad_kind_values_are_refused_by_name_and_write_nothing,
    a_claude_code_repo_has_codex_review_its_work,
    the_pages_show_and_save_the_kinds_fields,
);

/// The API document describes the kinds' fields from the catalogs: each
/// provider's plan and review model, effort and options, the kinds'
/// providers and `afk.max_plan_rounds`' bounds.
#[test]
fn the_document_describes_the_kinds_fields() {
    let doc = serde_json::to_value(lab::http::openapi()).unwrap();
    let schemas = &doc["components"]["schemas"];
    let settings = &schemas["SettingsPatchBody"]["properties"];
    let codex = &settings["providers"]["properties"]["codex"]["properties"];
    assert!(
        codex["review_model_default"]["enum"]
            .as_array()
            .unwrap()
            .contains(&json!("gpt-6-luna"))
    );
    assert!(codex["plan_options"]["properties"]["sandbox"].is_object());
    assert_eq!(codex["plan_options"]["additionalProperties"], false);
    assert!(
        settings["plan_provider"]["enum"]
            .as_array()
            .unwrap()
            .contains(&json!("codex"))
    );
    let afk = &schemas["AfkPatchBody"]["properties"]["max_plan_rounds"];
    assert_eq!((&afk["minimum"], &afk["maximum"]), (&json!(1), &json!(20)));
    let repo = &schemas["RepoPatchBody"]["properties"];
    for f in [
        "plan_provider",
        "review_provider",
        "plan_model_default",
        "review_options",
    ] {
        assert!(repo[f].is_object(), "{f} not in RepoPatchBody");
    }
}
