//! The plan phase (issue 28 §2), with a fake agent that plans: an issue
//! whose `plan` is `on` gets a planning run on a read-only workspace; its
//! plan waits for a person; a rejection sends the same session back with
//! the reason, an approval starts the work run with the plan in its
//! prompt. Rejections past `afk.max_plan_rounds` leave the issue to a
//! person.

use reqwest::Method;
use serde_json::{Value, json};

use crate::afk::{afk_repo, behave, issue, outcome};
use crate::afk_follow::STOP;
use crate::on_both;
use crate::support::{Backend, TestServer, wait};

on_both!(
    a_plan_is_rejected_then_approved_and_the_work_follows_it,
    rejections_past_the_plan_rounds_need_a_person,
    a_writer_s_forge_comment_decides_the_plan,
    a_review_run_judges_the_plan_when_it_is_auto,
);

/// What the fake agent does: as a planning run, tries to write (and
/// says whether it could), submits plan N (N: how many times it planned),
/// records the prompt it got, and ends its turn; as the work run, tries to
/// submit a plan too (refused), then commits and opens its pull request.
pub(crate) fn planner() -> String {
    format!(
        r#"{STOP}
if [ "$LAB_RUN_KIND" = plan ]; then
  n=1; [ -e "$FAKE_REC/../planned-1" ] && n=2
  touch "$FAKE_REC/../planned-$n"
  printf '%s' "$FAKE_PROMPT" > "$FAKE_REC/../plan-prompt-$n.txt"
  if touch wrote-in-plan 2>/dev/null; then echo yes > "$FAKE_REC/../plan-wrote.txt"; fi
  printf 'Plan %s: change FIX.md and test it.\n' "$n" | labctl plan submit --file - \
    > "$FAKE_REC/../submit-$n.txt" 2>&1 || exit 9
  labctl pr create --title Early --body no > "$FAKE_REC/../plan-pr.txt" 2>&1
  stop
  while :; do sleep 1; done
fi
echo 'Not a plan' | labctl plan submit --file - > "$FAKE_REC/../work-submit.txt" 2>&1
echo fixed > FIX.md && git add FIX.md \
  && git -c user.name=a -c user.email=a@example.com commit -qm fix || exit 8
labctl pr create --title Fix --body 'Resolves' || exit 7
"#
    )
}

async fn plans(s: &TestServer, n: i64) -> Value {
    s.get(&format!("/api/v1/repos/r/issues/{n}/plans"))
        .await
        .ok()
}

/// Waits until plan `version` of issue `n` is proposed and its planning
/// run was stopped for it (the claim waits for a decision).
async fn waiting(s: &TestServer, n: i64, version: i64) -> Value {
    wait::until(
        format!("plan {version} of issue {n} to wait for a decision"),
        wait::secs(30).every_ms(100),
        async || {
            let all = plans(s, n).await;
            let last = all.as_array().and_then(|a| a.last()).cloned();
            let run = s.get("/api/v1/runs?kind=plan").await.ok();
            let stopped = run[0]["state"] == "stopped";
            match last {
                Some(p) if p["version"] == version && p["state"] == "proposed" && stopped => Ok(p),
                _ => Err(json!({"plans": all, "runs": run})),
            }
        },
    )
    .await
}

fn record(s: &TestServer, name: &str) -> String {
    std::fs::read_to_string(s.tmp().join("records").join(name)).unwrap_or_default()
}

