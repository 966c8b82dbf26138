//! The issue pages in real headless Chromium: open an issue from the form,
//! give it to the agent (the label checked through the API), read it, close
//! and reopen it; on a desktop and on a 390 px phone, with screenshots.

use thirtyfour::prelude::*;

use crate::afk::{afk_repo, behave, outcome};
use crate::on_both;
use crate::support::browser::Browser;
use crate::support::{Backend, TestServer};

/// Whether the page scrolls sideways (something wider than the window).
async fn overflows(br: &Browser) -> bool {
    let v = br
        .driver
        .execute(
            "return document.documentElement.scrollWidth > window.innerWidth;",
            vec![],
        )
        .await
        .unwrap();
    v.json().as_bool().unwrap()
}

async fn an_issue_from_the_browser(b: Backend) {
    let folder = match b {
        Backend::Sqlite => "issue_pages/sqlite",
        Backend::Postgres(_) => "issue_pages/postgres",
    };
    let s = TestServer::start(b).await;
    s.add_repo("web").await;
    let br = Browser::start(&s.url, folder).await;
    br.login(&s.token).await;

    for (width, tag) in [(1280, "desktop"), (390, "phone")] {
        br.driver.set_window_rect(0, 0, width, 900).await.unwrap();
        // The nav's Issues entry, then the repo's list and its form.
        br.go("/runs").await;
        br.driver
            .find(By::LinkText("Issues"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        br.wait_path("/issues").await;
        br.go("/repos/web/issues").await;
        br.driver
            .find(By::LinkText("New issue"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        br.wait_path("/repos/web/issues/new").await;
        // A blank title is refused beside its field, keeping the rest.
        br.fill("body", "Steps: open the page.").await;
        br.fill("labels", "bug").await;
        br.submit("Open issue").await;
        let text = br
            .wait_text("the title's error", |t| t.contains("Nothing was saved"))
            .await;
        assert!(
            text.contains("must be one line of 1 to 256 characters"),
            "{text}"
        );
        let body = br.driver.find(By::Name("body")).await.unwrap();
        assert_eq!(
            body.value().await.unwrap().unwrap(),
            "Steps: open the page."
        );
        br.shot(&format!("issue_new_error_{tag}")).await;
        let title = format!("The login page is slow on a {tag}");
        br.fill("title", &title).await;
        br.submit("Open issue").await;
        let text = br
            .wait_text("the new issue's page", |t| t.contains(&title))
            .await;
        assert!(text.contains("Steps: open the page."), "{text}");
        let url = br.driver.current_url().await.unwrap();
        let number: i64 = url.path().rsplit('/').next().unwrap().parse().unwrap();
        let api = format!("/api/v1/repos/web/issues/{number}");

        // Ready for the agent: the repo's ready label, as the API sees it.
        br.submit("Ready for agent").await;
        br.wait_text("the ready label on the page", |t| {
            t.contains("Not ready for agent")
        })
        .await;
        let i = s.get(&api).await.ok();
        assert_eq!(
            i["labels"],
            serde_json::json!(["bug", "ready-for-agent"]),
            "{i}"
        );
        assert!(!overflows(&br).await, "the issue page fits {width} px");
        let start = br
            .driver
            .find(By::LinkText("Start a run from this issue"))
            .await
            .unwrap();
        let rect = start.rect().await.unwrap();
        assert!(
            rect.x >= 0.0 && rect.x + rect.width <= f64::from(width),
            "{rect:?}"
        );
        br.shot(&format!("issue_{tag}")).await;

        // Close, then reopen.
        br.submit("Close issue").await;
        br.wait_text("the closed issue", |t| t.contains("Reopen issue"))
            .await;
        assert_eq!(s.get(&api).await.ok()["state"], "closed");
        br.shot(&format!("issue_closed_{tag}")).await;
        br.submit("Reopen issue").await;
        br.wait_text("the reopened issue", |t| t.contains("Close issue"))
            .await;
        assert_eq!(s.get(&api).await.ok()["state"], "open");

        // The list, filtered by label, shows it.
        br.go("/repos/web/issues?state=all&label=ready-for-agent")
            .await;
        let text = br.text().await;
        assert!(text.contains(&title), "{text}");
        assert!(!overflows(&br).await, "the list fits {width} px");
        br.shot(&format!("issues_{tag}")).await;
    }
    br.quit().await;
    s.stop().await;
}

/// Marked ready in the browser, an issue of an AFK repo is taken by the
/// scheduler, and its page shows the run (and its outcome once it ends).
async fn the_scheduler_takes_an_issue_marked_ready(b: Backend) {
    let folder = match b {
        Backend::Sqlite => "issue_afk/sqlite",
        Backend::Postgres(_) => "issue_afk/postgres",
    };
    let s = TestServer::start(b).await;
    behave(&s, "echo looked; exit 0");
    afk_repo(&s, "web").await;
    let n = s
        .post(
            "/api/v1/repos/web/issues",
            serde_json::json!({"title": "Tidy the README"}),
        )
        .await
        .expect(201)["number"]
        .as_i64()
        .unwrap();
    let br = Browser::start(&s.url, folder).await;
    br.login(&s.token).await;
    br.go(&format!("/repos/web/issues/{n}")).await;
    br.submit("Ready for agent").await;
    br.wait_text("the ready label on", |t| t.contains("Not ready for agent"))
        .await;
    outcome(&s, "web", n, 30).await;
    br.go(&format!("/repos/web/issues/{n}")).await;
    let runs = br.driver.find(By::Id("issue-runs")).await.unwrap();
    let text = runs.text().await.unwrap();
    assert!(text.contains("run 1"), "{text}");
    runs.find(By::LinkText("run 1"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    br.wait_path("/runs/1").await;
    br.go(&format!("/repos/web/issues/{n}")).await;
    br.shot("issue_with_run").await;
    br.driver.set_window_rect(0, 0, 390, 844).await.unwrap();
    br.go(&format!("/repos/web/issues/{n}")).await;
    assert!(
        !overflows(&br).await,
        "the page fits a phone (its table scrolls)"
    );
    br.shot("issue_with_run_phone").await;
    br.quit().await;
    s.stop().await;
}

on_both!(
    an_issue_from_the_browser,
    the_scheduler_takes_an_issue_marked_ready
);
