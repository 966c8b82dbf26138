//! Every page at a phone's width (390 px) in real headless Chromium: the
//! page itself never scrolls sideways (a terminal or a diff may scroll
//! inside its own box), with a screenshot of each kept under
//! `target/browser-screenshots/phone/<backend>/`. And at 1280 px the run
//! page fits the CLI's full 200 columns in view, or shows them at their
//! size when the viewer asks.

use thirtyfour::prelude::*;

use crate::on_both;
use crate::pulls_merge::pull_with;
use crate::screen::scripted;
use crate::support::browser::Browser;
use crate::support::{Backend, TestServer, id, wait};

/// How wide the page is against the window (both in CSS pixels).
async fn widths(br: &Browser) -> (f64, f64) {
    let v = br
        .driver
        .execute(
            "return [document.documentElement.scrollWidth, window.innerWidth];",
            vec![],
        )
        .await
        .unwrap();
    let a = v.json().as_array().unwrap().clone();
    (a[0].as_f64().unwrap(), a[1].as_f64().unwrap())
}

/// A line as wide as the pane, ending in a mark to look for.
const WIDE: &str = r#"printf '%0199dZ\n' 0"#;

async fn every_page_fits_a_phone(b: Backend) {
    let folder = match b {
        Backend::Sqlite => "phone/sqlite",
        Backend::Postgres(_) => "phone/postgres",
    };
    let s = TestServer::start(b).await;
    let br = Browser::start(&s.url, folder).await;
    br.driver.set_window_rect(0, 0, 390, 844).await.unwrap();
    br.go("/login").await;
    let (w, inner) = widths(&br).await;
    assert!(w <= inner, "the login page is {w} px wide at {inner}");
    br.shot("login").await;
    // It names this server's token file, not a default one.
    let token_file = s.data_dir().join("token").display().to_string();
    assert!(br.text().await.contains(&token_file), "{}", br.text().await);
    br.login(&s.token).await;

    // A repo with a pull request, an issue, a live run whose CLI drew a
    // line the pane's full width, and an ended one.
    let (done, _, _) = pull_with(&s, &[("new.txt", "new\n")]).await;
    s.post(
        &format!("/api/v1/runs/{}/stop", id(&done)),
        serde_json::Value::Null,
    )
    .await
    .ok();
    let issue = s
        .post(
            "/api/v1/repos/r/issues",
            serde_json::json!({"title": "A long title that a phone has to wrap somewhere sensible", "labels": ["bug"]}),
        )
        .await
        .ok();
    let live = scripted(&s, "wide", WIDE).await;
    let rid = id(&live);
    let n = issue["number"].as_i64().unwrap();
    let pages = [
        ("runs", "/runs".to_owned()),
        ("run_new", "/runs/new".to_owned()),
        ("run", format!("/runs/{rid}")),
        ("run_ended", format!("/runs/{}", id(&done))),
        ("changes", format!("/runs/{}/changes", id(&done))),
        ("repos", "/repos".to_owned()),
        ("repo", "/repos/r".to_owned()),
        ("settings", "/settings".to_owned()),
        ("afk", "/afk".to_owned()),
        ("issues", "/issues".to_owned()),
        ("repo_issues", "/repos/r/issues".to_owned()),
        ("issue_new", "/repos/r/issues/new".to_owned()),
        ("issue", format!("/repos/r/issues/{n}")),
        ("pulls", "/repos/r/pulls".to_owned()),
        ("pull", "/repos/r/pulls/1".to_owned()),
        ("not_found", "/runs/99999".to_owned()),
    ];
    let mut wide = Vec::new();
    for (name, path) in &pages {
        br.go(path).await;
        if *name == "run" {
            // The drawn line is there before the page is measured.
            wait::until("the wide line", wait::secs(10), async || {
                let t = br
                    .driver
                    .find(By::Id("screen"))
                    .await
                    .ok()?
                    .text()
                    .await
                    .ok()?;
                t.contains('Z').then_some(())
            })
            .await;
        }
        let (w, inner) = widths(&br).await;
        if w > inner {
            wide.push(format!("{path}: {w} px at {inner}"));
        }
        br.shot(name).await;
    }
    assert!(
        wide.is_empty(),
        "pages wider than a phone:\n{}",
        wide.join("\n")
    );
    // The phone scrolls the terminal inside its box (no fit by default),
    // and the reply buttons stay on the screen.
    br.go(&format!("/runs/{rid}")).await;
    let send = br
        .driver
        .find(By::XPath("//button[normalize-space(.)='Send ⏎']"))
        .await
        .unwrap();
    let rect = send.rect().await.unwrap();
    assert!(rect.x >= 0.0 && rect.x + rect.width <= 390.0, "{rect:?}");

    // At 1280 px the CLI's 200 columns fit the box, the mark in view; the
    // viewer's "Actual size" brings the scroll back, remembered.
    br.driver.set_window_rect(0, 0, 1280, 900).await.unwrap();
    br.go(&format!("/runs/{rid}")).await;
    let fits = async || -> (bool, String) {
        let v = br
            .driver
            .execute(
                "const t = document.getElementById('term'); \
                 return [t.scrollWidth <= t.clientWidth + 1, getComputedStyle(t).fontSize];",
                vec![],
            )
            .await
            .unwrap();
        let a = v.json().as_array().unwrap().clone();
        (a[0].as_bool().unwrap(), a[1].as_str().unwrap().to_owned())
    };
    let (fit, size) = fits().await;
    assert!(fit, "the screen scrolls sideways at 1280 px (font {size})");
    let px: f64 = size.trim_end_matches("px").parse().unwrap();
    assert!(px >= 8.0, "fitted, yet readable: {size}");
    let (w, inner) = widths(&br).await;
    assert!(w <= inner, "the run page is {w} px wide at {inner}");
    br.shot("run_desktop_fit").await;
    br.driver
        .find(By::Id("fit"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let (fit, _) = fits().await;
    assert!(!fit, "actual size scrolls inside the box");
    br.go(&format!("/runs/{rid}")).await;
    let (fit, _) = fits().await;
    assert!(!fit, "the choice is remembered");
    br.shot("run_desktop_actual").await;
    br.quit().await;
    s.stop().await;
}

on_both!(every_page_fits_a_phone);
