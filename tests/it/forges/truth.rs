//! A pull request's state as the forges really report it (issue 24),
//! against fakes that now behave as GitHub and Gitea do: a head that shows
//! a little after a push, a source of checks that refuses lab's token, the
//! conclusions no change fixes, a conflict, a mergeability still computed,
//! conversation and line comments, a dismissed review, a merged or closed
//! pull request, and the account lab's token acts as.

use serde_json::{Value, json};

use super::follow::{follow_calls, pull_opened, record, rounds, setup};
use crate::afk::outcome;
use crate::support::forge::{FakeForge, Flavor};
use crate::support::{Backend, TestServer, wait};

/// The fake forge's pull request as it stands.
fn pull_mut(f: &FakeForge, edit: impl FnOnce(&mut Value)) {
    let mut s = f.fake.state.lock().unwrap();
    edit(&mut s.pulls[0]);
}

/// GitHub shows a pull request's new head a few reads after a push: the
/// round's fix is judged at the commit lab pushed, not at the red one
/// before it (which would read as "the round changed nothing").
async fn a_head_the_forge_shows_late_is_waited_for(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Github).await;
    let (_, n) = setup(&s, &f, Flavor::Github, &rounds(true)).await;
    {
        let mut st = f.fake.state.lock().unwrap();
        st.ci.green_file = Some("FIXED".into());
        st.head_lag = 3;
    }
    let c = outcome(&s, "r", n, 90).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    assert_eq!(c["rounds"], 2, "{c}");
    s.stop().await;
}

/// A fine-grained token without the Checks permission gets 403 on check
/// runs: lab says so and reads the head's Actions runs and statuses
/// instead, and the run still ends green.
async fn a_refused_source_of_checks_leaves_the_others(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Github).await;
    {
        let mut st = f.fake.state.lock().unwrap();
        st.check_runs_denied = true;
        st.ci.all = Some("success".into());
    }
    let (_, n) = setup(&s, &f, Flavor::Github, &rounds(false)).await;
    let problem = wait::until(
        "the refusal said",
        wait::secs(60).every_ms(200),
        async || {
            let st = s.get("/api/v1/afk/status").await.ok();
            let recent = &st["recent"][0];
            if !recent["outcome"].is_null() {
                return Ok(String::new());
            }
            st["repos"][0]["problem"]
                .as_str()
                .filter(|p| p.contains("check runs"))
                .map(str::to_owned)
                .ok_or(st)
        },
    )
    .await;
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    assert!(
        f.log()
            .iter()
            .any(|l| l.contains("/actions/runs?head_sha=")),
        "{:#?}",
        f.log()
    );
    if !problem.is_empty() {
        assert!(problem.contains("403"), "{problem}");
    }
    s.stop().await;
}

/// A check that was cancelled is nothing the agent can fix: no round, the
/// run ends for a person with the reason.
async fn a_cancelled_check_starts_no_round(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Github).await;
    f.fake.state.lock().unwrap().ci.all = Some("cancelled".into());
    let (_, n) = setup(&s, &f, Flavor::Github, &rounds(false)).await;
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "needs-human", "{c}");
    assert_eq!(c["rounds"], 1, "{c}");
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.contains("without a verdict the agent can change") && detail.contains("cancelled"),
        "{c}"
    );
    s.stop().await;
}

/// A pull request that conflicts with its base is never green (GitHub runs
/// no workflow on it): one round asks the agent to merge the base's new
/// commit; once the forge says it merges, green.
async fn a_conflict_is_a_round_then_green(b: Backend, flavor: Flavor) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(flavor).await;
    f.fake.state.lock().unwrap().mergeable = Some((json!(false), "dirty"));
    let (_, n) = setup(&s, &f, flavor, &rounds(false)).await;
    wait::until(
        "the conflict's round",
        wait::secs(60).every_ms(100),
        async || {
            let t = record(&s, "round2.txt");
            t.contains("conflicts with `main`").then_some(()).ok_or(t)
        },
    )
    .await;
    let told = record(&s, "round2.txt");
    assert!(told.contains("git merge "), "{told}");
    {
        let mut st = f.fake.state.lock().unwrap();
        st.mergeable = None;
        st.ci.all = Some("success".into());
    }
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    assert_eq!(c["rounds"], 2, "{c}");
    s.stop().await;
}