async fn a_plan_is_rejected_then_approved_and_the_work_follows_it(b: Backend) {
    let s = TestServer::start(b).await;
    afk_repo(&s, "r").await;
    s.patch("/api/v1/repos/r", json!({"knobs": {"plan": "on"}}))
        .await
        .ok();
    behave(&s, &planner());
    let n = issue(&s, "r", "Plan first").await;

    let v1 = waiting(&s, n, 1).await;
    assert_eq!(v1["text"], "Plan 1: change FIX.md and test it.", "{v1}");
    let planning = s.get("/api/v1/runs?kind=plan").await.ok();
    assert_eq!(planning.as_array().map(Vec::len), Some(1), "{planning}");
    assert_eq!(planning[0]["kind"], "plan", "{planning}");
    assert_eq!(planning[0]["stop_cause"], "planned", "{planning}");
    assert_eq!(planning[0]["phase"], "plan-review", "{planning}");
    assert!(
        record(&s, "submit-1.txt").contains("submitted plan version 1"),
        "{}",
        record(&s, "submit-1.txt")
    );
    assert_eq!(planning[0]["sandboxed"], true, "{planning}");
    assert_eq!(
        record(&s, "plan-wrote.txt"),
        "",
        "the workspace is read-only"
    );
    assert!(
        record(&s, "plan-pr.txt").contains("only a work run (AFK or manual) opens a pull request"),
        "{}",
        record(&s, "plan-pr.txt")
    );
    let prompt = record(&s, "plan-prompt-1.txt");
    assert!(
        prompt.starts_with("You are a planning run of lab"),
        "{prompt}"
    );
    // Nothing works on the issue until a person decides.
    let afk_runs = s.get("/api/v1/runs?kind=afk").await.ok();
    assert_eq!(afk_runs.as_array().map(Vec::len), Some(0), "{afk_runs}");
    // The issue is told a version waits and where; never the plan's text.
    let i = s.get(&format!("/api/v1/repos/r/issues/{n}")).await.ok();
    let said = i["comments"].to_string();
    assert!(
        said.contains("plan version 1") && !said.contains("FIX.md"),
        "{said}"
    );

    // Bad decisions are refused and change nothing.
    let e = s
        .post(
            &format!("/api/v1/repos/r/issues/{n}/plan/reject"),
            json!({"reason": "  "}),
        )
        .await
        .expect(400);
    assert!(e["error"]["message"].to_string().contains("reason"), "{e}");
    s.post("/api/v1/repos/r/issues/999/plan/approve", json!({}))
        .await
        .expect(409);
    assert_eq!(plans(&s, n).await[0]["state"], "proposed");

    // The comment's labctl line works as printed (issue 40 §9).
    let comment = i["comments"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["body"].as_str())
        .find(|b| b.contains("plan version 1"))
        .expect("the plan comment")
        .to_owned();
    let line = comment
        .split('`')
        .find(|part| part.starts_with("labctl plan reject "))
        .expect("a labctl reject line")
        .replace("<why>", "Also update the docs");
    let labctl = std::path::Path::new(env!("CARGO_BIN_EXE_labctl"));
    let out = std::process::Command::new("sh")
        .args(["-c", &line])
        .env(
            "PATH",
            format!(
                "{}:{}",
                labctl.parent().unwrap().display(),
                std::env::var("PATH").unwrap()
            ),
        )
        .env("LAB_URL", &s.url)
        .env_remove("LAB_TOKEN")
        .env("LAB_DATA_DIR", s.data_dir())
        .env("LABCTL_CONFIG", s.tmp().join("labctl.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{line}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let rejected = &plans(&s, n).await[0];
    assert_eq!(
        (&rejected["state"], &rejected["by"]),
        (&json!("rejected"), &json!("operator"))
    );
    assert!(
        comment.contains(&format!("`labctl plan approve {n} --repo r`")),
        "{comment}"
    );
    // The same planning run goes on, told why.
    let v2 = waiting(&s, n, 2).await;
    assert_eq!(v2["text"], "Plan 2: change FIX.md and test it.", "{v2}");
    let told = record(&s, "plan-prompt-2.txt");
    assert!(
        told.contains("plan version 1 was rejected by operator (plan round 2 of 3)")
            && told.contains("Also update the docs"),
        "{told}"
    );
    let planning = s.get("/api/v1/runs?kind=plan").await.ok();
    assert_eq!(planning.as_array().map(Vec::len), Some(1), "{planning}");

    // The issue's page shows both versions, and a person approves the one
    // waiting there.
    let cookie = crate::pages_input::session(&s).await;
    let path = format!("/repos/r/issues/{n}");
    let page = crate::pages_input::visit(&s, &cookie, Method::GET, &path)
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("id=\"plan-1\"")
            && page.contains("Also update the docs")
            && page.contains("Plan 2: change FIX.md")
            && page.contains("id=\"plan-approve\""),
        "{page}"
    );
    let csrf = crate::pages_input::csrf_of(&page);
    let r = crate::issue_pages::post_form(
        &s,
        &cookie,
        &format!("{path}/plan-approve"),
        &format!("csrf={csrf}"),
    )
    .await;
    assert_eq!(r.status(), 303);
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    let work = s.get("/api/v1/runs?kind=afk").await.ok();
    assert_eq!(work.as_array().map(Vec::len), Some(1), "{work}");
    let prompt = work[0]["prompt"].as_str().unwrap_or_default().to_owned();
    assert!(
        prompt
            .contains("Follow the plan approved for this issue (version 2, approved by operator)")
            && prompt.contains("Plan 2: change FIX.md"),
        "{prompt}"
    );
    // The work run's token cannot submit a plan.
    assert!(
        record(&s, "work-submit.txt").contains("not a live planning run"),
        "{}",
        record(&s, "work-submit.txt")
    );
    let all = plans(&s, n).await;
    let states: Vec<(&Value, &Value, &Value)> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (&p["version"], &p["state"], &p["by"]))
        .collect();
    assert_eq!(
        states,
        [
            (&json!(1), &json!("rejected"), &json!("operator")),
            (&json!(2), &json!("approved"), &json!("operator"))
        ]
    );
    assert_eq!(all[0]["reason"], "Also update the docs");
    // The receipt says which version the work followed and who approved it.
    let id = work[0]["id"].as_i64().unwrap();
    let receipt = s.get(&format!("/api/v1/runs/{id}/receipt")).await.ok();
    assert_eq!(receipt["plan"]["version"], 2, "{receipt}");
    assert_eq!(receipt["plan"]["approved_by"], "operator", "{receipt}");
    assert_eq!(receipt["plan"]["rejected_versions"], 1, "{receipt}");
    // labctl and the pull request's page say it too (issue 40 §8).
    let (_, out, page) = crate::receipt::read_back(&s, id).await;
    let line = "version 2 approved by operator at ";
    assert!(
        out.lines()
            .any(|l| l.starts_with("plan") && l.contains(line))
            && out.contains("after 1 rejected version(s)"),
        "{out}"
    );
    assert!(page.contains(line), "{page}");
    s.stop().await;
}

