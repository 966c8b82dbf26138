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

/// A person edits the registered repo's checked-out main; the merge button
/// is refused with the reason, and refs, work tree and the pull request are
/// as they were. The edit stays (the caller undoes it).
async fn refused_for_local_changes(br: &Browser, repo: &Path) {
    std::fs::write(repo.join("README.md"), "a person is editing\n").unwrap();
    let refs = || git(repo, &["for-each-ref", "--format=%(refname) %(objectname)"]);
    let before = refs();
    press(br, "merge").await;
    let refused = wait::until("the refusal", wait::secs(10), async || {
        let el = br.driver.find(By::Id("refused")).await.ok()?;
        el.text().await.ok()
    })
    .await;
    assert!(refused.contains("local changes"), "{refused}");
    assert_eq!(refs(), before);
    assert_eq!(
        std::fs::read_to_string(repo.join("README.md")).unwrap(),
        "a person is editing\n"
    );
    let state = br.driver.find(By::Id("pull-state")).await.unwrap();
    assert_eq!(state.text().await.unwrap(), "open");
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
    refused_for_local_changes(&br, &repo).await;
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

/// Issue 15's walk, all in the browser but the agent: an issue opened from
/// the form and marked ready; the AFK run (fake agent) commits; the issue
/// page shows the run; the pull request page shows the diff; a merge that
/// cannot be done safely (a person's local change on the checked-out main)
/// is refused with its reason and changes nothing; then the merge goes
/// through: the registered repo's main has the commit, the branch is gone.
async fn an_afk_runs_pull_request_is_merged_from_its_page(b: Backend) {
    let folder = match b {
        Backend::Sqlite => "pulls_afk/sqlite",
        Backend::Postgres(_) => "pulls_afk/postgres",
    };
    let s = TestServer::start(b).await;
    crate::afk::behave(&s, FIXES);
    let repo = crate::afk::afk_repo(&s, "r").await;
    let repo = std::path::PathBuf::from(repo["path"].as_str().unwrap());
    let br = Browser::start(&s.url, folder).await;
    br.login(&s.token).await;

    // The issue, from the browser: opened, then given to the agent.
    br.go("/repos/r/issues/new").await;
    br.fill("title", "Fix it").await;
    br.fill("body", "The README needs a FIX.md beside it.")
        .await;
    br.submit("Open issue").await;
    br.wait_text("the new issue's page", |t| t.contains("Fix it"))
        .await;
    let url = br.driver.current_url().await.unwrap();
    let n: i64 = url.path().rsplit('/').next().unwrap().parse().unwrap();
    br.submit("Ready for agent").await;
    br.wait_text("the ready label on", |t| t.contains("Not ready for agent"))
        .await;
    br.shot("walk_1_issue_ready").await;

    let c = crate::afk::outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    let run = s.get(&format!("/api/v1/runs/{}", c["run_id"])).await.ok();
    let branch = run["branch"].as_str().unwrap().to_owned();
    let head = git(&repo, &["rev-parse", &branch]);

    // The issue page shows the run and its outcome.
    // (Loaded again until it does: the outcome above is read from the API,
    // and the page is a fresh request that may land a moment before the
    // claim's told state it shows.)
    let want = format!("run {}", c["run_id"]);
    wait::until("the issue page's runs", wait::secs(10), async || {
        br.go(&format!("/repos/r/issues/{n}")).await;
        let text = match br.driver.find(By::Id("issue-runs")).await {
            Ok(runs) => runs.text().await.unwrap_or_default(),
            Err(_) => br.text().await,
        };
        (text.contains(&want) && text.contains("pr-green"))
            .then_some(())
            .ok_or(text)
    })
    .await;
    br.shot("walk_2_issue_with_run").await;

    // The pull request page shows the diff and links the issue.
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
    let checks = br.driver.find(By::Id("checks")).await.unwrap();
    assert_eq!(checks.text().await.unwrap(), "none after 1 round(s)");
    br.shot("walk_3_pull").await;

    // Not safe: a person's change on the checked-out main.
    refused_for_local_changes(&br, &repo).await;
    br.shot("walk_4_merge_refused").await;

    // The person is done: the merge goes through.
    git(&repo, &["checkout", "--", "README.md"]);
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
    // On a phone.
    br.driver.set_window_rect(0, 0, 390, 844).await.unwrap();
    br.go("/repos/r/pulls/1").await;
    fits(&br, 390).await;
    br.shot("walk_5_merged_phone").await;
    br.quit().await;
    s.stop().await;
}

on_both!(an_afk_runs_pull_request_is_merged_from_its_page);