async fn github_conflict(b: Backend) {
    a_conflict_is_a_round_then_green(b, Flavor::Github).await;
}

async fn gitea_conflict(b: Backend) {
    a_conflict_is_a_round_then_green(b, Flavor::Gitea).await;
}

/// While GitHub still computes whether a pull request merges
/// (`mergeable: null`), green checks are not green yet: lab reads again.
async fn a_mergeability_being_computed_is_waited_for(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Github).await;
    {
        let mut st = f.fake.state.lock().unwrap();
        st.mergeable = Some((Value::Null, "unknown"));
        st.ci.all = Some("success".into());
    }
    let (_, n) = setup(&s, &f, Flavor::Github, &rounds(false)).await;
    pull_opened(&f).await;
    wait::until(
        "reads while it computes",
        wait::secs(60).every_ms(100),
        async || follow_calls(&f).0 >= 3,
    )
    .await;
    let st = s.get("/api/v1/afk/status").await.ok();
    assert!(st["recent"][0]["outcome"].is_null(), "{st}");
    f.fake.state.lock().unwrap().mergeable = None;
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    s.stop().await;
}

/// Reviewers' words reach the agent wherever they wrote them: a comment in
/// the conversation, a line comment of a Gitea review, a comment review's
/// body; a dismissed review's do not.
async fn every_kind_of_comment_is_feedback(b: Backend, flavor: Flavor) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(flavor).await;
    f.fake.state.lock().unwrap().ci.all = Some("pending".into());
    let (_, n) = setup(&s, &f, flavor, &rounds(false)).await;
    let pr = pull_opened(&f).await["number"].as_i64().unwrap();
    let dismissed = f.add_review(
        pr,
        "ed",
        if flavor == Flavor::Github {
            "CHANGES_REQUESTED"
        } else {
            "REQUEST_CHANGES"
        },
        "Rewrite it all.",
    );
    f.dismiss_review(dismissed);
    f.add_conversation_comment(pr, "cy", "Please add a test for the empty case.");
    match flavor {
        Flavor::Gitea => {
            f.add_line_review(pr, "di", "Off by one here.", "src/lib.rs");
        }
        Flavor::Github => {
            f.add_review(pr, "di", "COMMENTED", "Why not a map here?");
        }
    }
    wait::until("round 2", wait::secs(60).every_ms(100), async || {
        let t = record(&s, "round2.txt");
        (t.contains("empty case") && (t.contains("Off by one") || t.contains("a map")))
            .then_some(())
            .ok_or(t)
    })
    .await;
    let told = record(&s, "round2.txt");
    assert!(!told.contains("Rewrite it all"), "{told}");
    if flavor == Flavor::Gitea {
        assert!(told.contains("di on src/lib.rs:3"), "{told}");
    }
    f.fake.state.lock().unwrap().ci.all = Some("success".into());
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    s.stop().await;
}

async fn github_comments(b: Backend) {
    every_kind_of_comment_is_feedback(b, Flavor::Github).await;
}

async fn gitea_comments(b: Backend) {
    every_kind_of_comment_is_feedback(b, Flavor::Gitea).await;
}

