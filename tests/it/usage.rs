//! Usage: a run's tokens, turns and cost, read from its CLI's transcript
//! (written here by the fake agent in the real CLIs' formats, see
//! `tests/fixtures/` and `src/usage/`), shown in the run's body; the read
//! goes on from its stored offset, across a restart, counting nothing twice.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::on_both;
use crate::support::{Backend, TestServer, id};

/// A Claude Code transcript line of an API message (`message.usage` as the
/// Messages API and Claude Code 2.1.332 write it).
pub(crate) fn assistant(msg: &str, input: u64, output: u64, read: u64, written: u64) -> String {
    json!({
        "parentUuid": null, "isSidechain": false, "userType": "external",
        "cwd": "/w", "sessionId": "s", "version": "2.1.332", "type": "assistant",
        "uuid": format!("u-{msg}-{output}"), "timestamp": "2026-12-01T10:00:00Z",
        "requestId": format!("req_{msg}"),
        "message": {
            "id": msg, "type": "message", "role": "assistant",
            // What the pinned Claude Code calls "sonnet".
            "model": "claude-sonnet-5-5",
            "content": [{"type": "text", "text": "working"}],
            "stop_reason": null, "stop_sequence": null,
            "usage": {
                "input_tokens": input, "output_tokens": output,
                "cache_read_input_tokens": read, "cache_creation_input_tokens": written,
                "service_tier": "standard"
            }
        }
    })
    .to_string()
}

pub(crate) fn prompt(text: &str) -> String {
    json!({
        "parentUuid": null, "isSidechain": false, "userType": "external",
        "cwd": "/w", "sessionId": "s", "version": "2.1.332", "type": "user",
        "uuid": format!("p-{text}"), "timestamp": "2026-12-01T10:00:00Z",
        "message": {"role": "user", "content": text}
    })
    .to_string()
}

/// The usage of a run body as (input, output, cache read, cache creation,
/// turns, cost in billionths of a dollar).
fn usage(run: &Value) -> Option<(i64, i64, i64, i64, i64, Option<i64>)> {
    let u = run.get("usage").filter(|u| !u.is_null())?;
    let n = |k: &str| u[k].as_i64().unwrap_or(-1);
    Some((
        n("input_tokens"),
        n("output_tokens"),
        n("cache_read_tokens"),
        n("cache_creation_tokens"),
        n("turns"),
        u["cost_usd"].as_f64().map(|c| (c * 1e9).round() as i64),
    ))
}

async fn wait_usage(
    s: &TestServer,
    run: i64,
    want: (i64, i64, i64, i64, i64, Option<i64>),
) -> Value {
    s.wait_run(run, 20, |r| usage(r) == Some(want)).await
}

