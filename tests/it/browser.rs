//! The pages, in real headless Chromium.

use serde_json::json;
use thirtyfour::prelude::*;

use crate::on_both;
use crate::support::browser::Browser;
use crate::support::{Backend, TestServer, wait};

async fn setup(b: Backend, test: &str) -> (TestServer, Browser) {
    // The two backends' twins run at once: a folder each for their
    // screenshots and chromedriver logs.
    let folder = match b {
        Backend::Sqlite => format!("{test}/sqlite"),
        Backend::Postgres(_) => format!("{test}/postgres"),
    };
    let s = TestServer::start(b).await;
    let browser = Browser::start(&s.url, &folder).await;
    browser.login(&s.token).await;
    (s, browser)
}

async fn every_page_renders(b: Backend) {
    let (s, br) = setup(b, "every_page_renders").await;
    s.add_repo("web").await;
    let run = s.start_run("web", "FAKE_LINES=3").await;
    for (path, name, expect) in [
        ("/runs", "runs", "Runs"),
        ("/runs/new", "run_new", "Start a run"),
        ("/repos", "repos", "Add a repo"),
        ("/repos/web", "repo", "What runs get"),
        ("/settings", "settings", "Claude Code: AFK defaults"),
        ("/afk", "afk", "Ledger"),
        ("/nodes", "nodes", "(this one)"),
        (&format!("/runs/{}", run["id"]), "run", "Screen"),
    ] {
        br.go(path).await;
        let text = br.text().await;
        assert!(text.contains(expect), "{path}: {text}");
        br.shot(name).await;
    }
    // A phone's width.
    br.driver.set_window_rect(0, 0, 390, 844).await.unwrap();
    for (path, name) in [
        ("/settings", "settings_phone"),
        ("/repos/web", "repo_phone"),
        ("/runs", "runs_phone"),
    ] {
        br.go(path).await;
        br.shot(name).await;
    }
    br.quit().await;
    s.stop().await;
}

async fn global_afk_settings_reach_the_api(b: Backend) {
    let (s, br) = setup(b, "global_afk_settings").await;
    br.go("/settings").await;
    // The inherit entry names what it inherits.
    let inherit = br
        .driver
        .find(By::Css(
            "select[name='providers.claude-code.afk_model_default'] option[value='']",
        ))
        .await
        .unwrap();
    assert_eq!(
        inherit.text().await.unwrap(),
        "same as default: sonnet (the provider's default)"
    );
    br.select("providers.claude-code.afk_model_default", "opus")
        .await;
    // Ultracode is the same choice as on a repo's page.
    let default = br
        .driver
        .find(By::Css(
            "select[name='providers.claude-code.afk_options.ultracode'] option[value='']",
        ))
        .await
        .unwrap();
    assert_eq!(
        default.text().await.unwrap(),
        "same as default: off (the provider's default)"
    );
    br.select("providers.claude-code.afk_options.ultracode", "true")
        .await;
    br.submit("Save settings").await;
    br.wait_text("saved", |t| t.contains("Saved.")).await;
    br.shot("saved").await;
    let v = s.get("/api/v1/settings").await.ok();
    assert_eq!(v["providers"]["claude-code"]["afk_model_default"], "opus");
    assert_eq!(
        v["providers"]["claude-code"]["afk_options"]["ultracode"],
        "true"
    );
    // The page shows what is stored.
    assert_eq!(
        br.selected("providers.claude-code.afk_model_default").await,
        "opus"
    );
    assert_eq!(
        br.selected("providers.claude-code.afk_options.ultracode")
            .await,
        "true"
    );
    // The default again stores nothing.
    br.select("providers.claude-code.afk_options.ultracode", "")
        .await;
    br.submit("Save settings").await;
    br.wait_text("saved", |t| t.contains("Saved.")).await;
    let v = s.get("/api/v1/settings").await.ok();
    assert_eq!(v["providers"]["claude-code"]["afk_options"], json!({}));
    br.quit().await;
    s.stop().await;
}

