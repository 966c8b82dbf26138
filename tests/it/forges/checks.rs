//! The forge adapters against fakes that behave like the real forges
//! (issue 14 §6): paging past a page's cap, org labels, `Link` on another
//! origin, secondary rate limits, GitHub's string labels, pull requests from
//! forks and twice.

use lab::issues::{IssueSource, NewPull};
use lab::repo::{Repo, RepoSource};
use lab::store::RepoKey;
use serde_json::{Value, json};

use super::{forge_repo, listings};
use crate::support::forge::{FakeForge, Flavor, Limit, Recorder};
use crate::support::{Backend, TestServer};

async fn repo(s: &TestServer) -> Repo {
    s.runner()
        .store()
        .repo(&RepoKey::Name("r".into()))
        .await
        .unwrap()
}

fn source(s: &TestServer, r: &Repo) -> Box<dyn IssueSource> {
    s.scheduler().sources().of(r)
}

fn numbers(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|i| i["number"].as_i64().unwrap())
        .collect()
}

fn label_listings(f: &FakeForge) -> usize {
    f.log()
        .iter()
        .filter(|l| l.starts_with("GET") && l.contains("/repos/owner/repo/labels?"))
        .count()
}

/// Gitea pages its label listing without a `Link`, at most
/// `MAX_RESPONSE_ITEMS` (here 20) a page: lab reads every page, so a label
/// past the first page is found, not created again.
async fn gitea_labels_past_the_first_page(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Gitea).await;
    forge_repo(&s, &f, Flavor::Gitea, None).await;
    {
        let mut st = f.fake.state.lock().unwrap();
        st.max_items = 20;
        for i in 0..60 {
            st.labels.push((i + 1, format!("l-{i}")));
        }
    }
    let n = f.add_issue("ready one", &["ready-for-agent"], "open", false);
    let before = label_listings(&f);
    let c = s
        .post(
            "/api/v1/repos/r/issues",
            json!({"title": "t", "labels": ["l-55"]}),
        )
        .await
        .expect(201);
    assert_eq!(c["labels"], json!(["l-55"]));
    assert_eq!(f.repo_labels_named("l-55"), 1, "no second l-55");
    // 61 labels in pages of 20, stopping at X-Total-Count.
    assert_eq!(label_listings(&f) - before, 4);
    let r = repo(&s).await;
    source(&s, &r)
        .relabel(n, "ready-for-agent", "l-42")
        .await
        .unwrap();
    assert_eq!(f.labels_of(n), ["l-42"]);
    assert_eq!(f.repo_labels_named("l-42"), 1);
    s.stop().await;
}

/// An org's labels are not among the repo's: an issue keeps the org's
/// label when relabelled, lab makes no repo copy of one, and a listing by
/// an org label (which Gitea's `labels=` drops) holds only the issues that
/// carry it; by a label nobody has, nothing, after one page.
async fn gitea_org_labels(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Gitea).await;
    forge_repo(&s, &f, Flavor::Gitea, None).await;
    let ready = f.add_org_label("ready-for-agent");
    f.add_org_label("org-bug");
    for i in 0..70 {
        let labels: &[&str] = if i % 2 == 0 {
            &["ready-for-agent", "bug"]
        } else {
            &["bug"]
        };
        f.add_issue(&format!("issue {i}"), labels, "open", false);
    }
    let v = s
        .get("/api/v1/repos/r/issues?label=ready-for-agent&state=open")
        .await
        .ok();
    let want: Vec<i64> = (1..=70).filter(|n| n % 2 == 1).collect();
    assert_eq!(numbers(&v), want);
    let before = listings(&f);
    let v = s
        .get("/api/v1/repos/r/issues?label=nope&state=open")
        .await
        .ok();
    assert_eq!(
        v,
        json!([]),
        "an unknown label lists nothing, not everything"
    );
    assert_eq!(listings(&f) - before, 1, "after one page");

    let r = repo(&s).await;
    source(&s, &r).relabel(1, "bug", "org-bug").await.unwrap();
    assert_eq!(f.labels_of(1), ["ready-for-agent", "org-bug"]);
    let first = f.fake.state.lock().unwrap().issues[0]["labels"][0]["id"].clone();
    assert_eq!(first, ready, "the org's label, not a copy");
    assert_eq!(f.repo_labels_named("ready-for-agent"), 0);
    assert_eq!(f.repo_labels_named("org-bug"), 0);
    let c = s
        .post(
            "/api/v1/repos/r/issues",
            json!({"title": "t", "labels": ["ready-for-agent"]}),
        )
        .await
        .expect(201);
    assert_eq!(c["labels"], json!(["ready-for-agent"]));
    assert_eq!(f.repo_labels_named("ready-for-agent"), 0, "no repo copy");
    s.stop().await;
}

/// A `Link` naming another origin (Gitea's ROOT_URL, a proxy) is not
/// followed there: lab reads every page from the configured forge, and the
/// other host sees no request and no token. Gitea's pages of 20 (below the
/// 50 lab asks for) are all read.
async fn listings_stay_on_the_forge(b: Backend, flavor: Flavor) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(flavor).await;
    let elsewhere = Recorder::start().await;
    forge_repo(&s, &f, flavor, None).await;
    {
        let mut st = f.fake.state.lock().unwrap();
        st.max_items = 20;
        st.link_base = Some(elsewhere.url.clone());
    }
    for i in 0..130 {
        f.add_issue(&format!("issue {i}"), &["bug"], "open", false);
    }
    let before = listings(&f);
    let v = s.get("/api/v1/repos/r/issues?state=open").await.ok();
    assert_eq!(numbers(&v), (1..=130).collect::<Vec<_>>());
    let pages = if flavor == Flavor::Gitea { 7 } else { 3 };
    assert_eq!(listings(&f) - before, pages);
    assert!(
        elsewhere.seen.lock().unwrap().is_empty(),
        "{:?}",
        elsewhere.seen
    );
    s.stop().await;
}

