//! Knobs (issue 27) through the API, in process: the registry, the global
//! and repo sets (replace-set, refused whole), a built-in issue's
//! directives (checked against its repo, fixed once claimed), and the
//! resolver's issue layer with its provenance.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::in_process::App;
use crate::issue_pages::post_form;
use crate::on_both;
use crate::pages_input::{csrf_of, session, visit};
use crate::support::{Backend, TestServer};

on_both!(the_pages_show_and_save_knobs_from_the_registry,);

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
    assert_eq!(keys, ["changeScope", "writes"]);
    let scope = &a.body[0];
    assert_eq!(scope["type"], "choice");
    assert_eq!(
        scope["allowed"],
        json!(["surgical", "moderate", "refactor"])
    );
    assert_eq!(scope["default"], "moderate");
    assert_eq!(scope["phases"], json!(["work"]));
    assert!(scope["description"].as_str().unwrap().contains("surgical"));
    let writes = &a.body[1];
    assert_eq!(
        (&writes["type"], &writes["allowed"], &writes["default"]),
        (&json!("globs"), &Value::Null, &json!([]))
    );
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
        let a = app
            .api(
                Method::PATCH,
                &format!("/repos/r/issues/{n}"),
                Some(json!({"knobs": knobs})),
            )
            .await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{knobs}: {}", a.body);
        assert!(a.body.to_string().contains(says), "{knobs}: {}", a.body);
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
               {"key": "writes", "value": ["src/**"], "source": "repo"}])
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

/// The settings, repo and issue pages list every registered knob (no
/// template names one), save them, refuse a wrong one inline (400, what was
/// typed kept, nothing written), and the issue page says what its AFK run
/// gets and from where.
async fn the_pages_show_and_save_knobs_from_the_registry(b: Backend) {
    let s = TestServer::start(b).await;
    let cookie = session(&s).await;
    let settings = page(&s, &cookie, "/settings").await;
    for k in ["changeScope", "writes"] {
        assert!(
            settings.contains(&format!("name=\"knobs.{k}\"")),
            "{k} on the settings page"
        );
    }
    assert!(
        settings.contains("same as the knob&#39;s default: moderate"),
        "the inherit entry names the default"
    );
    let csrf = csrf_of(&settings);
    let r = post_form(&s, &cookie, "/settings", &format!("csrf={csrf}&knobs.shown=1&knobs.changeScope=surgical&knobs.writes=src%2F**%2C+docs%2F**")).await;
    assert_eq!(r.status(), 303, "{}", r.text().await.unwrap());
    let v = s.get("/api/v1/settings").await.ok();
    assert_eq!(
        v["knobs"],
        json!({"changeScope": "surgical", "writes": ["src/**", "docs/**"]})
    );
    let r = post_form(
        &s,
        &cookie,
        "/settings",
        &format!("csrf={csrf}&knobs.shown=1&knobs.changeScope=refactor&knobs.writes=..%2Fx"),
    )
    .await;
    assert_eq!(r.status(), 400);
    let body = r.text().await.unwrap();
    assert!(
        body.contains("must not have a . or .. part"),
        "the error is shown"
    );
    assert!(
        body.contains("value=\"..&#47;x\"") || body.contains("value=\"../x\""),
        "what was typed is kept"
    );
    assert_eq!(
        s.get("/api/v1/settings").await.ok()["knobs"]["changeScope"],
        "surgical",
        "nothing written"
    );

    s.add_repo("r").await;
    let repo = page(&s, &cookie, "/repos/r").await;
    assert!(
        repo.contains("name=\"knobs.writes\""),
        "knobs on the repo page"
    );
    assert!(
        repo.contains("same as the global settings: surgical"),
        "inherited from the settings"
    );
    assert!(repo.contains("data-what=\"afk-changeScope\"><strong>surgical</strong> <span class=\"from\">from the global settings"), "what runs get");
    let v = s.get("/api/v1/repos/r").await.ok();
    let path = v["path"].as_str().unwrap().to_owned();
    let r = post_form(
        &s,
        &cookie,
        "/repos/r",
        &format!("csrf={}&path={}&knobs.shown=1&knobs.changeScope=&knobs.writes=src%2F**&allowed_models=sonnet%2C+haiku", csrf_of(&repo), path),
    )
    .await;
    assert_eq!(r.status(), 303, "{}", r.text().await.unwrap());
    let v = s.get("/api/v1/repos/r").await.ok();
    assert_eq!(v["knobs"], json!({"writes": ["src/**"]}));
    assert_eq!(v["allowed_models"], json!(["sonnet", "haiku"]));

    let i = s
        .post("/api/v1/repos/r/issues", json!({"title": "t"}))
        .await
        .ok();
    let n = i["number"].as_i64().unwrap();
    let issue = page(&s, &cookie, &format!("/repos/r/issues/{n}")).await;
    assert!(
        issue.contains("None set: its AFK run gets the repo"),
        "{issue}"
    );
    assert!(
        issue.contains("name=\"knobs.max_cost_usd\""),
        "the issue layer's keys"
    );
    let at = format!("/repos/r/issues/{n}/knobs");
    let r = post_form(
        &s,
        &cookie,
        &at,
        &format!(
            "csrf={}&knobs.model=opus&knobs.changeScope=",
            csrf_of(&issue)
        ),
    )
    .await;
    assert_eq!(r.status(), 400);
    let body = r.text().await.unwrap();
    assert!(
        body.contains("not one this repo&#39;s issues may ask for"),
        "a widening refused inline"
    );
    let r = post_form(
        &s,
        &cookie,
        &at,
        &format!(
            "csrf={}&knobs.model=haiku&knobs.writes=src%2Fapi%2F**&knobs.max_tokens=5000",
            csrf_of(&issue)
        ),
    )
    .await;
    assert_eq!(r.status(), 303, "{}", r.text().await.unwrap());
    let i = s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok();
    assert_eq!(
        i["knobs"],
        json!({"writes": ["src/api/**"], "model": "haiku", "max_tokens": 5000})
    );
    let issue = page(&s, &cookie, &format!("/repos/r/issues/{n}")).await;
    assert!(issue.contains("Its AFK run works with these."), "{issue}");
    assert!(
        issue.contains(
            "data-what=\"issue-model\"><strong>haiku</strong> <span class=\"from\">from the issue"
        ),
        "{issue}"
    );
    assert!(issue.contains("data-what=\"issue-max tokens\"><strong>5000</strong> <span class=\"from\">from the issue"), "{issue}");
    s.stop().await;
}
