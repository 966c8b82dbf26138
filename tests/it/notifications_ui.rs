//! Notification endpoints through the settings page and labctl: both send
//! the list back as lab showed it, never knowing a URL or a token.

use serde_json::json;

use crate::notifications::{ALL, Receiver, notify};
use crate::on_both;
use crate::support::{Backend, TestServer};

/// The settings page shows each endpoint with its URL redacted and posts
/// the list back without knowing a secret: a redacted URL keeps the stored
/// one (and its token), an empty one removes the endpoint; a wrong one is
/// shown beside its field and writes nothing.
async fn the_settings_page_round_trips_without_the_secrets(b: Backend) {
    use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION};
    let s = TestServer::start(b).await;
    let secret = "https://hooks.example.com/services/T1/B2/pageSeCrEtpageSeCrEt";
    notify(
        &s,
        json!([
            {"kind": "slack", "url": secret, "events": ["waiting"]},
            {"kind": "webhook", "url": "https://hooks.example.com/other-long-path-1234", "events": ["ended"], "token": "tk_page"},
            {"kind": "ntfy", "url": "https://ntfy.example.com/topic", "events": ["failed"]},
        ]),
    )
    .await;
    let cookie = crate::pages_input::session(&s).await;
    let get = async || {
        crate::pages_input::client()
            .get(format!("{}/settings", s.url))
            .header(COOKIE, &cookie)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let page = get().await;
    assert!(
        !page.contains("SeCrEt") && !page.contains("tk_page"),
        "a secret on the page"
    );
    assert!(
        page.contains("https://hooks.example.com/…CrEt"),
        "the redacted URL is shown"
    );
    assert!(page.contains("New notification endpoint"));
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the form has a CSRF token")
        .to_owned();
    let enc = |v: &str| {
        percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    let post = async |fields: &[(&str, &str)]| {
        let mut body = format!(
            "csrf={csrf}&notifications.shown=1&afk.max_concurrent=2&afk.tick_seconds=30&afk.run_timeout_minutes=60"
        );
        for (k, v) in fields {
            body.push_str(&format!("&{}={}", enc(k), enc(v)));
        }
        crate::pages_input::client()
            .post(format!("{}/settings", s.url))
            .header(COOKIE, &cookie)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap()
    };
    let shown = s.get("/api/v1/settings").await.ok()["notifications"].clone();
    let url = |i: usize| shown[i]["url"].as_str().unwrap().to_owned();
    let (u0, u1, u2) = (url(0), url(1), url(2));
    // A wrong URL in a new row: refused, shown beside the field, nothing written.
    let r = post(&[
        ("notifications.0.kind", "slack"),
        ("notifications.0.url", &u0),
        ("notifications.0.events.waiting", "true"),
        ("notifications.1.kind", "webhook"),
        ("notifications.1.url", ""),
        ("notifications.2.kind", "webhook"),
        ("notifications.2.url", "ftp://nope"),
        ("notifications.2.events.ended", "true"),
    ])
    .await;
    assert_eq!(r.status(), 400);
    let html = r.text().await.unwrap();
    assert!(
        html.contains("must be an http:// or https:// URL"),
        "the error is shown"
    );
    assert!(!html.contains("SeCrEt"));
    assert_eq!(s.get("/api/v1/settings").await.ok()["notifications"], shown);

    // Keep the first two as shown (one more event on the first), drop the
    // third, add none.
    let r = post(&[
        ("notifications.0.kind", "slack"),
        ("notifications.0.url", &u0),
        ("notifications.0.events.waiting", "true"),
        ("notifications.0.events.failed", "true"),
        ("notifications.1.kind", "webhook"),
        ("notifications.1.url", &u1),
        ("notifications.1.events.ended", "true"),
        ("notifications.2.kind", "ntfy"),
        ("notifications.2.url", ""),
        ("notifications.3.kind", "webhook"),
        ("notifications.3.url", ""),
    ])
    .await;
    assert_eq!(r.status(), 303, "{}", r.text().await.unwrap_or_default());
    assert_eq!(r.headers()[LOCATION], "/settings?saved=1");
    let now = s.get("/api/v1/settings").await.ok()["notifications"].clone();
    assert_eq!(now.as_array().unwrap().len(), 2, "{now}");
    assert_eq!(now[0]["url"], u0.as_str());
    assert_eq!(now[0]["events"], json!(["waiting", "failed"]));
    assert_eq!(now[1]["url"], u1.as_str());
    assert_eq!(now[1]["token_set"], true);
    assert!(!now.to_string().contains(&u2));
    s.stop().await;
}

/// `labctl settings notify add|list|remove`: the list goes back as lab
/// showed it, so what labctl never saw (URLs, tokens) stays.
async fn labctl_adds_lists_and_removes_endpoints(b: Backend) {
    use crate::labctl::{json as labctl_json, labctl, ok};
    let rx = Receiver::start().await;
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let hook = format!("{}/hook-with-a-long-secret-path", rx.url);
    let out = ok(&labctl(
        &s,
        &[
            "settings",
            "notify",
            "add",
            "--kind",
            "webhook",
            "--url",
            &hook,
            "--event",
            "ended",
            "--endpoint-token",
            "tk_cli",
        ],
    ));
    assert!(
        out.contains("webhook") && out.contains("ended") && out.contains("set"),
        "{out}"
    );
    assert!(
        !out.contains("long-secret") && !out.contains("tk_cli"),
        "{out}"
    );
    ok(&labctl(
        &s,
        &[
            "settings",
            "notify",
            "add",
            "--kind",
            "ntfy",
            "--url",
            &format!("{}/topic", rx.url),
        ],
    ));
    let list = labctl_json(&labctl(&s, &["settings", "notify", "list", "--json"]));
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert_eq!(list[1]["events"], json!(ALL));
    let bad = labctl(
        &s,
        &[
            "settings",
            "notify",
            "add",
            "--kind",
            "pager",
            "--url",
            "https://x.example/",
        ],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("webhook, ntfy or slack"));
    assert!(
        !labctl(&s, &["settings", "notify", "remove", "3"])
            .status
            .success()
    );
    ok(&labctl(&s, &["settings", "notify", "remove", "2"]));
    let list = labctl_json(&labctl(&s, &["settings", "notify", "list", "--json"]));
    assert_eq!(list.as_array().unwrap().len(), 1);
    // The endpoint labctl sent back redacted still reaches its URL, with its token.
    s.start_run("r", "FAKE_EXIT=0").await;
    let got = rx.wait_for("hook-with-a-long-secret-path", 1).await;
    assert_eq!(got[0].json()["event"], "ended");
    assert_eq!(got[0].headers["authorization"], "Bearer tk_cli");
    assert!(rx.got("topic").is_empty());
    s.stop().await;
}

on_both!(
    the_settings_page_round_trips_without_the_secrets,
    labctl_adds_lists_and_removes_endpoints,
);
