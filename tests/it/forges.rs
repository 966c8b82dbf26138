//! The Gitea/Forgejo and GitHub issue sources, against a fake forge that
//! answers with the real APIs' shapes.

use serde_json::json;

use crate::support::forge::{FakeForge, Flavor};
use crate::support::{Backend, TestServer, git, wait};

mod checks;
pub(crate) mod follow;
mod schemas;
mod truth;

pub(crate) async fn forge_repo(s: &TestServer, f: &FakeForge, flavor: Flavor, url: Option<&str>) {
    let path = git::init_repo(&s.tmp(), "src");
    let mut body = json!({
        "name": "r",
        "issue_source": if flavor == Flavor::Gitea { "gitea" } else { "github" },
        "forge_url": f.url,
        "forge_repo": "owner/repo",
        "forge_token": f.fake.token,
    });
    match url {
        Some(u) => body["url"] = json!(u),
        None => body["path"] = json!(path),
    }
    s.post("/api/v1/repos", body).await.expect(201);
}

pub(crate) fn listings(f: &FakeForge) -> usize {
    f.log()
        .iter()
        .filter(|l| l.starts_with("GET") && l.contains("/issues?"))
        .count()
}

async fn reads_writes_and_pages(b: Backend, flavor: Flavor) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(flavor).await;
    forge_repo(&s, &f, flavor, None).await;
    // 240 issues: every other one ready, some closed, some pull requests.
    for i in 0..240 {
        let labels: &[&str] = if i % 2 == 0 {
            &["ready-for-agent", "bug"]
        } else {
            &["bug"]
        };
        let state = if i % 10 == 4 { "closed" } else { "open" };
        f.add_issue(
            &format!("issue {i}"),
            labels,
            state,
            flavor == Flavor::Github && i % 20 == 0,
        );
    }
    // The token is lab's: the API never shows it back.
    let r = s.get("/api/v1/repos/r").await.ok();
    assert_eq!(r["forge_token"], "…1234");
    assert!(!r.to_string().contains(&f.fake.token));

    let before = listings(&f);
    let v = s
        .get("/api/v1/repos/r/issues?label=ready-for-agent&state=open")
        .await
        .ok();
    let got: Vec<i64> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["number"].as_i64().unwrap())
        .collect();
    let want: Vec<i64> = (0..240i64)
        .filter(|i| i % 2 == 0 && i % 10 != 4 && !(flavor == Flavor::Github && i % 20 == 0))
        .map(|i| i + 1)
        .collect();
    assert_eq!(
        got, want,
        "labelled open issues, no pull requests, every page"
    );
    let pages = listings(&f) - before;
    // The forge's listing (GitHub's includes pull requests) in pages of 50.
    let listed = want.len() + if flavor == Flavor::Github { 12 } else { 0 };
    assert_eq!(pages, listed.div_ceil(50), "pages of 50 for {listed} items");
    assert!(pages >= 2);
    assert_eq!(v[0]["labels"], json!(["ready-for-agent", "bug"]));
    assert!(
        v[0]["url"]
            .as_str()
            .unwrap()
            .contains("/owner/repo/issues/")
    );

    // An issue with its comments.
    let n = 3;
    s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok();
    f.fake
        .state
        .lock()
        .unwrap()
        .comments
        .push((n, "first!".into()));
    let i = s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok();
    assert_eq!(i["title"], "issue 2");
    assert_eq!(i["comments"][0]["body"], "first!");
    assert_eq!(i["comments"][0]["author"], "lab-bot");

    // Creating, closing.
    let c = s
        .post(
            "/api/v1/repos/r/issues",
            json!({"title": "from lab", "labels": ["ready-for-agent"]}),
        )
        .await
        .expect(201);
    let cn = c["number"].as_i64().unwrap();
    assert_eq!(f.labels_of(cn), ["ready-for-agent"]);
    let closed = s
        .post(&format!("/api/v1/repos/r/issues/{cn}/close"), json!(null))
        .await
        .ok();
    assert_eq!(closed["state"], "closed");

    // Errors: a missing issue, a refusal, a rate limit.
    s.get("/api/v1/repos/r/issues/9999").await.expect(404);
    let e = s
        .post("/api/v1/repos/r/issues", json!({"title": " "}))
        .await
        .expect(400);
    assert_eq!(e["error"]["field"], "title");
    f.fake.state.lock().unwrap().rate_limited = true;
    let e = s.get("/api/v1/repos/r/issues").await.expect(429);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("rate limit"),
        "{e}"
    );
    // A wrong token is refused when it is set, naming the field; one the
    // forge revoked later makes each read a 502 that says so.
    let e = s
        .patch("/api/v1/repos/r", json!({"forge_token": "wrong"}))
        .await
        .expect(400);
    assert_eq!(e["error"]["field"], "forge_token", "{e}");
    f.fake.state.lock().unwrap().revoked = true;
    let e = s.get("/api/v1/repos/r/issues").await.expect(502);
    assert!(
        e["error"]["message"].as_str().unwrap().contains("401"),
        "{e}"
    );
    f.fake.state.lock().unwrap().revoked = false;
    assert!(
        !e.to_string().contains("wrong"),
        "the token is never echoed"
    );
    s.stop().await;
}