fn append(path: &std::path::Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// The fake agent writes its transcript where Claude Code 2.1.332 would:
/// `<config dir>/projects/<cwd, non-alphanumerics as '-'>/<--session-id>.jsonl`.
async fn a_claude_transcript_is_the_runs_usage_read_once(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let lines = s.tmp().join("transcript.jsonl");
    std::fs::write(
        &lines,
        format!(
            "{}\n{}\n",
            prompt("go"),
            assistant("msg_A", 10, 20, 100, 1000)
        ),
    )
    .unwrap();
    let script = s.tmp().join("claude.sh");
    std::fs::write(
        &script,
        format!(
            "d=\"$HOME/.claude/projects/$(pwd | sed 's/[^a-zA-Z0-9]/-/g')\"\n\
             mkdir -p \"$d\" && cp {} \"$d/$FAKE_SESSION_ID.jsonl\"\n\
             echo \"$d/$FAKE_SESSION_ID.jsonl\" > \"$FAKE_REC/transcript\"\n\
             while :; do sleep 1; done\n",
            lines.display()
        ),
    )
    .unwrap();
    let run = s
        .start_run("r", &format!("FAKE_RUN={}", script.display()))
        .await;
    let rid = id(&run);
    // lab chose the session id before the start, and gave it to the CLI.
    let session = run["cli_session_id"]
        .as_str()
        .expect("a session id")
        .to_owned();
    assert_eq!(session.len(), 36, "{session}");
    let argv = s.record(rid, "argv").await;
    let argv: Vec<&[u8]> = argv.split(|&b| b == 0).collect();
    let at = argv
        .iter()
        .position(|a| *a == b"--session-id")
        .expect("--session-id");
    assert_eq!(argv[at + 1], session.as_bytes());

    // Sonnet 5.5: $2 in, $10 out, $0.10 read, $2.50 written (5 minutes).
    let cost = |i: i64, o: i64, r: i64, w: i64| i * 2000 + o * 10000 + r * 100 + w * 2500;
    wait_usage(
        &s,
        rid,
        (10, 20, 100, 1000, 1, Some(cost(10, 20, 100, 1000))),
    )
    .await;
    let transcript = String::from_utf8(s.record(rid, "transcript").await).unwrap();
    let transcript = std::path::PathBuf::from(transcript.trim());

    // Half a line is not read; once whole, the message it repeats (the same
    // message.id, its last line) replaces what was counted for it.
    let more = assistant("msg_A", 10, 50, 100, 1000);
    let (head, tail) = more.split_at(40);
    append(&transcript, head);
    s.after_usage_reads(rid, 2).await;
    let r = s.get(&format!("/api/v1/runs/{rid}")).await.ok();
    assert_eq!(
        usage(&r),
        Some((10, 20, 100, 1000, 1, Some(cost(10, 20, 100, 1000))))
    );
    append(&transcript, &format!("{tail}\n{}\n", prompt("more")));
    wait_usage(
        &s,
        rid,
        (10, 50, 100, 1000, 2, Some(cost(10, 50, 100, 1000))),
    )
    .await;

    // After a restart, the read goes on from its offset: nothing twice.
    let s = s.restart().await;
    append(
        &transcript,
        &format!("{}\n", assistant("msg_B", 1, 1, 0, 0)),
    );
    let want = (11, 51, 100, 1000, 2, Some(cost(11, 51, 100, 1000)));
    wait_usage(&s, rid, want).await;
    s.after_usage_reads(rid, 2).await;
    let r = s.get(&format!("/api/v1/runs/{rid}")).await.ok();
    assert_eq!(usage(&r), Some(want), "{r}");
    let listed = s.get("/api/v1/runs").await.ok();
    let listed = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|x| id(x) == rid)
        .cloned()
        .unwrap();
    assert_eq!(usage(&listed), Some(want));
    assert_eq!(listed["cli_session_id"], session.as_str());

    // A model lab has no price for: its tokens are counted apart, and the
    // cost of the rest stays known (a budget still applies to it).
    let unknown =
        assistant("msg_C", 7, 3, 0, 0).replace("claude-sonnet-5-5", "claude-unheard-of-9");
    append(&transcript, &format!("{unknown}\n"));
    let want = (18, 54, 100, 1000, 2, Some(cost(11, 51, 100, 1000)));
    let r = wait_usage(&s, rid, want).await;
    assert_eq!(r["usage"]["unpriced_tokens"], 10, "{r}");

    // labctl shows it: a compact column in ps, every count in show.
    use crate::labctl::{labctl, ok};
    let ps = ok(&labctl(&s, &["ps"]));
    assert!(ps.contains("TOKENS/COST"), "{ps}");
    assert!(ps.contains("1.2k/$0.00"), "{ps}");
    let show = ok(&labctl(&s, &["show", &rid.to_string()]));
    for line in [
        format!("cli session    {session}"),
        "input tokens   18".to_owned(),
        "output tokens  54".to_owned(),
        "cache read     100".to_owned(),
        "cache written  1000".to_owned(),
        "turns          2".to_owned(),
        "cost           $0.0030".to_owned(),
        "unpriced       10 tokens of models lab has no price for (not in the cost)".to_owned(),
    ] {
        assert!(show.contains(&line), "{line:?} missing from:\n{show}");
    }

    // And the run page.
    use crate::pages_input::{session as browser, visit};
    let cookie = browser(&s).await;
    let page = visit(&s, &cookie, reqwest::Method::GET, &format!("/runs/{rid}"))
        .await
        .text()
        .await
        .unwrap();
    for html in [
        format!("<dd class=\"mono\">{session}</dd>"),
        "<dt>output tokens</dt><dd>54</dd>".to_owned(),
        "<dt>unpriced</dt><dd>10 tokens of models lab has no price for (not in the cost)</dd>"
            .to_owned(),
        "<dt>turns</dt><dd>2</dd>".to_owned(),
        "<dt>cost</dt><dd>$0.0030</dd>".to_owned(),
    ] {
        assert!(page.contains(&html), "{html:?} missing from the run page");
    }
    s.stop().await;
}

