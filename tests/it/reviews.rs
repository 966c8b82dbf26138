//! The review phase (issue 28 §3), with a fake agent that reviews: an
//! issue whose `review` is `on` gets, once its pull request is green, a
//! review run on a read-only checkout of the pull request's head. Its
//! verdict asks for changes: the findings go to the work run's same
//! session as the next round; the next review approves and the issue ends
//! `pr-green`. A verdict lab refuses gets one retry, then the issue needs
//! a person.

use reqwest::Method;
use serde_json::{Value, json};

use crate::afk::{afk_repo, behave, issue, outcome};
use crate::afk_follow::STOP;
use crate::on_both;
use crate::support::forge::{FakeForge, Flavor};
use crate::support::{Backend, TestServer};

on_both!(
    a_review_sends_the_work_back_then_approves_it,
    a_verdict_refused_twice_needs_a_person,
    a_forge_pull_request_hears_lab_s_words_on_each_verdict,
);

/// The work run: opens its pull request and ends its session; resumed
/// (`--resume`), it keeps the round's prompt and commits WHY.md. A review
/// run runs `$1` (the verdicts, by review number `$n`).
fn agent(review: &str) -> String {
    format!(
        r#"{STOP}
if [ "$LAB_RUN_KIND" = review ]; then
  n=1; [ -e "$FAKE_REC/../reviewed-1" ] && n=2
  touch "$FAKE_REC/../reviewed-$n"
  printf '%s' "$FAKE_PROMPT" > "$FAKE_REC/../review-prompt-$n.txt"
  cat FIX.md > "$FAKE_REC/../review-saw-$n.txt" 2>&1
  if touch wrote-in-review 2>/dev/null; then echo yes > "$FAKE_REC/../review-wrote.txt"; fi
  labctl pr create --title Mine --body no > "$FAKE_REC/../review-pr.txt" 2>&1
{review}
  stop
  while :; do sleep 1; done
fi
if grep -q -- --resume "$FAKE_REC/argv"; then
  printf '%s' "$FAKE_PROMPT" > "$FAKE_REC/../round-prompt.txt"
  echo why > WHY.md && git add WHY.md \
    && git -c user.name=a -c user.email=a@example.com commit -qm why || exit 8
else
  echo fixed > FIX.md && git add FIX.md \
    && git -c user.name=a -c user.email=a@example.com commit -qm fix || exit 8
  labctl pr create --title Fix --body 'Resolves' || exit 7
fi
"#
    )
}

/// Review 1 tries a malformed verdict (refused: its retry), then asks for
/// changes; review 2 approves.
const CHANGES_THEN_APPROVAL: &str = r#"
  if [ $n = 1 ]; then
    echo '{"verdict": "maybe", "summary": ""}' | labctl review submit --file - > "$FAKE_REC/../bad-1.txt" 2>&1
    printf '{"verdict":"changes_requested","summary":"Say why.","findings":[{"path":"FIX.md","line":1,"severity":"blocking","message":"Add WHY.md"}]}' > /tmp/v.json
  else
    printf '{"verdict":"approved","summary":"Good now.\\u001b]0;owned\\u0007","findings":[{"path":"WHY.md","line":1,"severity":"advisory","message":"Short."}]}' > /tmp/v.json
  fi
  labctl review submit --file /tmp/v.json > "$FAKE_REC/../review-submit-$n.txt" 2>&1
  labctl review submit --file /tmp/v.json > "$FAKE_REC/../review-again-$n.txt" 2>&1
"#;

/// Two malformed verdicts: the second ends the review.
const REFUSED_TWICE: &str = r#"
  echo '{"verdict": "approved", "summary": "x", "findings": [{"path": "/etc/passwd", "line": 1, "severity": "advisory", "message": "SECRET-WORDS"}]}' \
    | labctl review submit --file - > "$FAKE_REC/../bad-1.txt" 2>&1
  echo '{"verdict": "approved"}' | labctl review submit --file - > "$FAKE_REC/../bad-2.txt" 2>&1
"#;

fn record(s: &TestServer, name: &str) -> String {
    std::fs::read_to_string(s.tmp().join("records").join(name)).unwrap_or_default()
}

async fn reviews(s: &TestServer, n: i64) -> Value {
    s.get(&format!("/api/v1/repos/r/issues/{n}/reviews"))
        .await
        .ok()
}