async fn resolved(br: &Browser, what: &str) -> String {
    br.driver
        .find(By::Css(format!("dd[data-what='{what}']")))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn a_repo_inherits_then_overrides(b: Backend) {
    let (s, br) = setup(b, "repo_inherit_override").await;
    s.add_repo("web").await;
    s.patch("/api/v1/settings", json!({"providers": {"claude-code": {"afk_model_default": "haiku", "afk_options": {"ultracode": true}}}}))
        .await
        .ok();
    br.go("/repos/web").await;
    assert_eq!(
        resolved(&br, "afk-model").await,
        "haiku from the global AFK defaults"
    );
    assert_eq!(
        resolved(&br, "afk-ultracode").await,
        "true from the global AFK defaults"
    );
    let inherit = br
        .driver
        .find(By::Css("select[name='afk_model_default'] option[value='']"))
        .await
        .unwrap();
    assert_eq!(
        inherit.text().await.unwrap(),
        "same as default: haiku (the global AFK defaults)"
    );
    let inherit = br
        .driver
        .find(By::Css(
            "select[name='afk_options.ultracode'] option[value='']",
        ))
        .await
        .unwrap();
    assert_eq!(
        inherit.text().await.unwrap(),
        "same as default: on (the global AFK defaults)"
    );
    br.shot("inheriting").await;

    br.select("afk_model_default", "opus").await;
    br.select("afk_options.ultracode", "false").await;
    br.submit("Save repo").await;
    br.wait_text("saved", |t| t.contains("Saved.")).await;
    assert_eq!(
        resolved(&br, "afk-model").await,
        "opus from the repo's AFK defaults"
    );
    assert_eq!(
        resolved(&br, "afk-ultracode").await,
        "false from the repo's AFK defaults"
    );
    assert_eq!(
        resolved(&br, "manual-model").await,
        "sonnet from the provider's default"
    );
    br.shot("overriding").await;

    // Back to inherit.
    br.select("afk_model_default", "").await;
    br.select("afk_options.ultracode", "").await;
    br.submit("Save repo").await;
    br.wait_text("saved", |t| t.contains("Saved.")).await;
    assert_eq!(
        resolved(&br, "afk-model").await,
        "haiku from the global AFK defaults"
    );
    let v = s.get("/api/v1/repos/web").await.ok();
    assert!(v["afk_model_default"].is_null());
    assert_eq!(v["afk_options"], json!({}));
    br.quit().await;
    s.stop().await;
}

async fn an_invalid_value_is_shown_and_nothing_is_written(b: Backend) {
    let (s, br) = setup(b, "invalid_value").await;
    let before = s.get("/api/v1/settings").await.ok();
    br.go("/settings").await;
    br.select("providers.codex.model_default", "gpt-6-sol")
        .await;
    br.fill("afk.tick_seconds", "0").await;
    br.submit("Save settings").await;
    let text = br
        .wait_text("an error", |t| t.contains("Nothing was saved"))
        .await;
    assert!(
        text.contains("must be a whole number from 1 to 86400"),
        "{text}"
    );
    br.shot("error").await;
    // The error is next to its field, and what was typed is kept.
    let field = br.driver.find(By::Css(".field.invalid")).await.unwrap();
    let input = field.find(By::Name("afk.tick_seconds")).await.unwrap();
    assert_eq!(input.prop("value").await.unwrap().as_deref(), Some("0"));
    assert_eq!(
        br.selected("providers.codex.model_default").await,
        "gpt-6-sol"
    );
    assert_eq!(
        s.get("/api/v1/settings").await.ok(),
        before,
        "nothing written"
    );
    br.quit().await;
    s.stop().await;
}

async fn a_manual_run_streams_its_output_live(b: Backend) {
    let (s, br) = setup(b, "manual_run_live").await;
    s.add_repo("web").await;
    br.go("/runs/new").await;
    br.shot("form").await;
    // Pre-filled from the repo's manual resolution.
    let pre = br
        .driver
        .find(By::Css("select[name='model'] option[value='']"))
        .await
        .unwrap();
    assert_eq!(
        pre.text().await.unwrap(),
        "sonnet (from the provider's default)"
    );
    br.select("effort", "low").await;
    // A manual run's permission mode is a provider option like the others,
    // modes that ask a person included (issue 40 §9).
    br.select("options.permission_mode", "acceptEdits").await;
    br.fill("prompt", "FAKE_TICK_MS=150").await;
    br.submit("Start").await;
    // The form redirects to the new run's page.
    // The launch (worktree, sandbox, session) answers before the redirect.
    let id = wait::until("a redirect to the run's page", wait::secs(30), async || {
        let url = br.driver.current_url().await.unwrap();
        url.path().strip_prefix("/runs/")?.parse::<i64>().ok()
    })
    .await;
    let run = s.get(&format!("/api/v1/runs/{id}")).await.ok();
    assert_eq!(run["effort"]["value"], "low");
    assert_eq!(run["effort"]["source"], "request");
    assert_eq!(run["model"]["source"], "provider.default");
    assert_eq!(
        run["options"]["permission_mode"],
        json!({"value": "acceptEdits", "source": "request"}),
        "{run}"
    );
    // Lines appear while the page is open (the page was loaded before them):
    // the screen is redrawn with later ticks.
    let out = br.driver.find(By::Id("screen")).await.unwrap();
    let last_tick = |t: &str| {
        t.lines()
            .filter_map(|l| {
                l.strip_prefix("tick ")?
                    .split(' ')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .max()
            .unwrap_or(0)
    };
    let first = last_tick(&out.text().await.unwrap());
    wait::until(
        "five more ticks on the page",
        wait::secs(15).every_ms(100),
        async || {
            let seen = out.text().await.unwrap();
            if last_tick(&seen) >= first + 5 {
                Ok(())
            } else {
                Err(seen)
            }
        },
    )
    .await;
    assert_eq!(
        br.driver
            .find(By::Id("state"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "running"
    );
    br.shot("running").await;
    // Stop from the page (the confirmation accepted).
    br.driver
        .execute("window.confirm = () => true;", vec![])
        .await
        .unwrap();
    br.submit("Stop run").await;
    br.wait_text("stopped", |t| t.contains("stopped")).await;
    br.shot("stopped").await;
    assert_eq!(
        s.get(&format!("/api/v1/runs/{id}")).await.ok()["state"],
        "stopped"
    );
    br.quit().await;
    s.stop().await;
}

/// A page of another site that posts a form to lab: refused with 403, and
/// nothing is written.
async fn a_cross_site_post_is_refused(b: Backend) {
    let (s, br) = setup(b, "cross_site").await;
    let before = s.get("/api/v1/settings").await.ok();
    let evil = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let evil_url = format!("http://{}", evil.local_addr().unwrap());
    let page = format!(
        "<html><body><form id=f method=post action='{}/settings'>\
         <input name='afk.tick_seconds' value='5'><input name='csrf' value='guess'></form>\
         <script>document.getElementById('f').submit()</script></body></html>",
        s.url
    );
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || async move { axum::response::Html(page) }),
    );
    tokio::spawn(async move { axum::serve(evil, app).await.unwrap() });
    br.driver.goto(&evil_url).await.unwrap();
    let text = br
        .wait_text("a refusal", |t| {
            t.contains("another site") || t.contains("session")
        })
        .await;
    br.shot("refused").await;
    assert!(text.contains("Forbidden"), "{text}");
    assert_eq!(
        s.get("/api/v1/settings").await.ok(),
        before,
        "nothing written"
    );
    // And a same-site post with a wrong CSRF token is refused too.
    let r = s
        .send(
            reqwest::Client::new()
                .post(format!("{}/settings", s.url))
                .header(
                    "cookie",
                    br.driver
                        .get_named_cookie("lab_session")
                        .await
                        .map(|c| format!("lab_session={}", c.value))
                        .unwrap(),
                )
                .header("content-type", "application/x-www-form-urlencoded")
                .body("csrf=wrong&afk.tick_seconds=5"),
        )
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(s.get("/api/v1/settings").await.ok(), before);
    br.quit().await;
    s.stop().await;
}

/// The AFK page: an outcome in the ledger and the recent runs, and the
/// scheduler paused and resumed from the page.
async fn the_afk_page_pauses_and_keeps_the_ledger(b: Backend) {
    let (s, br) = setup(b, "afk_page").await;
    std::fs::write(s.tmp().join("afk.sh"), "echo 'stuck'\nexit 2\n").unwrap();
    s.add_repo("web").await;
    s.post(
        "/api/v1/repos/web/issues",
        json!({"title": "Dark mode", "labels": ["ready-for-agent"]}),
    )
    .await
    .expect(201);
    s.post("/api/v1/repos/web/afk/start", json!(null))
        .await
        .expect(201);
    br.go("/afk").await;
    let text = wait::until(
        "an outcome on the page",
        wait::secs(30).every_ms(300),
        async || {
            br.go("/afk").await;
            let t = br.text().await;
            if t.contains("failed") { Ok(t) } else { Err(t) }
        },
    )
    .await;
    assert!(text.contains("#1") && text.contains("web"), "{text}");
    br.shot("afk_outcome").await;

    br.submit("Pause the scheduler").await;
    br.wait_text("paused", |t| t.contains("The scheduler is paused"))
        .await;
    assert_eq!(s.get("/api/v1/afk/status").await.ok()["paused"], true);
    br.submit("Resume the scheduler").await;
    br.wait_text("running", |t| t.contains("The scheduler is running"))
        .await;
    assert_eq!(s.get("/api/v1/afk/status").await.ok()["paused"], false);
    br.quit().await;
    s.stop().await;
}

/// The settings page shows notification endpoints with their URLs redacted;
/// saving keeps a shown one as it is stored, and adds one typed in the
/// empty group.
async fn notification_endpoints_are_kept_and_added(b: Backend) {
    let (s, br) = setup(b, "notification_endpoints").await;
    let secret = "https://hooks.slack.com/services/T1/B2/bRoWsErSeCrEt";
    s.patch(
        "/api/v1/settings",
        json!({"notifications": [{"kind": "slack", "url": secret, "events": ["waiting"]}]}),
    )
    .await
    .ok();
    br.go("/settings").await;
    let url = br
        .driver
        .find(By::Name("notifications.0.url"))
        .await
        .unwrap();
    assert_eq!(
        url.value().await.unwrap().as_deref(),
        Some("https://hooks.slack.com/…CrEt")
    );
    assert!(!br.driver.source().await.unwrap().contains("SeCrEt"));
    br.driver
        .find(By::Name("notifications.0.events.failed"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    br.select("notifications.1.kind", "ntfy").await;
    br.fill("notifications.1.url", "https://ntfy.example.com/new-topic")
        .await;
    url.scroll_into_view().await.unwrap();
    br.shot("notifications").await;
    br.submit("Save settings").await;
    br.wait_text("saved", |t| t.contains("Saved.")).await;
    let v = s.get("/api/v1/settings").await.ok();
    let n = &v["notifications"];
    assert_eq!(n.as_array().unwrap().len(), 2, "{n}");
    assert_eq!(n[0]["url"], "https://hooks.slack.com/…CrEt");
    assert_eq!(n[0]["events"], json!(["waiting", "failed"]));
    assert_eq!(n[1]["kind"], "ntfy");
    assert_eq!(
        n[1]["events"],
        json!(["waiting", "ended", "failed", "pr_opened"])
    );
    br.quit().await;
    s.stop().await;
}

on_both!(
    notification_endpoints_are_kept_and_added,
    the_afk_page_pauses_and_keeps_the_ledger,
    every_page_renders,
    global_afk_settings_reach_the_api,
    a_repo_inherits_then_overrides,
    an_invalid_value_is_shown_and_nothing_is_written,
    a_manual_run_streams_its_output_live,
    a_cross_site_post_is_refused,
);