/// A pull request a person merged is `pr-merged`; one closed unmerged,
/// `pr-closed`; each with its label on the issue.
async fn merged_and_closed_pull_requests_get_their_own_outcome(b: Backend) {
    for merged in [true, false] {
        let s = TestServer::start(b.clone()).await;
        let f = FakeForge::start(Flavor::Github).await;
        f.fake.state.lock().unwrap().ci.all = Some("pending".into());
        let (_, n) = setup(&s, &f, Flavor::Github, &rounds(false)).await;
        pull_opened(&f).await;
        pull_mut(&f, |p| {
            p["state"] = json!("closed");
            p["closed_at"] = json!("2026-12-02T12:00:00Z");
            if merged {
                p["merged"] = json!(true);
                p["merged_at"] = json!("2026-12-02T12:00:00Z");
            }
        });
        let c = outcome(&s, "r", n, 60).await;
        let want = if merged { "pr-merged" } else { "pr-closed" };
        assert_eq!(c["outcome"], want, "{c}");
        wait::until("the label", wait::secs(20).every_ms(200), async || {
            f.labels_of(n)
                .contains(&format!("lab:{want}"))
                .then_some(())
                .ok_or(f.labels_of(n).join(","))
        })
        .await;
        s.stop().await;
    }
}

/// lab reads the account its token acts as once and shows it; when that is
/// the operator's own account (a person owning the repo), its comments on
/// lab's pull requests are a person's words.
async fn the_forge_account_is_known_and_the_operator_s_own_is_heard(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Github).await;
    f.fake.state.lock().unwrap().login = "owner".into();
    f.fake.state.lock().unwrap().ci.all = Some("pending".into());
    let (_, n) = setup(&s, &f, Flavor::Github, &rounds(false)).await;
    let r = s.get("/api/v1/repos/r").await.ok();
    assert_eq!(
        r["forge_identity"],
        json!({"login": "owner", "is_operator": true}),
        "{r}"
    );
    let pr = pull_opened(&f).await["number"].as_i64().unwrap();
    // The fake opens pull requests as its token's account.
    pull_mut(&f, |p| p["user"]["login"] = json!("owner"));
    f.add_conversation_comment(pr, "owner", "Name the constant, please.");
    wait::until("round 2", wait::secs(60).every_ms(100), async || {
        let t = record(&s, "round2.txt");
        t.contains("Name the constant").then_some(()).ok_or(t)
    })
    .await;
    let _ = n;
    s.stop().await;
}

/// Gitea without `read:organization`: the organisation's labels answer 403;
/// lab goes on with the repo's labels and relabels the issue.
async fn an_org_labels_refusal_is_no_failure(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Gitea).await;
    f.fake.state.lock().unwrap().org_labels_denied = true;
    super::forge_repo(&s, &f, Flavor::Gitea, None).await;
    let n = f.add_issue("Label me", &[], "open", false);
    s.post(
        &format!("/api/v1/repos/r/issues/{n}/labels"),
        json!({"add": ["ready-for-agent"]}),
    )
    .await
    .expect(200);
    assert_eq!(f.labels_of(n), vec!["ready-for-agent"]);
    s.stop().await;
}

/// The doctor's finding of repo `r`'s forge.
async fn forge_finding(s: &TestServer) -> Value {
    let d = s.get("/api/v1/doctor").await.ok();
    d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["area"] == "forge r")
        .cloned()
        .unwrap_or_else(|| panic!("no forge finding: {d}"))
}