async fn a_review_sends_the_work_back_then_approves_it(b: Backend) {
    let s = TestServer::start(b).await;
    afk_repo(&s, "r").await;
    s.patch("/api/v1/repos/r", json!({"knobs": {"review": "on"}}))
        .await
        .ok();
    behave(&s, &agent(CHANGES_THEN_APPROVAL));
    let n = issue(&s, "r", "Review me").await;

    let c = outcome(&s, "r", n, 90).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    assert_eq!(c["rounds"], 2, "one round for the review's findings: {c}");

    // The first verdict was refused, naming the fields, and did not count.
    let bad = record(&s, "bad-1.txt");
    assert!(
        bad.contains("verdict: approved or changes_requested") && bad.contains("summary"),
        "{bad}"
    );
    assert!(
        record(&s, "review-submit-1.txt").contains("submitted a verdict (changes_requested, 1"),
        "{}",
        record(&s, "review-submit-1.txt")
    );
    // A review run submits once.
    assert!(
        record(&s, "review-again-1.txt").contains("already submitted"),
        "{}",
        record(&s, "review-again-1.txt")
    );
    // The reviewer read the pull request's head, read-only, and opened
    // nothing.
    assert_eq!(record(&s, "review-saw-1.txt"), "fixed\n");
    assert_eq!(record(&s, "review-wrote.txt"), "", "read-only workspace");
    assert!(
        record(&s, "review-pr.txt").contains("only a work run"),
        "{}",
        record(&s, "review-pr.txt")
    );
    let p1 = record(&s, "review-prompt-1.txt");
    assert!(
        p1.starts_with("You are a review run of lab") && p1.contains("+fixed"),
        "{p1}"
    );
    let p2 = record(&s, "review-prompt-2.txt");
    assert!(p2.contains("WHY.md") && p2.contains("+why"), "{p2}");

    // The findings went to the work run's own session as the next round.
    let round = record(&s, "round-prompt.txt");
    assert!(
        round.starts_with("lab: your pull request needs another round (round 2 of 3)")
            && round.contains("[blocking] FIX.md:1: Add WHY.md")
            && round.contains("Say why."),
        "{round}"
    );

    let all = reviews(&s, n).await;
    let verdicts: Vec<(&str, i64)> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["verdict"].as_str().unwrap(), r["round"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        verdicts,
        [("changes_requested", 1), ("approved", 2)],
        "{all}"
    );
    assert_ne!(all[0]["head"], all[1]["head"], "{all}");
    let runs = s.get("/api/v1/runs?kind=review").await.ok();
    assert_eq!(runs.as_array().map(Vec::len), Some(2), "{runs}");
    for r in runs.as_array().unwrap() {
        assert_eq!(
            (&r["stop_cause"], &r["sandboxed"]),
            (&json!("reviewed"), &json!(true)),
            "{r}"
        );
    }
    let work = s.get("/api/v1/runs?kind=afk").await.ok();
    assert_eq!(work.as_array().map(Vec::len), Some(1), "{work}");
    // The receipt counts each verdict; a round names the review.
    let receipt = s
        .get(&format!("/api/v1/runs/{}/receipt", work[0]["id"]))
        .await
        .ok();
    let counted: Vec<(Value, Value, Value)> = receipt["reviews"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["verdict"].clone(),
                r["blocking"].clone(),
                r["advisory"].clone(),
            )
        })
        .collect();
    assert_eq!(
        counted,
        [
            (json!("changes_requested"), json!(1), json!(0)),
            (json!("approved"), json!(0), json!(1))
        ],
        "{receipt}"
    );
    assert_eq!(receipt["rounds"][1]["cause"], "review", "{receipt}");
    // labctl and the pull request's page list each verdict (issue 40 §8).
    let run = work[0]["id"].as_i64().unwrap();
    let (_, out, pr_page) = crate::receipt::read_back(&s, run).await;
    for said in [&out, &pr_page] {
        assert!(
            said.contains("changes_requested by run ") && said.contains("(1 blocking, 0 advisory)"),
            "{said}"
        );
        assert!(said.contains("(0 blocking, 1 advisory)"), "{said}");
    }

    // The issue's page shows the verdicts; the issue's comments never
    // carry the reviewer's words.
    let i = s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok();
    assert!(!i["comments"].to_string().contains("Add WHY.md"), "{i}");
    let cookie = crate::pages_input::session(&s).await;
    let page = |path: String| {
        let cookie = cookie.clone();
        let s = &s;
        async move {
            crate::pages_input::visit(s, &cookie, Method::GET, &path)
                .await
                .text()
                .await
                .unwrap()
        }
    };
    let issue_page = page(format!("/repos/r/issues/{n}")).await;
    assert!(
        issue_page.contains("id=\"reviews\"")
            && issue_page.contains("changes_requested")
            && issue_page.contains("Add WHY.md")
            && issue_page.contains("Good now."),
        "{issue_page}"
    );
    // labctl prints the reviewer's words inert: its escapes shown, not sent.
    let listed = crate::labctl::ok(&crate::labctl::labctl(
        &s,
        &["review", "list", &n.to_string(), "--repo", "r"],
    ));
    assert!(
        listed.contains("Good now.\\x1b]0;owned\\x07") && !listed.contains('\u{1b}'),
        "{listed:?}"
    );
    // The built-in pull request's page shows them too.
    let pull_page = page(format!("/repos/r/pulls/{}", c["pr_number"])).await;
    assert!(
        pull_page.contains("id=\"reviews\"") && pull_page.contains("Good now."),
        "{pull_page}"
    );
}

