//! A run page in real headless Chromium: the screen a TUI drew, in its
//! colours, on a desktop and a phone, and the reply box.

use thirtyfour::prelude::*;

use crate::on_both;
use crate::screen::{DRAW, READER, scripted};
use crate::support::browser::Browser;
use crate::support::{Backend, TestServer, id, wait};

async fn the_run_page_shows_the_screen_and_takes_replies(b: Backend) {
    let folder = match b {
        Backend::Sqlite => "run_screen/sqlite",
        Backend::Postgres(_) => "run_screen/postgres",
    };
    let s = TestServer::start(b).await;
    let br = Browser::start(&s.url, folder).await;
    br.login(&s.token).await;
    s.add_repo("r").await;
    let run = scripted(&s, "tui", &format!("{DRAW}\n{READER}")).await;
    let rid = id(&run);
    s.record(rid, "drawn").await;
    br.go(&format!("/runs/{rid}")).await;
    let screen = br.driver.find(By::Id("screen")).await.unwrap();
    let text = wait::until("the drawing on the page", wait::secs(10), async || {
        let t = screen.text().await.unwrap();
        if t.contains("Do you want to proceed?") {
            Ok(t)
        } else {
            Err(t)
        }
    })
    .await;
    assert!(text.contains("hello,   world"), "{text}");
    assert!(!text.contains("old line"), "{text}");
    // In its colours: the bold green spinner line.
    // (The screen is redrawn as the page watches: an element found may be
    // replaced before it is read, so find and read again until both work.)
    let green = wait::until("the green line", wait::secs(10), async || {
        let el = br.driver.find(By::Css("#screen span.f2.bo")).await.ok()?;
        el.text().await.ok()
    })
    .await;
    assert_eq!(green, "✻ Thinking… (esc to interrupt)");
    br.shot("tui").await;

    // The agent's state follows its hooks while the page is open.
    s.post(
        &format!("/api/v1/runs/{rid}/hook"),
        serde_json::json!({"payload": {"hook_event_name": "Notification",
            "message": "Claude needs your permission to use Bash",
            "notification_type": "permission_prompt"}}),
    )
    .await
    .ok();
    let api = s.get(&format!("/api/v1/runs/{rid}")).await.ok();
    assert_eq!(api["agent_state"]["state"], "waiting", "{api}");
    wait::until("the question on the page", wait::secs(10), async || {
        let el = br.driver.find(By::Id("agent")).await.ok()?;
        let t = el.text().await.ok()?;
        (t.contains("waiting") && t.contains("permission to use Bash")).then_some(())
    })
    .await;

    // A reply typed in the box, sent with its button, reaches the agent,
    // and the box empties.
    br.fill("text", "yes; go on").await;
    br.submit("Send ⏎").await;
    wait::until("the reply at the agent", wait::secs(10), async || {
        let got = String::from_utf8(s.record(rid, "typed").await).unwrap();
        (got == "yes; go on\n").then_some(()).ok_or(got)
    })
    .await;
    let bx = br.driver.find(By::Name("text")).await.unwrap();
    wait::until("the box emptied", wait::secs(5), async || {
        bx.value().await.unwrap().filter(|v| v.is_empty())
    })
    .await;
    // And the screen shows it, live (the terminal echoes it).
    wait::until("the echo on the page", wait::secs(10), async || {
        let t = screen.text().await.unwrap();
        t.contains("yes; go on").then_some(()).ok_or(t)
    })
    .await;
    // A menu answer: "2", then Enter, from the buttons.
    br.submit("2").await;
    br.submit("Send ⏎").await;
    wait::until("the menu answer at the agent", wait::secs(10), async || {
        let got = String::from_utf8(s.record(rid, "typed").await).unwrap();
        got.ends_with("go on\n2\n").then_some(()).ok_or(got)
    })
    .await;

    // A phone's width: the reply box and its buttons fit.
    br.driver.set_window_rect(0, 0, 390, 844).await.unwrap();
    br.go(&format!("/runs/{rid}")).await;
    let send = br
        .driver
        .find(By::XPath("//button[normalize-space(.)='Send ⏎']"))
        .await
        .unwrap();
    let rect = send.rect().await.unwrap();
    assert!(rect.x >= 0.0 && rect.x + rect.width <= 390.0, "{rect:?}");
    assert!(rect.height >= 40.0, "a button a thumb can press: {rect:?}");
    br.shot("tui_phone").await;
    br.quit().await;
    s.stop().await;
}

on_both!(the_run_page_shows_the_screen_and_takes_replies);