/// The doctor's word on one permission: whether the token has it.
fn granted(finding: &Value, permission: &str) -> Value {
    finding["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["permission"] == permission)
        .unwrap_or_else(|| panic!("{permission} not listed: {finding}"))["granted"]
        .clone()
}

/// `lab doctor` names the account lab acts as on each forge repo and each
/// permission its token needs, with which are missing; a classic GitHub
/// token's scopes are read from its header, a fine-grained token's reads
/// are tried, and writes the forge does not show are said unknown.
async fn the_doctor_lists_the_token_s_permissions(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Github).await;
    super::forge_repo(&s, &f, Flavor::Github, None).await;
    // A fine-grained token without Checks: lab reads on without it.
    f.fake.state.lock().unwrap().check_runs_denied = true;
    let finding = forge_finding(&s).await;
    assert_eq!(finding["level"], "warn", "{finding}");
    let message = finding["message"].as_str().unwrap();
    assert!(
        message.contains("lab acts as @lab-bot on owner/repo"),
        "{message}"
    );
    assert!(message.contains("Checks: read"), "{message}");
    assert_eq!(granted(&finding, "Checks: read"), false);
    assert_eq!(granted(&finding, "Actions: read"), true);
    assert_eq!(granted(&finding, "Issues: read and write"), Value::Null);
    let fix = finding["fix"].as_str().unwrap();
    assert!(fix.contains("Forge tokens"), "{finding}");
    // The command it names is one labctl has.
    assert!(fix.contains("--forge-token -"), "{finding}");

    // A classic token with `repo` and without `workflow`, whose account
    // may not push: that is an error, and the missing scope a warning.
    {
        let mut st = f.fake.state.lock().unwrap();
        st.check_runs_denied = false;
        st.scopes = Some("repo, read:org".into());
        st.no_push = true;
    }
    let finding = forge_finding(&s).await;
    assert_eq!(finding["level"], "error", "{finding}");
    assert_eq!(granted(&finding, "repo"), true);
    assert_eq!(granted(&finding, "workflow"), false);
    assert_eq!(granted(&finding, "push access to the repo"), false);

    // Everything granted, but the token is the repo owner's own account.
    {
        let mut st = f.fake.state.lock().unwrap();
        st.scopes = Some("repo, workflow".into());
        st.no_push = false;
        st.login = "owner".into();
    }
    // (A new lab process: the account is read once per process.)
    let fresh = s.restart().await;
    let finding = forge_finding(&fresh).await;
    assert_eq!(finding["level"], "warn", "{finding}");
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .contains("owner's own account"),
        "{finding}"
    );
    // Status and the repo page show the account, the page with a warning.
    let status = fresh.get("/api/v1/status").await.ok();
    assert_eq!(
        status["forges"],
        json!([{"repo": "r", "identity": {"login": "owner", "is_operator": true}}]),
        "{status}"
    );
    let cookie = crate::pages_input::session(&fresh).await;
    let page = crate::pages_input::visit(&fresh, &cookie, reqwest::Method::GET, "/repos/r")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("lab acts as <strong>@owner</strong>"),
        "{page}"
    );
    assert!(page.contains(r#"id="forge-identity-warning""#), "{page}");

    // labctl doctor prints each permission.
    let out = crate::labctl::labctl(&fresh, &["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("forge r"), "{text}");
    assert!(text.contains("has     workflow"), "{text}");

    // A revoked token: lab cannot use it, and says so.
    f.fake.state.lock().unwrap().revoked = true;
    let finding = forge_finding(&fresh).await;
    assert_eq!(finding["level"], "error", "{finding}");
    assert!(
        finding["message"].as_str().unwrap().contains("401"),
        "{finding}"
    );
    fresh.stop().await;
}

/// Gitea: its read scopes are tried; `read:organization` is missing here.
async fn the_doctor_tries_gitea_s_read_scopes(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Gitea).await;
    super::forge_repo(&s, &f, Flavor::Gitea, None).await;
    f.fake.state.lock().unwrap().org_labels_denied = true;
    let finding = forge_finding(&s).await;
    assert_eq!(finding["level"], "warn", "{finding}");
    assert_eq!(granted(&finding, "read:user"), true);
    assert_eq!(granted(&finding, "read:organization"), false);
    assert_eq!(granted(&finding, "write:issue"), Value::Null);
    assert_eq!(granted(&finding, "write:repository"), Value::Null);
    s.stop().await;
}

crate::on_both!(
    the_doctor_lists_the_token_s_permissions,
    the_doctor_tries_gitea_s_read_scopes,
    a_head_the_forge_shows_late_is_waited_for,
    a_refused_source_of_checks_leaves_the_others,
    a_cancelled_check_starts_no_round,
    github_conflict,
    gitea_conflict,
    a_mergeability_being_computed_is_waited_for,
    github_comments,
    gitea_comments,
    merged_and_closed_pull_requests_get_their_own_outcome,
    the_forge_account_is_known_and_the_operator_s_own_is_heard,
    an_org_labels_refusal_is_no_failure,
);