async fn a_verdict_refused_twice_needs_a_person(b: Backend) {
    let s = TestServer::start(b).await;
    afk_repo(&s, "r").await;
    s.patch("/api/v1/repos/r", json!({"knobs": {"review": "on"}}))
        .await
        .ok();
    behave(&s, &agent(REFUSED_TWICE));
    let n = issue(&s, "r", "Review me badly").await;

    let c = outcome(&s, "r", n, 90).await;
    assert_eq!(c["outcome"], "needs-human", "{c}");
    let detail = c["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("review: its review run's verdict was refused twice"),
        "{c}"
    );
    let bad = record(&s, "bad-1.txt");
    assert!(bad.contains("findings[0].path"), "{bad}");
    assert_eq!(reviews(&s, n).await, json!([]));
    // Nothing the reviewer wrote reaches the issue.
    let i = s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok();
    assert!(!i.to_string().contains("SECRET-WORDS"), "{i}");
    let runs = crate::support::wait::until(
        "the reviewer stopped",
        crate::support::wait::secs(10).every_ms(100),
        async || {
            let r = s.get("/api/v1/runs?kind=review").await.ok();
            (r[0]["state"] == "stopped").then_some(r.clone()).ok_or(r)
        },
    )
    .await;
    assert_eq!(runs[0]["stop_cause"], "reviewed", "{runs}");
    // The work run says why its issue needs a person.
    let work = s.get("/api/v1/runs?kind=afk").await.ok();
    assert!(
        work[0]["state_reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("review: its review run's verdict was refused twice"),
        "{work}"
    );
}

/// On a forge: the same two reviews; each verdict is one comment of lab's
/// on the pull request, with the counts and where to read it, never the
/// reviewer's words; the resumed round's head is pushed and reviewed.
async fn a_forge_pull_request_hears_lab_s_words_on_each_verdict(b: Backend) {
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Gitea).await;
    f.fake.state.lock().unwrap().ci.all = Some("success".into());
    // Every repo's issues are reviewed (set before the repo takes issues).
    s.patch("/api/v1/settings", json!({"knobs": {"review": "on"}}))
        .await
        .ok();
    let (bare, n) =
        crate::forges::follow::setup(&s, &f, Flavor::Gitea, &agent(CHANGES_THEN_APPROVAL)).await;
    let c = outcome(&s, "r", n, 90).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    assert_eq!(c["rounds"], 2, "{c}");
    let pr = c["pr_number"].as_i64().unwrap();
    // Posted as review comments by lab's account, and never read back as
    // a person's review (the second round came from the review run only).
    let said: Vec<String> = f
        .fake
        .state
        .lock()
        .unwrap()
        .reviews
        .iter()
        .filter(|(k, r)| *k == pr && r["user"]["login"] == "lab-bot" && r["state"] == "COMMENT")
        .map(|(_, r)| r["body"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(
        said[0].contains("asked for changes on")
            && said[0].contains("1 blocking and 0 advisory finding(s)")
            && said[1].contains("approved")
            && said[1].contains(&format!("/repos/r/issues/{n}")),
        "{said:?}"
    );
    assert!(
        !said
            .iter()
            .any(|b| b.contains("Add WHY.md") || b.contains("Say why")),
        "{said:?}"
    );
    // The round's commit reached the forge's branch, and was reviewed.
    let runs = s.get("/api/v1/runs?kind=afk").await.ok();
    let files = crate::support::git::git(
        &bare,
        &[
            "ls-tree",
            "--name-only",
            runs[0]["branch"].as_str().unwrap(),
        ],
    );
    assert!(files.contains("WHY.md"), "{files}");
    assert!(record(&s, "review-prompt-2.txt").contains("+why"));
    s.stop().await;
}