async fn gitea_listings_stay_on_the_forge(b: Backend) {
    listings_stay_on_the_forge(b, Flavor::Gitea).await;
}

async fn github_listings_stay_on_the_forge(b: Backend) {
    listings_stay_on_the_forge(b, Flavor::Github).await;
}

/// GitHub's secondary rate limits are limits, not a bad token: with
/// `retry-after` lab waits that long, with only the message a minute. A
/// real 401 is still the token's fault.
async fn github_secondary_rate_limits(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Github).await;
    forge_repo(&s, &f, Flavor::Github, None).await;
    f.add_issue("one", &["bug"], "open", false);
    f.fake.state.lock().unwrap().limit = Some(Limit::RetryAfter(7));
    let e = s.get("/api/v1/repos/r/issues").await.expect(429);
    let m = e["error"]["message"].as_str().unwrap();
    assert!(m.contains("rate limit") && m.contains("7 s"), "{e}");
    assert!(!m.contains("token"), "{e}");
    f.fake.state.lock().unwrap().limit = Some(Limit::SecondaryMessage);
    let e = s.get("/api/v1/repos/r/issues").await.expect(429);
    assert!(
        e["error"]["message"].as_str().unwrap().contains("60 s"),
        "{e}"
    );
    s.get("/api/v1/repos/r/issues").await.ok();
    f.fake.state.lock().unwrap().revoked = true;
    let e = s.get("/api/v1/repos/r/issues").await.expect(502);
    let m = e["error"]["message"].as_str().unwrap();
    assert!(m.contains("401") && m.contains("token"), "{e}");
    s.stop().await;
}

/// GitHub's issue `labels` items may be strings: one such issue is read,
/// and the listing with it.
async fn github_string_labels(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Github).await;
    forge_repo(&s, &f, Flavor::Github, None).await;
    let n = f.add_issue("objects", &["ready-for-agent"], "open", false);
    let m = f.add_issue("strings", &["ready-for-agent", "bug"], "open", false);
    f.fake.state.lock().unwrap().issues[(m - 1) as usize]["labels"] =
        json!(["ready-for-agent", {"id": 2, "name": "bug", "color": "ededed"}]);
    let v = s
        .get("/api/v1/repos/r/issues?label=ready-for-agent")
        .await
        .ok();
    assert_eq!(numbers(&v), [n, m]);
    assert_eq!(v[1]["labels"], json!(["ready-for-agent", "bug"]));
    let one = s.get(&format!("/api/v1/repos/r/issues/{m}")).await.ok();
    assert_eq!(one["labels"], json!(["ready-for-agent", "bug"]));
    s.stop().await;
}

/// A branch pushed to another repo on the forge than `forge_repo` (the
/// clone URL names a fork) is opened as `owner:branch`; one pushed to the
/// forge repo itself as the branch. Asked again for the same branch (the
/// forge answers 409 on Gitea, 422 on GitHub), lab takes the pull request
/// the forge already has.
async fn pulls_from_forks_and_twice(b: Backend, flavor: Flavor) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(flavor).await;
    forge_repo(&s, &f, flavor, None).await;
    let mut r = repo(&s).await;
    let pull = |head: &str| NewPull {
        title: "Fix".into(),
        body: "Resolves #1".into(),
        head: head.into(),
        base: "main".into(),
        issue: Some(1),
        run_id: None,
    };
    // The fake listens on 127.0.0.1: a clone URL there is on the forge.
    r.source = RepoSource::Url("https://127.0.0.1/fork/repo.git".into());
    let p = source(&s, &r)
        .create_pull(&pull("lab/run-1"))
        .await
        .unwrap();
    let pulls = f.fake.state.lock().unwrap().pulls.clone();
    assert_eq!(pulls[0]["head"]["label"], "fork:lab/run-1");
    assert_eq!(p.head, "lab/run-1");
    let again = source(&s, &r)
        .create_pull(&pull("lab/run-1"))
        .await
        .unwrap();
    assert_eq!(again.number, p.number);
    assert_eq!(again.issue, Some(1));
    assert_eq!(f.fake.state.lock().unwrap().pulls.len(), 1);

    r.source = RepoSource::Url("git@127.0.0.1:Owner/Repo.git".into());
    source(&s, &r)
        .create_pull(&pull("lab/run-2"))
        .await
        .unwrap();
    r.source = RepoSource::Url("https://elsewhere.example/fork/repo.git".into());
    source(&s, &r)
        .create_pull(&pull("lab/run-3"))
        .await
        .unwrap();
    let pulls = f.fake.state.lock().unwrap().pulls.clone();
    assert_eq!(pulls[1]["head"]["label"], "owner:lab/run-2");
    assert_eq!(pulls[2]["head"]["label"], "owner:lab/run-3");
    s.stop().await;
}

async fn gitea_pulls_from_forks_and_twice(b: Backend) {
    pulls_from_forks_and_twice(b, Flavor::Gitea).await;
}

async fn github_pulls_from_forks_and_twice(b: Backend) {
    pulls_from_forks_and_twice(b, Flavor::Github).await;
}

crate::on_both!(
    gitea_labels_past_the_first_page,
    gitea_org_labels,
    gitea_listings_stay_on_the_forge,
    github_listings_stay_on_the_forge,
    github_secondary_rate_limits,
    github_string_labels,
    gitea_pulls_from_forks_and_twice,
    github_pulls_from_forks_and_twice,
);