/// Adds a local repo `name` whose runs use Codex.
pub(crate) async fn codex_repo(s: &TestServer, name: &str) {
    let path = crate::support::git::init_repo(&s.tmp(), name);
    s.post(
        "/api/v1/repos",
        json!({"name": name, "path": path, "provider": "codex"}),
    )
    .await
    .expect(201);
}

/// A script for the fake agent (`FAKE_RUN=<it>`) that writes a Codex
/// rollout of session `sid` for its working directory, under
/// `$HOME/.codex/sessions/YYYY/MM/DD/` (its `session_meta`, then the lines of
/// `rest` when given), then stays.
pub(crate) fn codex_rollout_script(s: &TestServer, sid: &str, rest: Option<&Path>) -> PathBuf {
    let script = s.tmp().join(format!("codex-{sid}.sh"));
    let rest = rest
        .map(|r| format!("cat {} >> \"$f\"\n", r.display()))
        .unwrap_or_default();
    std::fs::write(
        &script,
        format!(
            "d=\"$HOME/.codex/sessions/$(date -u +%Y/%m/%d)\"\n\
             mkdir -p \"$d\"\n\
             f=\"$d/rollout-$(date -u +%Y-%m-%dT%H-%M-%S)-{sid}.jsonl\"\n\
             printf '{{\"timestamp\":\"t\",\"type\":\"session_meta\",\"payload\":{{\"id\":\"{sid}\",\"timestamp\":\"2026-12-01T10:00:00.120Z\",\"cwd\":\"%s\",\"originator\":\"codex_cli_rs\",\"cli_version\":\"0.171.0\"}}}}\\n' \"$(pwd)\" > \"$f\"\n\
             {rest}\
             while :; do sleep 1; done\n"
        ),
    )
    .unwrap();
    script
}

/// A Codex rollout is found by its working directory under
/// `$CODEX_HOME/sessions/YYYY/MM/DD/`; its session id becomes the run's.
async fn a_codex_rollout_is_found_by_its_folder(b: Backend) {
    let s = TestServer::start(b).await;
    codex_repo(&s, "c").await;
    let rest = s.tmp().join("rollout-rest.jsonl");
    std::fs::write(
        &rest,
        concat!(
            r#"{"timestamp":"2026-12-01T10:00:00.131Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t1","started_at":1796127257,"model_context_window":475000}}"#,
            "\n",
            r#"{"timestamp":"2026-12-01T10:00:00.132Z","type":"turn_context","payload":{"cwd":"/w","approval_policy":"never","sandbox_policy":{"type":"workspace-write"},"model":"gpt-5-codex","effort":"high","summary":"auto"}}"#,
            "\n",
            r#"{"timestamp":"2026-12-01T10:00:03.010Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1000,"cached_input_tokens":600,"output_tokens":50,"reasoning_output_tokens":20,"total_tokens":1050},"last_token_usage":{"input_tokens":1000,"cached_input_tokens":600,"output_tokens":50,"reasoning_output_tokens":20,"total_tokens":1050},"model_context_window":272000},"rate_limits":null}}"#,
            "\n"
        ),
    )
    .unwrap();
    let sid = "019ad5c2-7f3e-7a10-b6c4-5e2f9d8a1b37";
    let script = codex_rollout_script(&s, sid, Some(&rest));
    let run = s
        .start_run("c", &format!("FAKE_RUN={}", script.display()))
        .await;
    let rid = id(&run);
    assert!(run["cli_session_id"].is_null(), "{run}");
    // gpt-5-codex: $1.25 in, $0.125 cached, $10 out.
    let r = wait_usage(
        &s,
        rid,
        (
            400,
            50,
            600,
            0,
            1,
            Some(400 * 1250 + 600 * 125 + 50 * 10000),
        ),
    )
    .await;
    assert_eq!(r["cli_session_id"], sid);
    s.stop().await;
}

