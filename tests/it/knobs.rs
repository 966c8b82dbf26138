//! Knobs (issue 27): in process, the registry, the global and repo sets
//! (replace-set, refused whole), a built-in issue's directives (checked
//! against its repo, fixed once claimed) and the resolver's issue layer with
//! its provenance. With a server: the pages and labctl (`fronts`), AFK runs
//! and their issue's directives (`afk`), a repo's `.lab.toml` (`repo_file`).

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::in_process::App;
use crate::on_both;
use crate::pages_input::visit;
use crate::support::{Backend, TestServer};

mod afk;
mod fronts;
mod repo_file;

on_both!(
    the_registry_lists_every_knob_with_its_contract_fields,
    settings_and_repo_knobs_are_replaced_whole_and_checked,
    an_issue_s_knobs_narrow_its_repo_and_are_fixed_once_claimed,
    an_afk_resolve_for_an_issue_shows_where_each_value_came_from,
);

async fn the_registry_lists_every_knob_with_its_contract_fields(b: Backend) {
    let app = App::new(&b).await;
    let a = app.api(Method::GET, "/knobs", None).await;
    assert_eq!(a.status, StatusCode::OK);
    let keys: Vec<&str> = a
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["changeScope", "writes", "plan", "review"]);
    let scope = &a.body[0];
    assert_eq!(scope["type"], "choice");
    assert_eq!(
        scope["allowed"],
        json!(["surgical", "moderate", "refactor"])
    );
    assert_eq!(scope["default"], "moderate");
    assert_eq!(scope["phases"], json!(["plan", "work", "review"]));
    assert!(scope["description"].as_str().unwrap().contains("surgical"));
    let writes = &a.body[1];
    assert_eq!(
        (&writes["type"], &writes["allowed"], &writes["default"]),
        (&json!("globs"), &Value::Null, &json!([]))
    );
    let plan = &a.body[2];
    assert_eq!(
        (&plan["type"], &plan["allowed"], &plan["default"]),
        (
            &json!("choice"),
            &json!(["off", "auto", "on"]),
            &json!("off")
        )
    );
    assert_eq!(a.body[3]["allowed"], json!(["off", "on"]));
}

/// A `PATCH` answered 400 with an error that says `says`.
async fn refused(app: &App, path: &str, body: Value, says: &str) {
    let a = app.api(Method::PATCH, path, Some(body.clone())).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{body}: {}", a.body);
    assert!(a.body.to_string().contains(says), "{body}: {}", a.body);
}