async fn rejections_past_the_plan_rounds_need_a_person(b: Backend) {
    let s = TestServer::start(b).await;
    afk_repo(&s, "r").await;
    s.patch("/api/v1/settings", json!({"afk": {"max_plan_rounds": 1}}))
        .await
        .expect(200);
    behave(&s, &planner());
    // The issue asks for a plan: an issue may raise its repo's oversight.
    let n = s
        .post(
            "/api/v1/repos/r/issues",
            json!({"title": "Plan", "body": "please", "labels": ["ready-for-agent"],
                   "knobs": {"plan": "on"}}),
        )
        .await
        .expect(201)["number"]
        .as_i64()
        .unwrap();
    waiting(&s, n, 1).await;
    s.post(
        &format!("/api/v1/repos/r/issues/{n}/plan/reject"),
        json!({"reason": "Wrong approach"}),
    )
    .await
    .expect(200);
    let c = outcome(&s, "r", n, 30).await;
    assert_eq!(c["outcome"], "needs-human", "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap_or_default()
            .starts_with("plan rejected: Wrong approach"),
        "{c}"
    );
    let work = s.get("/api/v1/runs?kind=afk").await.ok();
    assert_eq!(work.as_array().map(Vec::len), Some(0), "{work}");
    // The planning run says why, too.
    let planning = s.get("/api/v1/runs?kind=plan").await.ok();
    assert!(
        planning[0]["state_reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("plan rejected: Wrong approach"),
        "{planning}"
    );
    s.stop().await;
}

/// On a forge, a `/lab reject <reason>` then a `/lab approve` comment by an
/// account that may write decide the plan; the same commands by a reader,
/// or inside a sentence, are not commands.
async fn a_writer_s_forge_comment_decides_the_plan(b: Backend) {
    use crate::support::forge::{FakeForge, Flavor};
    let s = TestServer::start(b).await;
    let f = FakeForge::start(Flavor::Gitea).await;
    f.fake.state.lock().unwrap().ci.all = Some("success".into());
    f.fake.state.lock().unwrap().writers = vec!["ana".into()];
    s.patch("/api/v1/settings", json!({"knobs": {"plan": "on"}}))
        .await
        .ok();
    let (_, n) = crate::forges::follow::setup(&s, &f, Flavor::Gitea, &planner()).await;
    waiting(&s, n, 1).await;
    f.add_conversation_comment(n, "bo", "/lab approve");
    f.add_conversation_comment(n, "ana", "I will /lab approve once it says more.");
    f.add_conversation_comment(n, "ana", "/lab reject Also update the docs.");
    waiting(&s, n, 2).await;
    let all = plans(&s, n).await;
    assert_eq!(
        (&all[0]["state"], &all[0]["by"], &all[0]["reason"]),
        (
            &json!("rejected"),
            &json!("ana"),
            &json!("Also update the docs.")
        ),
        "{all}"
    );
    // Commands posted before version 2 do not decide it.
    f.add_conversation_comment(n, "ana", "/lab approve");
    let c = outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    let all = plans(&s, n).await;
    assert_eq!(
        (&all[1]["state"], &all[1]["by"]),
        (&json!("approved"), &json!("ana")),
        "{all}"
    );
    s.stop().await;
}

/// `plan = auto`: a review run judges each version. It asks for changes to
/// version 1 (the planning run is told its summary and blocking findings)
/// and approves version 2; the work follows it.
async fn a_review_run_judges_the_plan_when_it_is_auto(b: Backend) {
    const REVIEWER: &str = r#"
if [ "$LAB_RUN_KIND" = review ]; then
  n=1; [ -e "$FAKE_REC/../plan-reviewed-1" ] && n=2
  touch "$FAKE_REC/../plan-reviewed-$n"
  printf '%s' "$FAKE_PROMPT" > "$FAKE_REC/../plan-review-prompt-$n.txt"
  if [ $n = 1 ]; then
    printf '{"verdict":"changes_requested","summary":"Test it too.","findings":[{"path":"FIX.md","line":1,"severity":"blocking","message":"Name the test."}]}' > /tmp/v.json
  else
    printf '{"verdict":"approved","summary":"Good plan."}' > /tmp/v.json
  fi
  labctl review submit --file /tmp/v.json > "$FAKE_REC/../plan-review-$n.txt" 2>&1
  stop
  while :; do sleep 1; done
fi
"#;
    let s = TestServer::start(b).await;
    afk_repo(&s, "r").await;
    s.patch("/api/v1/repos/r", json!({"knobs": {"plan": "auto"}}))
        .await
        .ok();
    let script = planner().replacen(
        "if [ \"$LAB_RUN_KIND\" = plan ]",
        &format!("{REVIEWER}\nif [ \"$LAB_RUN_KIND\" = plan ]"),
        1,
    );
    behave(&s, &script);
    let n = issue(&s, "r", "Plan, judged").await;
    let c = outcome(&s, "r", n, 90).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");

    let reviewers = s.get("/api/v1/runs?kind=review").await.ok();
    let ids: Vec<i64> = reviewers
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .rev()
        .collect();
    assert_eq!(ids.len(), 2, "{reviewers}");
    let all = plans(&s, n).await;
    assert_eq!(
        (&all[0]["state"], &all[0]["by"]),
        (&json!("rejected"), &json!(format!("review run {}", ids[0]))),
        "{all}"
    );
    let reason = all[0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("Test it too.") && reason.contains("FIX.md:1: Name the test."),
        "{all}"
    );
    assert_eq!(
        (&all[1]["state"], &all[1]["by"]),
        (&json!("approved"), &json!(format!("review run {}", ids[1]))),
        "{all}"
    );
    // The planning run was told the findings; the reviewer read the plan.
    assert!(record(&s, "plan-prompt-2.txt").contains("Name the test."));
    let judged = record(&s, "plan-review-prompt-1.txt");
    assert!(
        judged.starts_with("You are a review run of lab")
            && judged.contains("Plan 1: change FIX.md"),
        "{judged}"
    );
    let verdicts = s
        .get(&format!("/api/v1/repos/r/issues/{n}/reviews"))
        .await
        .ok();
    assert_eq!(
        (&verdicts[0]["head"], &verdicts[1]["head"]),
        (&json!("plan v1"), &json!("plan v2")),
        "{verdicts}"
    );
    let work = s.get("/api/v1/runs?kind=afk").await.ok();
    assert!(
        work[0]["prompt"]
            .as_str()
            .unwrap_or_default()
            .contains("approved by review run"),
        "{work}"
    );
    s.stop().await;
}
