//! A built-in pull request's `url` is a route that answers it.

use serde_json::json;

use crate::on_both;
use crate::support::{Backend, TestServer, id};

async fn a_builtin_pull_request_is_at_its_url(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r1").await;
    let run = s.working_run("r1").await;
    // A branch with nothing of its own is no pull request.
    let empty = s
        .post(
            &format!("/api/v1/runs/{}/pull", id(&run)),
            json!({"title": "Nothing", "body": ""}),
        )
        .await
        .expect(409);
    let msg = empty["error"]["message"].as_str().unwrap();
    assert!(msg.contains("no commit that main lacks"), "{msg}");
    assert_eq!(s.get("/api/v1/repos/r1/pulls").await.ok(), json!([]));
    crate::support::git::commit_in_run(&run);
    let pr = s
        .post(
            &format!("/api/v1/runs/{}/pull", id(&run)),
            json!({"title": "Fix it", "body": "what I did"}),
        )
        .await
        .expect(201);
    // `url` is the page a person opens; `api_url` the API's.
    let url = pr["url"].as_str().unwrap();
    assert_eq!(url, format!("{}/repos/r1/pulls/1", s.url));
    let api_url = pr["api_url"].as_str().unwrap();
    assert_eq!(api_url, format!("{}/api/v1/repos/r1/pulls/1", s.url));
    let path = api_url.strip_prefix(&s.url).unwrap();
    let cookie = crate::pages_input::session(&s).await;
    let page = crate::pages_input::visit(
        &s,
        &cookie,
        reqwest::Method::GET,
        url.strip_prefix(&s.url).unwrap(),
    )
    .await;
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("Fix it"));

    let got = s.get(path).await.expect(200);
    assert_eq!(got["number"], 1, "{got}");
    assert_eq!(got["title"], "Fix it", "{got}");
    assert_eq!(got["body"], "what I did", "{got}");
    assert_eq!(got["head"], run["branch"], "{got}");
    assert_eq!(got["base"], "main", "{got}");
    assert_eq!(got["run_id"], id(&run), "{got}");
    assert_eq!(got["state"], "open", "{got}");
    assert_eq!(got["url"], url, "{got}");
    // By the repo's id too; a number it does not have is a JSON 404.
    let repo_id = id(&s.get("/api/v1/repos/r1").await.ok());
    assert_eq!(
        s.get(&format!("/api/v1/repos/{repo_id}/pulls/1"))
            .await
            .expect(200)["title"],
        "Fix it"
    );
    let e = s.get("/api/v1/repos/r1/pulls/2").await.expect(404);
    assert!(e["error"]["message"].as_str().unwrap().contains("2"), "{e}");
    s.get("/api/v1/repos/r1/pulls/x").await.expect(400);
    // In the OpenAPI document.
    let doc = s.get("/api/v1/openapi.json").await.ok();
    assert!(
        doc["paths"]["/api/v1/repos/{id}/pulls/{number}"]["get"].is_object(),
        "not documented"
    );
    // A run's token does not reach it.
    let token = s.run_token(id(&run)).await;
    let r = s
        .send(
            reqwest::Client::new()
                .get(format!("{}{path}", s.url))
                .bearer_auth(&token),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    s.stop().await;
}

/// A manual run's page offers "Open pull request" once its branch has a
/// commit of its own, opens it from the form, then links it (issue 40 §9).
async fn a_manual_run_s_page_opens_its_pull_request(b: Backend) {
    use crate::pages_input::{client, csrf_of, session, visit};
    let s = TestServer::start(b).await;
    s.add_repo("r1").await;
    let run = s.working_run("r1").await;
    let cookie = session(&s).await;
    let path = format!("/runs/{}", id(&run));
    let page = async || {
        visit(&s, &cookie, reqwest::Method::GET, &path)
            .await
            .text()
            .await
            .unwrap()
    };
    let before = page().await;
    assert!(!before.contains("Open pull request"), "{before}");
    crate::support::git::commit_in_run(&run);
    let offered = page().await;
    assert!(offered.contains("Open pull request"), "{offered}");
    let form = offered.split("id=\"open-pull\"").nth(1).unwrap();
    let csrf = csrf_of(form);
    let r = client()
        .post(format!("{}{path}/pull", s.url))
        .header(reqwest::header::COOKIE, &cookie)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(format!("csrf={csrf}&title=From+the+page&body=done"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let pulls = s.get("/api/v1/repos/r1/pulls").await.ok();
    assert_eq!(pulls[0]["title"], "From the page", "{pulls}");
    assert_eq!(pulls[0]["run_id"], id(&run), "{pulls}");
    let after = page().await;
    assert!(
        !after.contains("Open pull request") && after.contains("/repos/r1/pulls/1"),
        "{after}"
    );
    // A forged form (no CSRF token) opens nothing more.
    let r = client()
        .post(format!("{}{path}/pull", s.url))
        .header(reqwest::header::COOKIE, &cookie)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body("title=Again")
        .send()
        .await
        .unwrap();
    assert_ne!(r.status(), 303);
    assert_eq!(
        s.get("/api/v1/repos/r1/pulls")
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    s.stop().await;
}

on_both!(
    a_manual_run_s_page_opens_its_pull_request,
    a_builtin_pull_request_is_at_its_url
);