async fn gitea_reads_writes_and_pages(b: Backend) {
    reads_writes_and_pages(b, Flavor::Gitea).await;
}

async fn github_reads_writes_and_pages(b: Backend) {
    reads_writes_and_pages(b, Flavor::Github).await;
}

crate::on_both!(gitea_reads_writes_and_pages, github_reads_writes_and_pages);

const RESOLVES: &str = r#"
echo "fixed" > FIX.md
git add FIX.md
git -c user.name=agent -c user.email=agent@example.com commit -qm "Fix issue $LAB_ISSUE" || exit 8
labctl pr create --title "Fix issue $LAB_ISSUE" --body "Resolves #$LAB_ISSUE" || exit 7
"#;

/// An AFK run of an issue on a forge: lab pushes the branch, opens the pull
/// request there, relabels and comments the issue, and lists the forge's
/// issues once per tick.
async fn an_afk_run_on_a_forge(b: Backend, flavor: Flavor) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(flavor).await;
    // The repo's clone URL is a bare repository lab can push to.
    let upstream = git::init_repo(&s.tmp(), "upstream");
    let bare = s.tmp().join("upstream.git");
    let st = std::process::Command::new("git")
        .args([
            "clone",
            "-q",
            "--bare",
            upstream.to_str().unwrap(),
            bare.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(st.success());
    forge_repo(&s, &f, flavor, Some(&format!("file://{}", bare.display()))).await;
    std::fs::write(s.tmp().join("afk.sh"), RESOLVES).unwrap();
    // The forge's pull requests show what was pushed to the bare repo.
    f.fake.state.lock().unwrap().ci.git_dir = Some(bare.clone());
    // The forge's CI passes every head: the agent ended its session after
    // opening the pull request, and lab follows it to green all the same.
    f.fake.state.lock().unwrap().ci.all = Some("success".into());
    let n = f.add_issue("Make it faster", &["ready-for-agent"], "open", false);
    s.post("/api/v1/repos/r/afk/pause", json!(null)).await.ok();
    s.patch("/api/v1/repos/r", json!({"afk_enabled": true}))
        .await
        .ok();
    // Ticks on a paused repo ask the forge nothing; a tick of a ready repo
    // lists its issues once.
    let before = listings(&f);
    for _ in 0..3 {
        s.scheduler().tick().await;
    }
    assert_eq!(listings(&f), before);
    s.post("/api/v1/repos/r/afk/resume", json!(null)).await.ok();
    let before = listings(&f);
    let t = s.scheduler().tick().await;
    assert_eq!(t.launched.len(), 1, "{t:?}");
    assert_eq!(listings(&f) - before, 1, "one listing request per tick");
    let run = t.launched[0];
    let outcome = wait::until(
        "the run's outcome",
        wait::secs(20).every_ms(200),
        async || {
            s.scheduler().tick().await;
            let st = s.get("/api/v1/afk/status").await.ok();
            let recent = &st["recent"][0];
            (!recent["outcome"].is_null())
                .then(|| recent.clone())
                .ok_or(st)
        },
    )
    .await;
    assert_eq!(outcome["outcome"], "pr-green", "{outcome}");
    let branch = format!("lab/run-{run}");
    // The branch was pushed, and the pull request opened on the forge.
    let heads = std::process::Command::new("git")
        .args(["-C", bare.to_str().unwrap(), "branch", "--list", &branch])
        .output()
        .unwrap();
    assert!(!heads.stdout.is_empty(), "{branch} was not pushed");
    let pulls = f.fake.state.lock().unwrap().pulls.clone();
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0]["head"]["ref"], branch.as_str());
    assert_eq!(pulls[0]["base"]["ref"], "main");
    assert_eq!(outcome["pr_url"], pulls[0]["html_url"]);
    // The issue is relabelled and commented.
    let relabelled = "the issue relabelled lab:pr-green";
    wait::until(relabelled, wait::secs(5).every_ms(100), async || {
        let labels = f.labels_of(n);
        if labels == ["lab:pr-green"] {
            return Ok(());
        }
        s.scheduler().tick().await;
        Err(format!("{labels:?}"))
    })
    .await;
    let comments = f.fake.state.lock().unwrap().comments.clone();
    assert!(
        comments
            .iter()
            .any(|(i, b)| *i == n && b.contains(pulls[0]["html_url"].as_str().unwrap())),
        "{comments:?}"
    );
    // The forge token never reached the run: not in its environment, its
    // workspace's git config, or its log.
    let env = String::from_utf8(s.record(run, "env").await).unwrap();
    assert!(!env.contains(&f.fake.token));
    let ws = s.data_dir().join("workspaces").join(run.to_string());
    let cfg = std::fs::read_to_string(s.tmp().join("upstream.git/config")).unwrap();
    assert!(!cfg.contains(&f.fake.token));
    let gitcfg = std::process::Command::new("git")
        .args(["-C", ws.to_str().unwrap(), "config", "--list"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&gitcfg.stdout).contains(&f.fake.token));
    let log = std::fs::read_to_string(
        s.data_dir()
            .join("runs")
            .join(run.to_string())
            .join("output.log"),
    )
    .unwrap();
    assert!(!log.contains(&f.fake.token));

    // A rate limit: the tick backs off that repo, and says so, instead of
    // asking again on the next tick.
    f.add_issue("Another", &["ready-for-agent"], "open", false);
    f.fake.state.lock().unwrap().rate_limited = true;
    let before = listings(&f);
    let t = s.scheduler().tick().await;
    assert!(t.launched.is_empty(), "{t:?}");
    assert_eq!(listings(&f) - before, 1);
    let st = s.get("/api/v1/afk/status").await.ok();
    let problem = st["repos"][0]["problem"].as_str().unwrap_or_default();
    assert!(problem.contains("rate limit"), "{st}");
    let t = s.scheduler().tick().await;
    assert!(t.launched.is_empty(), "{t:?}");
    assert_eq!(listings(&f) - before, 1, "no listing while backing off");
    s.stop().await;
}

async fn gitea_afk_run(b: Backend) {
    an_afk_run_on_a_forge(b, Flavor::Gitea).await;
}

async fn github_afk_run(b: Backend) {
    an_afk_run_on_a_forge(b, Flavor::Github).await;
}

crate::on_both!(gitea_afk_run, github_afk_run);
