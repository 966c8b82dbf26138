//! The issue pages over HTTP, as a browser without JavaScript uses them: the
//! lists and their filters, the new-issue form (a refused form writes
//! nothing and keeps what was typed), close and reopen, the ready label on
//! and off, the start link, and the AFK runs an issue page lists; a
//! forge-backed repo's pages. (The API routes the pages added, and labctl's,
//! are in `issue_api.rs`.)

use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION};
use serde_json::{Value, json};

use crate::afk::{afk_repo, behave, outcome};
use crate::on_both;
use crate::pages_input::{client, session, visit};
use crate::support::forge::{FakeForge, Flavor};
use crate::support::{Backend, TestServer, git, wait};

/// The CSRF token of a page's forms.
pub(crate) fn csrf_of(page: &str) -> String {
    page.split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page has a form with a CSRF token")
        .to_owned()
}

/// Posts a urlencoded form as a logged-in browser of this site.
pub(crate) async fn post_form(
    s: &TestServer,
    cookie: &str,
    path: &str,
    body: &str,
) -> reqwest::Response {
    client()
        .post(format!("{}{path}", s.url))
        .header(COOKIE, cookie)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body.to_owned())
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

/// Posts the new-issue form of `repo`; where it sends the browser.
async fn open_from_form(s: &TestServer, cookie: &str, repo: &str, body: &str) -> String {
    let r = post_form(s, cookie, &format!("/repos/{repo}/issues"), body).await;
    assert_eq!(r.status(), 303, "{}", r.text().await.unwrap());
    location(&r)
}