on_both!(
    a_claude_transcript_is_the_runs_usage_read_once,
    a_codex_rollout_is_found_by_its_folder
);

/// The body says `null` until the transcript is found (the fake agent that
/// writes none).
async fn usage_is_null_until_known(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.working_run("r").await;
    let rid = id(&run);
    // Two reads of its (missing) transcript.
    s.after_usage_reads(rid, 2).await;
    let r = s.get(&format!("/api/v1/runs/{rid}")).await.ok();
    assert!(r["usage"].is_null(), "{r}");
    assert!(r["cli_session_id"].is_string(), "{r}");
    s.stop().await;
}

on_both!(usage_is_null_until_known);

/// The AFK ledger adds the runs' tokens and cost per outcome and per
/// model/effort, and says what a resolved issue costs; a run whose model
/// has no price makes its groups' cost unknown, not smaller.
async fn the_ledger_counts_tokens_and_cost(b: Backend) {
    use lab::domain::Usage;
    use lab::store::{ClaimResult, UsageRead};
    let (store, _d) = crate::store::open(&b).await;
    let repo = store
        .create_repo(&crate::store::new_repo("a"))
        .await
        .unwrap();
    // (issue, model, outcome, tokens in, cost in billionths; None: unpriced)
    let runs: [(i64, &str, &str, i64, Option<i64>); 9] = [
        (1, "sonnet", "pr-green", 1000, Some(2_000_000_000)),
        (2, "sonnet", "failed", 500, Some(1_000_000_000)),
        (3, "sonnet", "pr-green", 300, Some(1_000_000_000)),
        (4, "fable", "pr-green", 700, None),
        (5, "sonnet", "", 0, Some(0)),
        // Its transcript was never found (the pass read it a last time).
        (6, "opus", "failed", 0, Some(0)),
        // Merged: one ended by its merge, one merged on lab's page after it
        // ended green; a failed attempt's cost counts too.
        (7, "haiku", "pr-merged", 100, Some(1_000_000_000)),
        (8, "haiku", "pr-green", 100, Some(1_000_000_000)),
        (9, "haiku", "failed", 100, Some(1_000_000_000)),
    ];
    for (issue, model, outcome, tokens, cost) in runs {
        let ClaimResult::Claimed(c) = store
            .claim_issue(repo.id, "a", issue, "n", 9, 9, lab::store::now_ms())
            .await
            .unwrap()
        else {
            panic!("issue {issue} not claimed");
        };
        let run = 100 + issue;
        store.attach_run(c.id, run, model, "high").await.unwrap();
        if !outcome.is_empty() {
            assert!(
                store
                    .finish_claim(c.id, outcome.parse().unwrap(), "")
                    .await
                    .unwrap()
            );
        }
        let mut read = UsageRead {
            transcript: (issue != 6).then(|| format!("/t/{run}.jsonl")),
            done: issue == 6,
            ..UsageRead::default()
        };
        read.tally.usage = Usage {
            input_tokens: tokens - tokens / 10,
            output_tokens: tokens / 10,
            cost_nano_usd: cost,
            ..Usage::default()
        };
        store.save_usage_read(run, &read).await.unwrap();
        if issue == 8 {
            let url = |n: i64| format!("/repos/a/pulls/{n}");
            let pull = store
                .create_pull(
                    repo.id,
                    &lab::store::NewPullRow {
                        title: "t",
                        body: "",
                        head: "lab/8",
                        base: "main",
                        issue: Some(8),
                        run_id: Some(run),
                        url: &url,
                    },
                )
                .await
                .unwrap();
            assert!(
                store
                    .set_pull_merged(repo.id, pull.number, "s", "b", "h")
                    .await
                    .unwrap()
            );
        }
    }
    let l = lab::service::afk::ledger(&store).await.unwrap();
    let sonnet = l
        .by_model
        .iter()
        .find(|r| r.model.as_deref() == Some("sonnet"))
        .unwrap();
    assert_eq!((sonnet.runs, sonnet.succeeded, sonnet.tokens), (4, 2, 1800));
    assert_eq!(sonnet.cost_usd, Some(4.0));
    assert_eq!(sonnet.cost_per_success_usd, Some(2.0));
    assert_eq!((sonnet.merged, sonnet.cost_per_merged_usd), (0, None));
    let haiku = l
        .by_model
        .iter()
        .find(|r| r.model.as_deref() == Some("haiku"))
        .unwrap();
    assert_eq!((haiku.runs, haiku.merged), (3, 2));
    assert_eq!(haiku.cost_per_merged_usd, Some(1.5));
    let fable = l
        .by_model
        .iter()
        .find(|r| r.model.as_deref() == Some("fable"))
        .unwrap();
    assert_eq!(
        (fable.tokens, fable.cost_usd, fable.cost_per_success_usd),
        (700, None, None)
    );
    let outcome = |o: Option<&str>| {
        let r = l
            .by_outcome
            .iter()
            .find(|r| r.outcome.as_deref() == o)
            .unwrap_or_else(|| panic!("no {o:?} row in {:?}", l.by_outcome));
        (r.runs, r.tokens, r.cost_usd)
    };
    assert_eq!(outcome(Some("pr-green")), (4, 2100, None));
    assert_eq!(outcome(Some("failed")), (3, 600, Some(2.0)));
    assert_eq!(outcome(Some("pr-merged")), (1, 100, Some(1.0)));
    let opus = l
        .by_model
        .iter()
        .find(|r| r.model.as_deref() == Some("opus"))
        .unwrap();
    assert_eq!((opus.runs, opus.tokens, opus.cost_usd), (1, 0, None));
    assert_eq!(outcome(None), (1, 0, Some(0.0)));
    assert_eq!(l.by_outcome.len(), 4);
    assert_eq!(l.by_repo[0].runs, 9);
    assert_eq!(l.by_repo[0].tokens, 2800);
    assert_eq!(l.by_repo[0].merged, 2);
    assert_eq!(l.by_repo[0].cost_usd, None);
    // The ledger outlives the runs' rows: usage is kept by run id.
    assert_eq!(
        store.afk_ledger(lab::store::LedgerBy::Repo).await.unwrap()[0].tokens,
        2800
    );
}

