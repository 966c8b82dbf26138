//! An AFK run follows its pull request on a forge (issue 14 §1): the
//! forge's checks and reviews start rounds of the same session; green ends
//! it `pr-green`; rounds stop at the limit; pending checks at the time limit
//! leave it `pr-opened`; a rate limit moves the next read. Against the fake
//! forges, with the fake agent pushing through lab to a bare repository.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::forge_repo;
use crate::afk::outcome;
use crate::afk_follow::STOP;
use crate::support::forge::{FakeForge, Flavor, Limit};
use crate::support::{Backend, TestServer, git, wait};

/// Works, opens its pull request, ends its turn; told of another round, it
/// records the whole prompt, (maybe) fixes, commits and ends its turn; the
/// same again for a third round.
pub(crate) fn rounds(fix: bool) -> String {
    let fix = if fix {
        "touch FIXED && git add FIXED"
    } else {
        ":"
    };
    let round = |n: u8| {
        format!(
            "read line\nprintf '%s\\n' \"$line\" > \"$FAKE_REC/../round{n}.txt\"\n\
             timeout --foreground 2 cat >> \"$FAKE_REC/../round{n}.txt\"\n\
             {fix}\ncommit round{n}\nstop\n"
        )
    };
    format!(
        "{STOP}\ncommit work\nlabctl pr create --title 'Do it' --body 'Resolves' || exit 7\nstop\n{}{}\
         while :; do sleep 1; done\n",
        round(2),
        round(3)
    )
}

/// A forge repo whose clone URL is a bare repository (the forge's git
/// side), with the AFK label's issue ready; returns the bare repo.
pub(crate) async fn setup(
    s: &TestServer,
    f: &FakeForge,
    flavor: Flavor,
    script: &str,
) -> (PathBuf, i64) {
    let upstream = git::init_repo(&s.tmp(), "upstream");
    let bare = s.tmp().join("upstream.git");
    let st = std::process::Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(&upstream)
        .arg(&bare)
        .status()
        .unwrap();
    assert!(st.success());
    forge_repo(s, f, flavor, Some(&format!("file://{}", bare.display()))).await;
    std::fs::write(s.tmp().join("afk.sh"), script).unwrap();
    f.fake.state.lock().unwrap().ci.git_dir = Some(bare.clone());
    s.patch("/api/v1/settings", json!({"afk": {"tick_seconds": 1}}))
        .await
        .ok();
    let n = f.add_issue("Make it green", &["ready-for-agent"], "open", false);
    s.patch("/api/v1/repos/r", json!({"afk_enabled": true}))
        .await
        .ok();
    (bare, n)
}

pub(crate) fn record(s: &TestServer, name: &str) -> String {
    std::fs::read_to_string(s.tmp().join("records").join(name)).unwrap_or_default()
}

/// The requests lab made to follow pull request 500. A read of the pull
/// request right before an edit of it is lab writing its receipt into the
/// description, not following: it is left out.
pub(crate) fn follow_calls(f: &FakeForge) -> (usize, usize) {
    let log = f.log();
    let pull = |l: &str| l.split('?').next().unwrap().ends_with("/pulls/500");
    let follow: Vec<&String> = log
        .iter()
        .enumerate()
        .filter(|(i, l)| {
            !(l.starts_with("GET")
                && pull(l)
                && log
                    .get(i + 1)
                    .is_some_and(|n| n.starts_with("PATCH") && pull(n)))
        })
        .map(|(_, l)| l)
        .collect();
    let polls = follow
        .iter()
        .filter(|l| l.starts_with("GET") && pull(l))
        .count();
    let all = follow
        .iter()
        .filter(|l| {
            l.starts_with("GET")
                && (l.contains("/pulls/500")
                    || l.contains("/commits/")
                    || l.contains("/issues/500/"))
        })
        .count();
    (polls, all)
}

