//! A run's Changes tab and a pull request's page in real headless Chromium:
//! the diff, live while the agent works; a merge refused with its reason
//! (nothing changed), then made from the page; on a desktop and a phone.

use std::path::Path;

use thirtyfour::prelude::*;

use crate::diffs::git;
use crate::on_both;
use crate::pulls_merge::pull_with;
use crate::support::browser::Browser;
use crate::support::{Backend, TestServer, id, wait};

/// The page is no wider than the window (nothing scrolls sideways but a
/// file's own lines).
async fn fits(br: &Browser, width: i64) {
    let w = br
        .driver
        .execute("return document.documentElement.scrollWidth;", vec![])
        .await
        .unwrap()
        .json()
        .as_i64()
        .unwrap();
    assert!(w <= width, "the page is {w} px wide");
}

async fn press(br: &Browser, id: &str) {
    br.driver
        .find(By::Id(id))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The form asks first (data-confirm).
    wait::until("the confirmation", wait::secs(5), async || {
        br.driver.accept_alert().await.ok()
    })
    .await;
}

async fn changes_and_pull_pages(b: Backend) {
    let folder = match b {
        Backend::Sqlite => "pulls/sqlite",
        Backend::Postgres(_) => "pulls/postgres",
    };
    let s = TestServer::start(b).await;
    let br = Browser::start(&s.url, folder).await;
    br.login(&s.token).await;
    let (run, repo, head) =
        pull_with(&s, &[("new.txt", "new\n"), ("src.rs", "fn main() {}\n")]).await;
    let rid = id(&run);
    let ws = Path::new(run["workspace"].as_str().unwrap()).to_path_buf();

    // The Changes tab, linked from the run page.
    br.go(&format!("/runs/{rid}")).await;
    br.driver
        .find(By::LinkText("Changes"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    br.wait_path(&format!("/runs/{rid}/changes")).await;
    let text = br.wait_text("the diff", |t| t.contains("new.txt")).await;
    assert!(text.contains("2 files changed"), "{text}");
    let added = br
        .driver
        .find(By::Css("#changes .dl.add .cd"))
        .await
        .unwrap();
    assert!(added.text().await.unwrap().starts_with('+'));
    br.shot("changes").await;
    // Live: a file the agent writes now shows up without a reload.
    std::fs::write(ws.join("later.txt"), "later\n").unwrap();
    br.wait_text("the new file, live", |t| t.contains("later.txt"))
        .await;
    br.driver.set_window_rect(0, 0, 390, 844).await.unwrap();
    br.go(&format!("/runs/{rid}/changes")).await;
    fits(&br, 390).await;
    br.shot("changes_phone").await;
    br.driver.set_window_rect(0, 0, 1280, 900).await.unwrap();

    // The pull request page shows its diff and its run.
    br.go("/repos/r/pulls").await;
    br.driver
        .find(By::PartialLinkText("#1 Work"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    br.wait_path("/repos/r/pulls/1").await;
    let text = br.text().await;
    assert!(
        text.contains("new.txt") && text.contains("src.rs"),
        "{text}"
    );
    assert!(text.contains(&format!("run {rid}")), "{text}");

    // A person is editing the checked-out main: the merge is refused with
    // the reason, and nothing changes.
    std::fs::write(repo.join("README.md"), "a person is editing\n").unwrap();
    let refs = git(
        &repo,
        &["for-each-ref", "--format=%(refname) %(objectname)"],
    );
    press(&br, "merge").await;
    let refused = wait::until("the refusal", wait::secs(10), async || {
        let el = br.driver.find(By::Id("refused")).await.ok()?;
        el.text().await.ok()
    })
    .await;
    assert!(refused.contains("local changes"), "{refused}");
    assert_eq!(
        git(
            &repo,
            &["for-each-ref", "--format=%(refname) %(objectname)"]
        ),
        refs
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("README.md")).unwrap(),
        "a person is editing\n"
    );
    let state = br.driver.find(By::Id("pull-state")).await.unwrap();
    assert_eq!(state.text().await.unwrap(), "open");
    br.shot("merge_refused").await;

    // Once the person is done, the merge from the page goes through.
    std::fs::write(repo.join("README.md"), "# r\n").unwrap();
    press(&br, "merge").await;
    wait::until("the merged state", wait::secs(10), async || {
        let el = br.driver.find(By::Id("pull-state")).await.ok()?;
        (el.text().await.ok()? == "merged").then_some(())
    })
    .await;
    let sha = br.driver.find(By::Id("merged-sha")).await.unwrap();
    assert_eq!(sha.text().await.unwrap(), head);
    assert_eq!(git(&repo, &["rev-parse", "main"]), head);
    assert!(
        git(
            &repo,
            &["branch", "--list", run["branch"].as_str().unwrap()]
        )
        .is_empty()
    );
    assert!(br.text().await.contains("new.txt"), "the merged diff stays");
    br.shot("merged").await;
    br.driver.set_window_rect(0, 0, 390, 844).await.unwrap();
    br.go("/repos/r/pulls/1").await;
    fits(&br, 390).await;
    br.shot("merged_phone").await;
    br.quit().await;
    s.stop().await;
}

on_both!(changes_and_pull_pages);

/// The fake agent of an AFK run: commits a fix and opens its pull request.
const FIXES: &str = r#"
echo "fixed" > FIX.md
git add FIX.md
git -c user.name=agent -c user.email=agent@example.com commit -qm "Fix issue $LAB_ISSUE" || exit 8
labctl pr create --title "Fix issue $LAB_ISSUE" --body "Resolves #$LAB_ISSUE" || exit 7
"#;

/// An AFK run's pull request, read and merged from its page: the registered
/// repo's main gets the agent's commit and the branch is gone.
async fn an_afk_runs_pull_request_is_merged_from_its_page(b: Backend) {
    let folder = match b {
        Backend::Sqlite => "pulls_afk/sqlite",
        Backend::Postgres(_) => "pulls_afk/postgres",
    };
    let s = TestServer::start(b).await;
    crate::afk::behave(&s, FIXES);
    let repo = crate::afk::afk_repo(&s, "r").await;
    let repo = std::path::PathBuf::from(repo["path"].as_str().unwrap());
    let n = crate::afk::issue(&s, "r", "Fix it").await;
    let c = crate::afk::outcome(&s, "r", n, 30).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    let run = s.get(&format!("/api/v1/runs/{}", c["run_id"])).await.ok();
    let branch = run["branch"].as_str().unwrap().to_owned();
    let head = git(&repo, &["rev-parse", &branch]);

    let br = Browser::start(&s.url, folder).await;
    br.login(&s.token).await;
    br.go("/repos/r/pulls/1").await;
    let text = br.text().await;
    assert!(
        text.contains("Fix issue") && text.contains("FIX.md"),
        "{text}"
    );
    assert!(
        text.contains(&format!("#{n}")),
        "the issue is linked: {text}"
    );
    press(&br, "merge").await;
    wait::until("the merged state", wait::secs(10), async || {
        let el = br.driver.find(By::Id("pull-state")).await.ok()?;
        (el.text().await.ok()? == "merged").then_some(())
    })
    .await;
    br.shot("afk_merged").await;
    assert_eq!(git(&repo, &["rev-parse", "main"]), head);
    assert_eq!(
        std::fs::read_to_string(repo.join("FIX.md")).unwrap(),
        "fixed\n"
    );
    assert!(git(&repo, &["branch", "--list", &branch]).is_empty());
    br.quit().await;
    s.stop().await;
}

on_both!(an_afk_runs_pull_request_is_merged_from_its_page);