on_both!(the_ledger_counts_tokens_and_cost);

/// The agent can write its CLI's folder: a transcript it links to a file
/// elsewhere (or a project folder it links elsewhere) is not read.
async fn a_transcript_through_a_link_is_not_read(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let elsewhere = s.tmp().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(
        elsewhere.join("t.jsonl"),
        format!("{}\n{}\n", prompt("go"), assistant("msg_A", 10, 20, 0, 0)),
    )
    .unwrap();
    for (name, link) in [
        // The file is a link.
        (
            "file.sh",
            "mkdir -p \"$d\" && ln -s {e}/t.jsonl \"$d/$FAKE_SESSION_ID.jsonl\"",
        ),
        // The project folder is a link to a folder holding the session.
        (
            "dir.sh",
            "mkdir -p \"$(dirname \"$d\")\" && ln -s {e} \"$d\" && \
             ln -s t.jsonl {e}/$FAKE_SESSION_ID.jsonl 2>/dev/null; true",
        ),
    ] {
        let script = s.tmp().join(name);
        std::fs::write(
            &script,
            format!(
                "d=\"$HOME/.claude/projects/$(pwd | sed 's/[^a-zA-Z0-9]/-/g')\"\n{}\n\
                 echo done > \"$FAKE_REC/linked\"\nwhile :; do sleep 1; done\n",
                link.replace("{e}", &elsewhere.display().to_string())
            ),
        )
        .unwrap();
        let run = s
            .start_run("r", &format!("FAKE_RUN={}", script.display()))
            .await;
        let rid = id(&run);
        s.record(rid, "linked").await;
        s.after_usage_reads(rid, 2).await;
        let r = s.get(&format!("/api/v1/runs/{rid}")).await.ok();
        assert!(
            usage(&r).is_none_or(|u| u.0 == 0 && u.1 == 0 && u.4 == 0),
            "{name}: {r}"
        );
    }
    s.stop().await;
}

on_both!(a_transcript_through_a_link_is_not_read);
