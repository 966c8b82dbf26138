//! What the pages do with hostile or broken input: a login's `next`, a
//! form from another origin, a body too large, a missing route or run, a
//! form that is not UTF-8. Pages answer HTML; nothing is started or
//! redirected off-site.

use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use reqwest::redirect::Policy;

use crate::on_both;
use crate::support::api::Api;
use crate::support::{Backend, TestServer};

/// A client that follows no redirect.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap()
}

/// Posts the login form with the admin token and `next` (already encoded).
async fn login(s: &Api, next: &str) -> reqwest::Response {
    client()
        .post(format!("{}/login", s.url))
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(format!("token={}&next={next}", s.token))
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST /login with next={next}: {e}"))
}

fn location(r: &reqwest::Response) -> &str {
    r.headers()
        .get(LOCATION)
        .map(|v| v.to_str().unwrap())
        .unwrap_or("")
}

/// A logged-in browser's cookie.
pub(crate) async fn session(s: &Api) -> String {
    let r = login(s, "/runs").await;
    assert_eq!(r.status(), 303);
    let c = r.headers()[SET_COOKIE].to_str().unwrap();
    c.split(';').next().unwrap().to_owned()
}

/// A request of a logged-in browser.
pub(crate) async fn visit(s: &Api, cookie: &str, method: Method, path: &str) -> reqwest::Response {
    client()
        .request(method, format!("{}{path}", s.url))
        .header(COOKIE, cookie)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The CSRF token of a page's first form.
pub(crate) fn csrf_of(page: &str) -> String {
    page.split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the form has a CSRF token")
        .to_owned()
}

fn is_html(r: &reqwest::Response) -> bool {
    r.headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.to_str().unwrap().starts_with("text/html"))
}

/// `next` is a path on this site, or the login goes to `/`: a tab a browser
/// drops, a line break or DEL (no valid header) never leave the site nor
/// fail the login.
async fn login_next_stays_on_the_site(b: Backend) {
    let s = TestServer::start(b).await;
    for bad in [
        "/%09/evil.example",
        "/%0Afoo",
        "/%0D%0Afoo",
        "/%7F",
        "%2F%2Fevil.example",
        "/%5Cevil.example",
        "https://evil.example/",
        "/%20/evil.example",
    ] {
        let r = login(&s, bad).await;
        assert_eq!(r.status(), 303, "next={bad}");
        assert_eq!(location(&r), "/", "next={bad}");
        assert!(r.headers().contains_key(SET_COOKIE), "next={bad}");
    }
    let r = login(&s, "/runs/new%3Frepo%3Dr").await;
    assert_eq!(location(&r), "/runs/new?repo=r");
    // Logged in, the form sends the browser on at once: the same rule.
    let cookie = session(&s).await;
    for bad in ["/%09/evil.example", "/%0Afoo", "/%7F"] {
        let r = visit(&s, &cookie, Method::GET, &format!("/login?next={bad}")).await;
        assert_eq!(r.status(), 303, "next={bad}");
        assert_eq!(location(&r), "/", "next={bad}");
    }
    s.stop().await;
}

/// With `--public-url`, a form's `Origin` must be that URL's origin, not
/// whatever `Host` says.
async fn the_origin_check_uses_the_public_url(b: Backend) {
    let s = TestServer::start_tweaked(b, |c| {
        c.public_url = Some("https://lab.example.com".into());
    })
    .await;
    let post = |origin: &str| {
        client()
            .post(format!("{}/login", s.url))
            .header(ORIGIN, origin)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(format!("token={}&next=/runs", s.token))
            .send()
    };
    // The Host of the request, which a rebinding site controls.
    let own_host = s.url.clone();
    let r = post(&own_host).await.unwrap();
    assert_eq!(r.status(), 403, "an Origin that only matches Host");
    assert!(!r.headers().contains_key(SET_COOKIE));
    for ok in ["https://lab.example.com", "https://LAB.example.com:443"] {
        let r = post(ok).await.unwrap();
        assert_eq!(r.status(), 303, "Origin {ok}");
    }
    for bad in [
        "http://lab.example.com",
        "https://lab.example.com:8443",
        "null",
    ] {
        assert_eq!(post(bad).await.unwrap().status(), 403, "Origin {bad}");
    }
    s.stop().await;
}

/// Errors on page routes are HTML pages; under /api/ they stay JSON.
async fn page_errors_are_pages(b: Backend) {
    let s = TestServer::start(b).await;
    let cookie = session(&s).await;
    let get = |path: &'static str| visit(&s, &cookie, Method::GET, path);
    let r = get("/no/such/page").await;
    assert_eq!(r.status(), 404);
    assert!(is_html(&r), "{:?}", r.headers());
    let r = get("/api/v1/nosuch").await;
    assert_eq!(r.status(), 404);
    let e: serde_json::Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "not_found", "the API answers JSON");
    let r = visit(&s, &cookie, Method::DELETE, "/runs").await;
    assert_eq!(r.status(), 405);
    assert!(is_html(&r), "{:?}", r.headers());
    // A path parameter that is not a number.
    let r = get("/live/runs/abc").await;
    assert!(r.status().is_client_error(), "{}", r.status());
    assert!(is_html(&r), "{:?}", r.headers());
    // A form over the body limit.
    let addr = s.url.trim_start_matches("http://").to_owned();
    let text = s
        .raw_head(&format!(
            "POST /runs/new HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
            2 * 1024 * 1024
        ))
        .await;
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("text/html"), "{text}");
    assert!(text.contains("1048576 bytes"), "{text}");
    s.stop().await;
}

/// The live output of a run that does not exist is a 404, not an empty
/// stream a page would wait on forever.
async fn live_output_of_a_missing_run_is_a_404(b: Backend) {
    let s = TestServer::start(b).await;
    let cookie = session(&s).await;
    let r = visit(&s, &cookie, Method::GET, "/live/runs/999").await;
    assert_eq!(r.status(), 404);
    assert!(is_html(&r), "{:?}", r.headers());
    assert!(r.text().await.unwrap().contains("no run 999"));
    s.stop().await;
}

/// A form field that is not UTF-8 is refused, naming it, as the API refuses
/// such a body; no run starts.
async fn a_form_that_is_not_utf8_is_refused(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let cookie = session(&s).await;
    let page = visit(&s, &cookie, Method::GET, "/runs/new")
        .await
        .text()
        .await
        .unwrap();
    let csrf = csrf_of(&page);
    let r = client()
        .post(format!("{}/runs/new", s.url))
        .header(COOKIE, &cookie)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&repo=r&prompt=%FF%FE"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(is_html(&r), "{:?}", r.headers());
    let text = r.text().await.unwrap();
    assert!(text.contains("prompt") && text.contains("UTF-8"), "{text}");
    assert_eq!(s.get("/api/v1/runs").await.ok(), serde_json::json!([]));
    s.stop().await;
}

on_both!(
    login_next_stays_on_the_site,
    the_origin_check_uses_the_public_url,
    page_errors_are_pages,
    live_output_of_a_missing_run_is_a_404,
    a_form_that_is_not_utf8_is_refused,
);