/// Waits for the run to end `pr-green` with passed checks in round 2, whose
/// prompt starts with `told`; returns that prompt.
async fn green_in_round_2(s: &TestServer, n: i64, told: &str) -> String {
    let c = outcome(s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    assert_eq!(
        (c["rounds"].as_i64(), c["checks"].as_str()),
        (Some(2), Some("passed")),
        "{c}"
    );
    let prompt = record(s, "round2.txt");
    assert!(prompt.starts_with(told), "{prompt}");
    prompt
}

async fn a_red_check_is_fixed_in_a_second_round(b: Backend, flavor: Flavor) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(flavor).await;
    let (bare, n) = setup(&s, &f, flavor, &rounds(true)).await;
    f.fake.state.lock().unwrap().ci.green_file = Some("FIXED".into());
    let told = green_in_round_2(
        &s,
        n,
        "lab: your pull request needs another round (round 2 of 3).",
    )
    .await;
    assert!(told.contains("- ci/test: failure"), "{told}");
    // One session throughout, and the fix reached the forge's repo.
    let runs = s.get("/api/v1/runs?kind=afk").await.ok();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    let branch = runs[0]["branch"].as_str().unwrap();
    let files = git::git(&bare, &["ls-tree", "--name-only", branch]);
    assert!(files.contains("FIXED"), "{files}");
    // Its description is the agent's, then lab's receipt, whole at the end;
    // lab rewrote it only when a round or the outcome changed it.
    let (body, edits, opened_with) = {
        let st = f.fake.state.lock().unwrap();
        (
            st.pulls[0]["body"].as_str().unwrap().to_owned(),
            st.pull_edits,
            st.created_bodies[0].clone(),
        )
    };
    // It was opened with the receipt already in it (no edit for that).
    assert!(
        opened_with.starts_with("Resolves")
            && opened_with.contains(lab::service::receipt::MARKER)
            && opened_with.contains("- **Round 1**: the issue"),
        "{opened_with}"
    );
    let (agent, receipt) = body
        .split_once(lab::service::receipt::MARKER)
        .unwrap_or_else(|| panic!("no receipt in {body}"));
    assert_eq!(agent.trim(), "Resolves", "{body}");
    assert!(
        receipt.contains("### lab's receipt")
            && receipt.contains("- **Round 1**: the issue")
            && receipt.contains("- **Round 2**: the forge's checks failed")
            && receipt.contains("- **Outcome** pr-green"),
        "{body}"
    );
    assert!((1..=3).contains(&edits), "{edits} edits");
    // Each read of the pull request is 6 requests on GitHub (the pull
    // request, check runs, combined status, reviews, review comments, the
    // conversation), 4 on Gitea (no check runs; each review's line comments
    // only when it has some).
    let (polls, all) = follow_calls(&f);
    let per = if flavor == Flavor::Github { 6 } else { 4 };
    assert!(polls >= 2, "{:#?}", f.log());
    assert_eq!(all, polls * per, "{:#?}", f.log());
    // The pull request's page links the forge and says its checks now.
    let pr = f.fake.state.lock().unwrap().pulls[0]["number"]
        .as_i64()
        .unwrap();
    let cookie = crate::pages_input::session(&s).await;
    let page = crate::pages_input::visit(
        &s,
        &cookie,
        reqwest::Method::GET,
        &format!("/repos/r/pulls/{pr}"),
    )
    .await
    .text()
    .await
    .unwrap();
    assert!(
        page.contains(
            r#"<p id="forge-checks">Its checks on the forge: <strong>passed</strong></p>"#
        ),
        "{page}"
    );
    s.stop().await;
}

async fn gitea_red_check_fixed(b: Backend) {
    a_red_check_is_fixed_in_a_second_round(b, Flavor::Gitea).await;
}

async fn github_red_check_fixed(b: Backend) {
    a_red_check_is_fixed_in_a_second_round(b, Flavor::Github).await;
}

/// Waits for lab's pull request on the fake forge.
pub(crate) async fn pull_opened(f: &FakeForge) -> Value {
    wait::until(
        "the pull request",
        wait::secs(30).every_ms(100),
        async || f.fake.state.lock().unwrap().pulls.first().cloned(),
    )
    .await
}