async fn settings_and_repo_knobs_are_replaced_whole_and_checked(b: Backend) {
    let app = App::new(&b).await;
    let a = app
        .api(
            Method::PATCH,
            "/settings",
            Some(json!({"knobs": {"changeScope": "SURGICAL", "writes": ["src/**"]}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(
        a.body["knobs"],
        json!({"changeScope": "surgical", "writes": ["src/**"]}),
        "canonical casing"
    );
    // A wrong key and a wrong value: both named, nothing written (the
    // valid limit beside them neither).
    let a = app
        .api(
            Method::PATCH,
            "/settings",
            Some(json!({"afk": {"max_rounds": 4}, "knobs": {"scope": "x", "writes": ["../etc"]}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
    let text = a.body.to_string();
    assert!(
        text.contains("knobs.scope") && text.contains("known knobs: changeScope, writes"),
        "{text}"
    );
    assert!(text.contains("knobs.writes"), "{text}");
    let s = app.api(Method::GET, "/settings", None).await.body;
    assert_eq!(s["afk"]["max_rounds"], 3, "a refused change writes nothing");
    assert_eq!(s["knobs"]["changeScope"], "surgical");
    // What the schema refuses, the server refuses: an unknown key even when
    // it says nothing, a blank that is not exactly "", a glob with blanks.
    for (knobs, says) in [
        (json!({"scope": null}), "knobs.scope"),
        (json!({"changeScope": "  "}), "knobs.changeScope"),
        (json!({"writes": [" src/**"]}), "knobs.writes"),
    ] {
        refused(&app, "/settings", json!({"knobs": knobs}), says).await;
    }
    // A choice in any case, blanks around it trimmed (the schema's pattern).
    let a = app
        .api(
            Method::PATCH,
            "/settings",
            Some(json!({"knobs": {"changeScope": " Surgical\t"}})),
        )
        .await;
    assert_eq!(
        a.body["knobs"],
        json!({"changeScope": "surgical"}),
        "{}",
        a.body
    );
    // Replace-set: what is not sent goes; `{}` clears.
    let a = app
        .api(
            Method::PATCH,
            "/settings",
            Some(json!({"knobs": {"writes": ["docs/**"]}})),
        )
        .await;
    assert_eq!(a.body["knobs"], json!({"writes": ["docs/**"]}));
    let a = app
        .api(Method::PATCH, "/settings", Some(json!({"knobs": {}})))
        .await;
    assert_eq!(a.body["knobs"], json!({}));

    app.repo("r").await;
    let a = app
        .api(
            Method::PATCH,
            "/repos/r",
            Some(json!({"knobs": {"changeScope": "refactor", "writes": ""}, "allowed_models": ["Sonnet", "opus", "sonnet"]})),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(
        a.body["knobs"],
        json!({"changeScope": "refactor"}),
        "\"\" leaves a knob unset"
    );
    assert_eq!(a.body["allowed_models"], json!(["sonnet", "opus"]));
    assert!(a.body["config_file"].is_null(), "no .lab.toml: {}", a.body);
    let a = app
        .api(
            Method::PATCH,
            "/repos/r",
            Some(json!({"allowed_models": ["gpt-5.5"]})),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
    assert!(
        a.body
            .to_string()
            .contains("unknown model 'gpt-5.5' for provider claude-code"),
        "{}",
        a.body
    );
    // A provider whose catalog lacks the allowed models: said, not dropped.
    let a = app
        .api(
            Method::PATCH,
            "/repos/r",
            Some(json!({"provider": "codex"})),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
    assert!(a.body.to_string().contains("allowed_models"), "{}", a.body);
}

async fn an_issue_s_knobs_narrow_its_repo_and_are_fixed_once_claimed(b: Backend) {
    let app = App::new(&b).await;
    app.repo("r").await;
    let a = app
        .api(
            Method::PATCH,
            "/repos/r",
            Some(json!({"afk_max_cost_usd": 5.0, "allowed_models": ["sonnet", "haiku"], "knobs": {"writes": ["src/**"]}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let a = app
        .api(
            Method::POST,
            "/repos/r/issues",
            Some(json!({"title": "t", "knobs": {"model": "HAIKU", "changeScope": "surgical", "max_cost_usd": 2, "writes": ["src/api/**"]}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    assert_eq!(
        a.body["knobs"],
        json!({"changeScope": "surgical", "writes": ["src/api/**"], "model": "haiku", "max_cost_usd": 2.0}),
        "stored canonical"
    );
    let n = a.body["number"].as_i64().unwrap();
    assert_eq!(
        app.api(Method::GET, &format!("/repos/r/issues/{n}"), None)
            .await
            .body["knobs"]["model"],
        "haiku"
    );
    // Each way to widen the repo is a 400 naming it; nothing is written.
    for (knobs, says) in [
        (
            json!({"max_cost_usd": 6}),
            "an issue may only lower a budget",
        ),
        (json!({"model": "opus"}), "allowed: sonnet, haiku"),
        (
            json!({"writes": ["lib/**"]}),
            "may only narrow the repo's writes",
        ),
        (json!({"writes": []}), "unrestricted"),
        (json!({"sandbox": "read-only"}), "unknown key 'sandbox'"),
    ] {
        refused(
            &app,
            &format!("/repos/r/issues/{n}"),
            json!({"knobs": knobs}),
            says,
        )
        .await;
    }
    let a = app
        .api(
            Method::POST,
            "/repos/r/issues",
            Some(json!({"title": "u", "knobs": {"model": "opus"}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
    let list = app.api(Method::GET, "/repos/r/issues", None).await.body;
    assert_eq!(
        list.as_array().unwrap().len(),
        1,
        "a refused create opens nothing"
    );
    assert_eq!(
        list[0]["knobs"]["model"], "haiku",
        "a refused change writes nothing"
    );
    // Replaced whole.
    let a = app
        .api(
            Method::PATCH,
            &format!("/repos/r/issues/{n}"),
            Some(json!({"knobs": {"effort": "low"}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["knobs"], json!({"effort": "low"}));
    // `{}` clears, and the issue takes the repo's values again.
    for (knobs, now) in [
        (json!({}), json!({})),
        (json!({"effort": "low"}), json!({"effort": "low"})),
    ] {
        let a = app
            .api(
                Method::PATCH,
                &format!("/repos/r/issues/{n}"),
                Some(json!({"knobs": knobs})),
            )
            .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        assert_eq!(a.body["knobs"], now);
    }
    // Claimed: fixed.
    app.edit_by_hand(
        "INSERT INTO afk_claims (repo_id, repo_name, issue_number, node, claimed_at) \
         SELECT id, name, 1, 'n', 0 FROM repos WHERE name = 'r'",
    )
    .await;
    let a = app
        .api(
            Method::PATCH,
            &format!("/repos/r/issues/{n}"),
            Some(json!({"knobs": {}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.body);
    assert!(
        a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("claimed by an AFK run"),
        "{}",
        a.body
    );
    assert_eq!(
        app.api(Method::GET, &format!("/repos/r/issues/{n}"), None)
            .await
            .body["knobs"],
        json!({"effort": "low"})
    );
    let a = app
        .api(
            Method::PATCH,
            "/repos/r/issues/99",
            Some(json!({"knobs": {}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.body);
}

async fn an_afk_resolve_for_an_issue_shows_where_each_value_came_from(b: Backend) {
    let app = App::new(&b).await;
    app.repo("r").await;
    app.api(
        Method::PATCH,
        "/settings",
        Some(json!({"knobs": {"changeScope": "refactor"}})),
    )
    .await;
    app.api(
        Method::PATCH,
        "/repos/r",
        Some(json!({"afk_max_tokens": 100000, "knobs": {"writes": ["src/**"]}})),
    )
    .await;
    let a = app
        .api(
            Method::POST,
            "/repos/r/issues",
            Some(json!({"title": "t", "knobs": {"model": "opus", "ultracode": true, "max_tokens": 5000, "changeScope": "surgical"}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    let r = app
        .api(Method::GET, "/repos/r/resolve?kind=afk&issue=1", None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let b = &r.body;
    assert_eq!(
        (&b["model"]["value"], &b["model"]["source"]),
        (&json!("opus"), &json!("issue"))
    );
    assert_eq!(
        b["options"]["ultracode"],
        json!({"value": "true", "source": "issue"})
    );
    assert_eq!(b["effort"]["source"], "provider.default");
    assert_eq!(
        b["knobs"],
        json!([{"key": "changeScope", "value": "surgical", "source": "issue"},
               {"key": "writes", "value": ["src/**"], "source": "repo"},
               {"key": "plan", "value": "off", "source": "default"},
               {"key": "review", "value": "off", "source": "default"}])
    );
    assert_eq!(
        (
            &b["budget"]["max_tokens"],
            &b["budget"]["max_tokens_source"]
        ),
        (&json!(5000), &json!("issue"))
    );
    assert_eq!(b["budget"]["run_timeout_minutes_source"], "settings");
    // Without the issue: the repo's and the settings' word.
    let r = app
        .api(Method::GET, "/repos/r/resolve?kind=afk", None)
        .await
        .body;
    assert_eq!(
        r["knobs"][0],
        json!({"key": "changeScope", "value": "refactor", "source": "settings"})
    );
    assert_eq!(r["budget"]["max_tokens_source"], "repo");
    let r = app.api(Method::GET, "/repos/r/resolve?issue=1", None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.body["knobs"].is_null());
    // The repo narrows after the issue was written: the resolve says so.
    app.api(
        Method::PATCH,
        "/repos/r",
        Some(json!({"allowed_models": ["sonnet"]})),
    )
    .await;
    let r = app
        .api(Method::GET, "/repos/r/resolve?kind=afk&issue=1", None)
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(
        r.body
            .to_string()
            .contains("not one this repo's issues may ask for"),
        "{}",
        r.body
    );
}

async fn page(s: &TestServer, cookie: &str, path: &str) -> String {
    let r = visit(s, cookie, reqwest::Method::GET, path).await;
    assert_eq!(r.status(), 200, "{path}");
    r.text().await.unwrap()
}