/// Text as the pages escape it.
fn escaped(t: &str) -> String {
    t.replace('&', "&#38;")
        .replace('<', "&#60;")
        .replace('>', "&#62;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

/// Presses an issue page's button: its form, with the page's CSRF token.
async fn press(s: &TestServer, cookie: &str, path: &str, csrf: &str) -> reqwest::Response {
    post_form(s, cookie, path, &format!("csrf={csrf}")).await
}

async fn page(s: &TestServer, cookie: &str, path: &str) -> (u16, String) {
    let r = visit(s, cookie, Method::GET, path).await;
    let status = r.status().as_u16();
    (status, r.text().await.unwrap())
}

fn location(r: &reqwest::Response) -> String {
    r.headers()
        .get(LOCATION)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

pub(crate) async fn new_issue(s: &TestServer, repo: &str, title: &str, labels: &[&str]) -> i64 {
    s.post(
        &format!("/api/v1/repos/{repo}/issues"),
        json!({"title": title, "body": "the body", "labels": labels}),
    )
    .await
    .expect(201)["number"]
        .as_i64()
        .unwrap()
}

async fn issues_of(s: &TestServer, repo: &str) -> Value {
    s.get(&format!("/api/v1/repos/{repo}/issues?state=open"))
        .await
        .ok()
}

async fn lists_filter_and_create(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    s.add_repo("other").await;
    let cookie = session(&s).await;

    // The new-issue form; a refused post writes nothing and keeps the text.
    let (st, form) = page(&s, &cookie, "/repos/r/issues/new").await;
    assert_eq!(st, 200);
    let csrf = csrf_of(&form);
    let long = "x".repeat(101);
    let r = post_form(
        &s,
        &cookie,
        "/repos/r/issues",
        &format!("csrf={csrf}&title=+&body=kept+text&labels=bug%2C+{long}"),
    )
    .await;
    assert_eq!(r.status(), 400);
    let html = r.text().await.unwrap();
    assert!(html.contains("Nothing was saved"), "{html}");
    assert!(
        html.contains("must be one line of 1 to 256 characters"),
        "{html}"
    );
    assert!(html.contains("without commas"), "the label's error: {html}");
    assert!(
        html.contains(">kept text</textarea>"),
        "the body stays: {html}"
    );
    assert!(html.contains(&format!("value=\"bug, {long}\"")), "{html}");
    assert_eq!(issues_of(&s, "r").await, json!([]), "nothing written");
    // Without the CSRF token: refused, nothing written.
    let r = post_form(&s, &cookie, "/repos/r/issues", "title=sneaky").await;
    assert_eq!(r.status(), 403);
    assert_eq!(issues_of(&s, "r").await, json!([]));
    // A good one goes to its page.
    let at = open_from_form(
        &s,
        &cookie,
        "r",
        &format!("csrf={csrf}&title=Fix+the+login&body=line+1%0D%0Aline+2&labels=bug%2C+ui"),
    )
    .await;
    assert_eq!(at, "/repos/r/issues/1");
    let i = s.get("/api/v1/repos/r/issues/1").await.ok();
    assert_eq!(i["title"], "Fix the login");
    assert_eq!(i["body"], "line 1\nline 2", "CRLF from the browser is LF");
    assert_eq!(i["labels"], json!(["bug", "ui"]));

    new_issue(&s, "r", "Closed one", &["bug"]).await;
    s.post("/api/v1/repos/r/issues/2/close", json!(null))
        .await
        .ok();
    new_issue(&s, "r", "Docs", &["docs"]).await;
    new_issue(&s, "other", "Elsewhere", &[]).await;

    let (st, open) = page(&s, &cookie, "/repos/r/issues").await;
    assert_eq!(st, 200);
    assert!(
        open.contains("Fix the login") && open.contains("Docs"),
        "{open}"
    );
    assert!(
        !open.contains("Closed one") && !open.contains("Elsewhere"),
        "{open}"
    );
    assert!(open.contains("href=\"/issues\""), "the nav has Issues");
    assert!(open.contains("href=\"/repos/r/issues/new\""));
    let (_, closed) = page(&s, &cookie, "/repos/r/issues?state=closed").await;
    assert!(closed.contains("Closed one") && !closed.contains("Fix the login"));
    let (_, all) = page(&s, &cookie, "/repos/r/issues?state=all&label=bug").await;
    assert!(all.contains("Closed one") && all.contains("Fix the login"));
    assert!(!all.contains("Docs"), "{all}");
    // Bad filters: a page that says what is allowed, not a 5xx.
    let (st, bad) = page(&s, &cookie, "/repos/r/issues?state=shut").await;
    assert_eq!(st, 400);
    assert!(bad.contains("must be open, closed or all"), "{bad}");
    let (st, bad) = page(&s, &cookie, "/issues?label=a%2Cb").await;
    assert_eq!(st, 400);
    assert!(bad.contains("without commas"), "{bad}");
    let (st, _) = page(&s, &cookie, "/repos/nosuch/issues").await;
    assert_eq!(st, 404);

    // Across repos: every repo's open issues, each with its repo.
    let (st, every) = page(&s, &cookie, "/issues").await;
    assert_eq!(st, 200);
    assert!(every.contains("Elsewhere") && every.contains("Fix the login"));
    assert!(every.contains("href=\"/repos/other/issues/1\""), "{every}");
    assert!(!every.contains("Closed one"));
    // The repo page links to its issues.
    let (_, repo) = page(&s, &cookie, "/repos/r").await;
    assert!(repo.contains("href=\"/repos/r/issues\""), "{repo}");
    s.stop().await;
}

async fn close_reopen_ready_and_start(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let n = new_issue(&s, "r", "Make it <fast> & \"safe\"", &["bug"]).await;
    let cookie = session(&s).await;
    let path = format!("/repos/r/issues/{n}");
    let (st, html) = page(&s, &cookie, &path).await;
    assert_eq!(st, 200);
    assert!(
        html.contains("Make it &#60;fast&#62; &#38; &#34;safe&#34;"),
        "escaped: {html}"
    );
    assert!(html.contains("Ready for agent"));
    assert!(html.contains("No AFK run has worked on this issue yet."));
    let csrf = csrf_of(&html);
    let labels =
        async || s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok()["labels"].clone();

    // Forged: refused, nothing changes.
    let r = post_form(&s, &cookie, &format!("{path}/ready"), "csrf=wrong").await;
    assert_eq!(r.status(), 403);
    assert_eq!(labels().await, json!(["bug"]));
    // From another site: refused by the same-origin guard.
    let r = client()
        .post(format!("{}{path}/ready", s.url))
        .header(COOKIE, &cookie)
        .header(reqwest::header::ORIGIN, "http://evil.example")
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(labels().await, json!(["bug"]));
    // Ready on, then off.
    let r = press(&s, &cookie, &format!("{path}/ready"), &csrf).await;
    assert_eq!(r.status(), 303);
    assert_eq!(location(&r), path);
    assert_eq!(labels().await, json!(["bug", "ready-for-agent"]));
    let (_, html) = page(&s, &cookie, &path).await;
    assert!(html.contains("Not ready for agent"), "{html}");
    press(&s, &cookie, &format!("{path}/not-ready"), &csrf).await;
    assert_eq!(labels().await, json!(["bug"]));
    // The repo's own ready label is the one put on.
    s.patch("/api/v1/repos/r", json!({"afk_label": "agent-go"}))
        .await
        .ok();
    press(&s, &cookie, &format!("{path}/ready"), &csrf).await;
    assert_eq!(labels().await, json!(["agent-go", "bug"]));

    // Close, then reopen.
    let r = press(&s, &cookie, &format!("{path}/close"), &csrf).await;
    assert_eq!(r.status(), 303);
    let state = async || s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok()["state"].clone();
    assert_eq!(state().await, "closed");
    let (_, html) = page(&s, &cookie, &path).await;
    assert!(html.contains("Reopen issue") && !html.contains("Close issue"));
    press(&s, &cookie, &format!("{path}/reopen"), &csrf).await;
    assert_eq!(state().await, "open");

    // Missing issues and bad numbers are pages, never a 5xx.
    for (p, want) in [
        ("/repos/r/issues/99", 404),
        ("/repos/r/issues/abc", 404),
        ("/repos/r/issues/-1", 404),
        ("/repos/nosuch/issues/1", 404),
    ] {
        let (st, html) = page(&s, &cookie, p).await;
        assert_eq!(st, want, "{p}: {html}");
        assert!(html.contains("<!doctype html>"), "{p}");
    }
    let r = press(&s, &cookie, &format!("{path}/explode"), &csrf).await;
    assert_eq!(r.status(), 404, "an action issues do not take");
    assert_eq!(state().await, "open");
    let r = post_form(
        &s,
        &cookie,
        "/repos/r/issues/99/close",
        &format!("csrf={csrf}"),
    )
    .await;
    assert_eq!(r.status(), 404);

    // The start link pre-fills the start form with the repo and the issue.
    let (_, html) = page(&s, &cookie, &path).await;
    let href = html
        .split("href=\"/runs/new?")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("a start link")
        .replace("&#38;", "&");
    let (st, form) = page(&s, &cookie, &format!("/runs/new?{href}")).await;
    assert_eq!(st, 200);
    assert!(form.contains("<option value=\"r\" selected>"), "{form}");
    assert!(
        form.contains(&format!(
            "Work on issue #{n} of r: Make it &#60;fast&#62; &#38; &#34;safe&#34;\n\nthe body"
        )),
        "{form}"
    );
    s.stop().await;
}

async fn an_issue_page_lists_its_afk_runs(b: Backend) {
    let s = TestServer::start(b).await;
    behave(
        &s,
        r#"
echo "fixed" > FIX.md
git add FIX.md
git -c user.name=agent -c user.email=agent@example.com commit -qm "Fix issue $LAB_ISSUE" || exit 8
labctl pr create --title "Fix issue $LAB_ISSUE" --body "Resolves #$LAB_ISSUE" || exit 7
"#,
    );
    afk_repo(&s, "r").await;
    let n = new_issue(&s, "r", "Give it to the agent", &["ready-for-agent"]).await;
    let claim = outcome(&s, "r", n, 30).await;
    let run = claim["run_id"].as_i64().expect("the claim names its run");
    let cookie = session(&s).await;
    let (st, html) = page(&s, &cookie, &format!("/repos/r/issues/{n}")).await;
    assert_eq!(st, 200);
    let table = html
        .split("id=\"issue-runs\"")
        .nth(1)
        .expect("the runs of the issue")
        .to_owned();
    assert!(table.contains(&format!("href=\"/runs/{run}\"")), "{table}");
    let out = claim["outcome"].as_str().unwrap();
    assert!(table.contains(&format!(">{out}</span>")), "{table}");
    assert!(
        table.contains("/repos/r/pulls/1") && !table.contains("/api/v1/"),
        "its pull request: {table}"
    );
    // The outcome's comment, once lab has told the issue.
    let told = wait::until("the outcome's comment", wait::secs(10), async || {
        let i = s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok();
        i["comments"][0]["body"].as_str().map(str::to_owned)
    })
    .await;
    let (_, html) = page(&s, &cookie, &format!("/repos/r/issues/{n}")).await;
    let first_line = escaped(told.lines().next().unwrap());
    assert!(html.contains("<h2>Comments</h2>"), "{html}");
    assert!(html.contains(&first_line), "{first_line} in {html}");
    s.stop().await;
}

/// A repo whose issues are on a (fake) Gitea: its list and issue pages read
/// through the forge, the ready button labels the forge's issue, close and
/// reopen reach it, and the forge's refusals are pages that say so.
async fn forge_backed_pages(b: Backend) {
    forge_pages(b, Flavor::Gitea).await;
}

/// The same on GitHub (labels by name, its own auth header).
async fn github_backed_pages(b: Backend) {
    forge_pages(b, Flavor::Github).await;
}

async fn forge_pages(b: Backend, flavor: Flavor) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(flavor).await;
    let path = git::init_repo(&s.tmp(), "src");
    let kind = if flavor == Flavor::Gitea {
        "gitea"
    } else {
        "github"
    };
    s.post(
        "/api/v1/repos",
        json!({"name": "g", "path": path, "issue_source": kind, "forge_url": f.url,
               "forge_repo": "owner/repo", "forge_token": f.fake.token}),
    )
    .await
    .expect(201);
    let one = f.add_issue("On the forge", &["bug"], "open", false);
    f.add_issue("Shut on the forge", &[], "closed", false);
    let cookie = session(&s).await;
    let (st, list) = page(&s, &cookie, "/repos/g/issues").await;
    assert_eq!(st, 200, "{list}");
    assert!(list.contains("On the forge") && !list.contains("Shut on the forge"));
    let (_, all) = page(&s, &cookie, "/repos/g/issues?state=all").await;
    assert!(all.contains("Shut on the forge"), "{all}");
    let path = format!("/repos/g/issues/{one}");
    let (st, html) = page(&s, &cookie, &path).await;
    assert_eq!(st, 200, "{html}");
    assert!(html.contains("on the forge</a>") && html.contains(&format!("Source: {kind}.")));
    let csrf = csrf_of(&html);
    let r = press(&s, &cookie, &format!("{path}/ready"), &csrf).await;
    assert_eq!(r.status(), 303);
    assert_eq!(f.labels_of(one), vec!["bug", "ready-for-agent"]);
    press(&s, &cookie, &format!("{path}/close"), &csrf).await;
    let state = |f: &FakeForge| {
        f.fake.state.lock().unwrap().issues[0]["state"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(state(&f), "closed");
    press(&s, &cookie, &format!("{path}/reopen"), &csrf).await;
    assert_eq!(state(&f), "open");
    // A new issue from the form lands on the forge.
    let at = open_from_form(
        &s,
        &cookie,
        "g",
        &format!("csrf={csrf}&title=From+the+page&body=b&labels=docs"),
    )
    .await;
    assert_eq!(at, "/repos/g/issues/3");
    assert_eq!(f.labels_of(3), vec!["docs"]);
    // The forge's refusals: a page naming them, never a 5xx.
    f.fake.state.lock().unwrap().rate_limited = true;
    let (st, html) = page(&s, &cookie, "/repos/g/issues").await;
    assert_eq!(st, 429);
    assert!(html.contains("rate limit"), "{html}");
    let (st, html) = page(&s, &cookie, "/repos/g/issues/999").await;
    assert_eq!(st, 404, "{html}");
    // The forge revokes lab's token.
    f.fake.state.lock().unwrap().revoked = true;
    let (st, html) = page(&s, &cookie, "/repos/g/issues").await;
    assert_eq!(st, 424, "{html}");
    assert!(html.contains("check the forge token"), "{html}");
    let (st, every) = page(&s, &cookie, "/issues").await;
    assert_eq!(
        st, 200,
        "one repo's forge failing leaves the others: {every}"
    );
    assert!(
        every.contains("g: lab could not get this from the forge"),
        "{every}"
    );
    s.stop().await;
}

on_both!(
    lists_filter_and_create,
    close_reopen_ready_and_start,
    an_issue_page_lists_its_afk_runs,
    forge_backed_pages,
    github_backed_pages,
);