/// A reviewer asking for changes starts a round whose prompt is the
/// review's text; then green ends the run.
async fn a_review_starts_a_round(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Gitea).await;
    f.fake.state.lock().unwrap().ci.all = Some("pending".into());
    let (_, n) = setup(&s, &f, Flavor::Gitea, &rounds(false)).await;
    let pr = pull_opened(&f).await["number"].as_i64().unwrap();
    f.add_review(pr, "ana", "REQUEST_CHANGES", "Please rename x to width.");
    // lab's own comment is not feedback.
    f.add_pull_comment(pr, "lab-bot", "lab: this is mine");
    wait::until("round 2", wait::secs(30).every_ms(100), async || {
        let t = record(&s, "round2.txt");
        t.contains("Please rename x").then_some(()).ok_or(t)
    })
    .await;
    let told = record(&s, "round2.txt");
    assert!(
        told.contains("Review by ana:\nPlease rename x to width."),
        "{told}"
    );
    assert!(!told.contains("this is mine"), "{told}");
    f.fake.state.lock().unwrap().ci.all = Some("success".into());
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    assert_eq!(c["rounds"], 2, "{c}");
    // (A line break of round 2's prompt that its `cat` missed may reach
    // round 3's `read` as an empty line: no round.)
    let third = record(&s, "round3.txt");
    assert!(
        third.trim().is_empty(),
        "the review was answered once: {third}"
    );
    s.stop().await;
}

/// Checks that stay red end the run for a person at the rounds' limit; a
/// reviewer's "needs-human" would too.
async fn rounds_stop_at_the_limit(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Github).await;
    s.patch("/api/v1/settings", json!({"afk": {"max_rounds": 2}}))
        .await
        .ok();
    let (_, n) = setup(&s, &f, Flavor::Github, &rounds(false)).await;
    f.fake.state.lock().unwrap().ci.green_file = Some("FIXED".into());
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "needs-human", "{c}");
    assert_eq!(c["rounds"], 2, "{c}");
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.contains("the forge's checks still fail after 2 round(s)"),
        "{c}"
    );
    assert_eq!(c["checks"], "failed: ci/test", "{c}");
    s.stop().await;
}

/// A reviewer who writes "needs-human" hands the pull request to a person.
async fn a_reviewer_asks_for_a_person(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Github).await;
    f.fake.state.lock().unwrap().ci.all = Some("pending".into());
    let (_, n) = setup(&s, &f, Flavor::Github, &rounds(false)).await;
    let pr = pull_opened(&f).await["number"].as_i64().unwrap();
    f.add_pull_comment(pr, "ana", "This touches billing: needs-human.");
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "needs-human", "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains("ana on src/lib.rs:3 asked for a person"),
        "{c}"
    );
    assert_eq!(c["rounds"], 1, "{c}");
    s.stop().await;
}

