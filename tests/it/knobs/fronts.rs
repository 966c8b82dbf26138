//! Knobs through the front ends (issue 27): the settings, repo and issue
//! pages list, save and refuse them; labctl sets and shows them and an
//! issue's directives.

use super::page;
use crate::issue_pages::post_form;
use crate::on_both;
use crate::pages_input::{csrf_of, session};
use crate::support::{Backend, TestServer};
use serde_json::json;

on_both!(
    the_pages_show_and_save_knobs_from_the_registry,
    labctl_sets_and_shows_knobs_and_directives,
);

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

/// labctl: the registry, knobs on settings and a repo (one key at a time,
/// `KEY=` clears it), an issue's directives, and what an AFK run of the
/// issue gets with each value's source; a wrong key is refused by name.
async fn labctl_sets_and_shows_knobs_and_directives(b: Backend) {
    use crate::labctl::{labctl, ok};
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let list = ok(&labctl(&s, &["knobs"]));
    assert!(
        list.contains("changeScope") && list.contains("writes"),
        "{list}"
    );
    ok(&labctl(
        &s,
        &["settings", "set", "--knob", "changeScope=refactor"],
    ));
    ok(&labctl(
        &s,
        &["repo", "set", "r", "--knob", r#"writes=["src/**"]"#],
    ));
    let shown = ok(&labctl(&s, &["repo", "show", "r"]));
    assert!(
        shown.contains(r#"knobs:           writes=["src/**"]"#),
        "{shown}"
    );
    let created = ok(&labctl(
        &s,
        &[
            "issue",
            "create",
            "--repo",
            "r",
            "--title",
            "Narrow",
            "--knob",
            "changeScope=surgical",
            "--knob",
            "max_tokens=5000",
        ],
    ));
    assert!(created.contains("opened issue #1"), "{created}");
    let got = ok(&labctl(
        &s,
        &["resolve", "r", "--kind", "afk", "--issue", "1"],
    ));
    let row = |what: &str| -> Vec<String> {
        got.lines()
            .find(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("no {what} row: {got}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(row("knob changeScope")[2..], ["surgical", "issue"], "{got}");
    assert_eq!(row("knob writes")[2..], [r#"src/**"#, "repo"], "{got}");
    assert_eq!(row("max tokens")[2..], ["5000", "issue"], "{got}");
    // The issue's directives replaced, then a wrong key refused by name.
    let set = ok(&labctl(
        &s,
        &[
            "issue",
            "knobs",
            "1",
            "--repo",
            "r",
            "--knob",
            "changeScope=moderate",
        ],
    ));
    assert!(set.contains("changeScope=moderate"), "{set}");
    let out = labctl(&s, &["repo", "set", "r", "--knob", "nope=1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nope") && err.contains("changeScope"), "{err}");
    // `KEY=` takes the repo's knob off: it inherits again.
    ok(&labctl(&s, &["repo", "set", "r", "--knob", "writes="]));
    let shown = ok(&labctl(&s, &["repo", "show", "r"]));
    assert!(shown.contains("knobs:           none"), "{shown}");
    let got = ok(&labctl(&s, &["resolve", "r", "--kind", "afk"]));
    assert!(
        got.lines().any(|l| l.starts_with("knob changeScope")
            && l.contains("refactor")
            && l.contains("settings")),
        "{got}"
    );
    s.stop().await;
}