/// Checks still pending at the run's time limit: `pr-opened`. Meanwhile a
/// rate limit of the forge moves the next read to when it asks, and says
/// so on the AFK status. (A minute of the time limit lasts 20 s here.)
async fn pending_checks_at_the_time_limit(b: Backend) {
    let s = TestServer::start_tweaked(b, |c| c.limit_minute_ms = 20_000).await;
    let f = FakeForge::start(Flavor::Gitea).await;
    f.fake.state.lock().unwrap().ci.all = Some("pending".into());
    s.patch(
        "/api/v1/settings",
        json!({"afk": {"run_timeout_minutes": 1, "max_attempts": 1}}),
    )
    .await
    .ok();
    let (_, n) = setup(&s, &f, Flavor::Gitea, &rounds(false)).await;
    pull_opened(&f).await;
    wait::until("a first read", wait::secs(30).every_ms(100), async || {
        follow_calls(&f).0 >= 1
    })
    .await;
    // Its turn is over and lab follows the checks: the run's phase says so,
    // and so does `labctl ps`.
    let run = wait::until("phase checking", wait::secs(10).every_ms(100), async || {
        let runs = s.get("/api/v1/runs?kind=afk").await.ok();
        let r = runs[0].clone();
        (r["phase"] == "checking").then_some(r).ok_or(runs)
    })
    .await;
    assert_eq!(run["state"], "running", "{run}");
    let ps = crate::labctl::ok(&crate::labctl::labctl(&s, &["ps"]));
    assert!(ps.contains(&format!("#{n} checking")), "{ps}");
    f.fake.state.lock().unwrap().limit = Some(Limit::RetryAfter(4));
    let problem = wait::until("the back-off", wait::secs(10).every_ms(100), async || {
        let st = s.get("/api/v1/afk/status").await.ok();
        let p = st["repos"][0]["problem"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        p.contains("rate limit").then_some(p).ok_or(st)
    })
    .await;
    assert!(
        problem.contains("following pull requests waits 4 s"),
        "{problem}"
    );
    let before = follow_calls(&f).0;
    wait::until("reads again", wait::secs(10).every_ms(100), async || {
        follow_calls(&f).0 > before
    })
    .await;
    // No read while backing off: the first read of the pull request after
    // the refusal came at least the 4 s it asked for after it.
    let waited = {
        let st = f.fake.state.lock().unwrap();
        let (refused, at) = st.limited.expect("a refusal");
        let next = (refused + 1..st.log.len())
            .find(|&i| {
                let l = &st.log[i];
                l.starts_with("GET") && l.split('?').next().unwrap().ends_with("/pulls/500")
            })
            .expect("a read after the refusal");
        st.log_at[next] - at
    };
    assert!(
        waited >= std::time::Duration::from_secs(4),
        "no read while backing off: the next came {waited:?} after the refusal"
    );
    wait::until("the note gone", wait::secs(5).every_ms(100), async || {
        let st = s.get("/api/v1/afk/status").await.ok();
        st["repos"][0]["problem"].is_null()
    })
    .await;
    let c = outcome(&s, "r", n, 90).await;
    assert_eq!(c["outcome"], "pr-opened", "{c}");
    assert_eq!(c["checks"], "pending", "{c}");
    let run = s.get(&format!("/api/v1/runs/{}", c["run_id"])).await.ok();
    assert_eq!(run["phase"], "done", "{run}");
    assert_eq!(c["rounds"], 1, "{c}");
    s.stop().await;
}

crate::on_both!(
    gitea_red_check_fixed,
    github_red_check_fixed,
    a_review_starts_a_round,
    rounds_stop_at_the_limit,
    a_reviewer_asks_for_a_person,
    pending_checks_at_the_time_limit,
);

/// The repo's own check command runs beside the forge's checks: green on
/// the forge is not enough while it fails.
async fn the_check_command_runs_beside_the_forges_checks(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Gitea).await;
    f.fake.state.lock().unwrap().ci.all = Some("success".into());
    let (_, n) = setup(&s, &f, Flavor::Gitea, &rounds(true)).await;
    s.patch("/api/v1/repos/r", json!({"check_command": "test -f FIXED"}))
        .await
        .ok();
    let told = green_in_round_2(
        &s,
        n,
        "lab: your pull request needs another round (round 2 of 3).",
    )
    .await;
    // The repo's own check failed, not the forge's.
    assert!(
        told.contains("Its check failed on ") && told.contains("test -f FIXED"),
        "{told}"
    );
    s.stop().await;
}

crate::on_both!(the_check_command_runs_beside_the_forges_checks);

/// An agent that ends its session after opening its pull request: a red
/// forge check resumes that session (`--resume` and its session id) for the
/// next round; its fix is pushed, and green ends it `pr-green`.
async fn a_red_check_resumes_an_ended_session(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Gitea).await;
    let (bare, n) = setup(&s, &f, Flavor::Gitea, crate::afk_follow::RESUMED_FIX).await;
    f.fake.state.lock().unwrap().ci.green_file = Some("FIXED".into());
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    assert_eq!(
        (c["rounds"].as_i64(), c["checks"].as_str()),
        (Some(2), Some("passed")),
        "{c}"
    );
    let argv = crate::afk_follow::round2_argv(&s);
    assert!(argv.iter().any(|a| a == "--resume"), "{argv:?}");
    let prompt = argv.iter().rev().find(|a| !a.is_empty()).unwrap();
    assert!(prompt.contains("- ci/test: failure"), "{prompt}");
    let runs = s.get("/api/v1/runs?kind=afk").await.ok();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    let files = git::git(
        &bare,
        &[
            "ls-tree",
            "--name-only",
            runs[0]["branch"].as_str().unwrap(),
        ],
    );
    assert!(files.contains("FIXED"), "{files}");
    s.stop().await;
}

crate::on_both!(a_red_check_resumes_an_ended_session);

/// A round's commits that leave the run's scope are not pushed: the forge
/// keeps the last head lab pushed, a round tells the agent which paths (in
/// its own session), and once it undoes them the push goes and the pull
/// request ends green; the forge's branch never shows the path.
async fn a_round_out_of_scope_is_not_pushed(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Gitea).await;
    s.patch(
        "/api/v1/settings",
        json!({"knobs": {"writes": ["*.md", "FIXED"]}}),
    )
    .await
    .ok();
    let script = format!(
        "{STOP}\ncommit work\nlabctl pr create --title 'Do it' --body 'Resolves' || exit 7\nstop\n\
         read line\ntimeout --foreground 2 cat > /dev/null\n\
         touch FIXED OUT.txt && git add FIXED OUT.txt\ncommit round2\nstop\n\
         read line\nprintf '%s\\n' \"$line\" > \"$FAKE_REC/../round3.txt\"\n\
         git rm -q OUT.txt\ncommit round3\nstop\nwhile :; do sleep 1; done\n"
    );
    let (bare, n) = setup(&s, &f, Flavor::Gitea, &script).await;
    // Every head the forge's branch takes is kept (a bare repo keeps none).
    git::git(&bare, &["config", "core.logAllRefUpdates", "always"]);
    f.fake.state.lock().unwrap().ci.green_file = Some("FIXED".into());
    let c = outcome(&s, "r", n, 90).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    assert_eq!(c["rounds"].as_i64(), Some(3), "{c}");
    let told = record(&s, "round3.txt");
    assert!(
        told.starts_with("lab: your pull request needs another round (round 3 of 3).")
            && told.contains(
                "the branch changes 1 path(s) outside the run's scope (writes: *.md, FIXED): OUT.txt"
            ),
        "{told}"
    );
    let runs = s.get("/api/v1/runs?kind=afk").await.ok();
    let branch = runs[0]["branch"].as_str().unwrap();
    let files = git::git(&bare, &["ls-tree", "--name-only", branch]);
    assert!(
        files.contains("FIXED") && !files.contains("OUT.txt"),
        "{files}"
    );
    // The forge's branch moved from the first push straight to the round
    // that undid the path: the round that added it never was its head.
    let heads = git::git(&bare, &["reflog", "show", "--format=%s", branch]);
    let heads: Vec<&str> = heads.lines().collect();
    assert_eq!(heads, ["round3", "work"], "newest first");
    // The receipt says what started each round.
    let r = s
        .get(&format!("/api/v1/runs/{}/receipt", c["run_id"]))
        .await
        .ok();
    let causes: Vec<&str> = r["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["cause"].as_str().unwrap())
        .collect();
    assert_eq!(causes, ["issue", "forge-check", "scope"], "{r}");
    assert_eq!(r["scope"]["state"], "in-scope", "{r}");
    // The forge's description never names the path the agent chose.
    let body = f.fake.state.lock().unwrap().pulls[0]["body"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        body.contains("- **Round 3**: the branch left its scope") && !body.contains("OUT.txt"),
        "{body}"
    );
    s.stop().await;
}

crate::on_both!(a_round_out_of_scope_is_not_pushed);
