//! The real CLIs in tmux, offline, with no account: a run reaches the CLI's
//! login screen and never stops at a trust, onboarding, bypass or migration
//! dialog; and lab shows the run as waiting, with the reason. And `lab
//! doctor` passes with them.

use std::collections::BTreeMap;

use lab::domain::RunKind;
use lab::run::LaunchRequest;
use lab::store::RepoKey;
use serde_json::json;

use crate::on_both;
use crate::support::{Backend, TestServer, real, wait};

/// Texts of the first-run dialogs lab must never let a run meet.
const DIALOGS: &[&str] = &[
    "Quick safety check",
    "Yes, I trust this folder",
    "Bypass Permissions mode",
    "Trust this folder?",
    "Trust and continue",
    "Try new model",
    "Choose the text style",
];

async fn reaches_login(b: Backend, provider: &'static str, kind: RunKind, login: &str) {
    let bin = real::cli(provider);
    let s = TestServer::start_tweaked(b, |cfg| {
        cfg.provider_bins
            .insert(provider.parse().unwrap(), bin.clone());
    })
    .await;
    s.add_repo("r").await;
    s.patch("/api/v1/repos/r", json!({"provider": provider}))
        .await
        .ok();
    // Make the AFK run use every unattended option, ultracode included.
    if kind == RunKind::Afk && provider == "claude-code" {
        s.patch(
            "/api/v1/settings",
            json!({"providers": {"claude-code": {"afk_options": {"ultracode": true}}}}),
        )
        .await
        .ok();
    }
    let (repo, global) = s
        .runner()
        .store()
        .repo_with_global(&RepoKey::Name("r".into()))
        .await
        .unwrap();
    let run = s
        .runner()
        .launch(LaunchRequest {
            options: Default::default(),
            repo,
            global,
            kind,
            provider: None,
            model: None,
            effort: None,
            prompt: "Say hello.".into(),
            prompt_names_branch: false,
            env: BTreeMap::new(),
            afk_claim: None,
            issue: None,
            issue_layer: None,
            knobs: Vec::new(),
            start_at: None,
        })
        .await
        .unwrap();
    assert_eq!(
        run.state,
        lab::domain::RunState::Running,
        "{:?}",
        run.state_reason
    );

    let mut last = String::new();
    let login_screen = format!("{provider}'s login screen");
    wait::until(login_screen, wait::secs(40).every_ms(250), async || {
        let panes = s.runner().tmux().panes().await.unwrap();
        let pane = panes
            .iter()
            .find(|p| p.session == run.session)
            .expect("the session lives");
        assert!(!pane.dead, "{provider} exited; last screen:\n{last}");
        if let Some((_, screen)) = s.runner().tmux().screens(&[pane]).await.unwrap().pop() {
            for d in DIALOGS {
                assert!(
                    !screen.contains(d),
                    "{provider} stopped at a dialog ({d}):\n{screen}"
                );
            }
            last = screen;
        }
        if last.contains(login) {
            Ok(())
        } else {
            Err(last.clone())
        }
    })
    .await;
    // lab's screen of the run is the one tmux shows: the words with their
    // spaces, in their places (asked between two equal captures, so that
    // a redraw in between does not count).
    let trimmed = |t: &str| -> Vec<String> {
        let mut v: Vec<String> = t.split('\n').map(|l| l.trim_end().to_owned()).collect();
        while v.last().is_some_and(|l| l.is_empty()) {
            v.pop();
        }
        v
    };
    let same = format!("{provider}'s screen as lab renders it");
    let rendered = wait::until(same, wait::secs(20).every_ms(300), async || {
        let panes = s.runner().tmux().panes().await.unwrap();
        let pane = panes.iter().find(|p| p.session == run.session).unwrap();
        let before = s.runner().tmux().screens(&[pane]).await.unwrap().pop()?.1;
        let ours = s.get(&format!("/api/v1/runs/{}/screen", run.id)).await.ok();
        let after = s.runner().tmux().screens(&[pane]).await.unwrap().pop()?.1;
        let ours = trimmed(ours["text"].as_str().unwrap());
        (before == after && ours == trimmed(&after)).then_some(ours)
    })
    .await;
    assert!(
        rendered.iter().any(|l| l.contains(login)),
        "{}",
        rendered.join("\n")
    );
    // Within seconds of its login screen, although the screen animates
    // (a changed screen is read at every pass while a run is young).
    let waiting = s.wait_run(run.id, 6, |r| r["state"] == "waiting").await;
    assert!(
        waiting["state_reason"]
            .as_str()
            .unwrap()
            .contains("not logged in"),
        "{waiting}"
    );
    // The page offers the answer: a button that types /login (Claude
    // Code); Codex's menu is answered with the reply box's keys.
    let cookie = crate::pages_input::session(&s).await;
    let page = crate::pages_input::visit(
        &s,
        &cookie,
        reqwest::Method::GET,
        &format!("/runs/{}", run.id),
    )
    .await
    .text()
    .await
    .unwrap();
    assert_eq!(
        page.contains("Sign in (types /login)"),
        provider == "claude-code",
        "{page}"
    );
    // labctl ps shows it too.
    let out = crate::labctl::ok(&crate::labctl::labctl(&s, &["ps"]));
    assert!(
        out.contains("waiting") && out.contains("not logged in"),
        "{out}"
    );
    // The run's own CLI folder holds the workspace's trust (ADR 24); the
    // operator's home got nothing.
    let own = s.data_dir().join(format!("runs/{}/home", run.id));
    match provider {
        "claude-code" => {
            let cfg: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(own.join(".claude/.claude.json")).unwrap(),
            )
            .unwrap();
            let ws = run.workspace.clone().unwrap();
            assert_eq!(cfg["projects"][&ws]["hasTrustDialogAccepted"], true);
        }
        _ => {
            let cfg = std::fs::read_to_string(own.join(".codex/config.toml")).unwrap();
            assert!(cfg.contains("trust_level = \"trusted\""), "{cfg}");
        }
    }
    let operator = s.tmp().join("home");
    assert!(!operator.join(".claude.json").exists());
    assert!(!operator.join(".codex/config.toml").exists());
    s.post(&format!("/api/v1/runs/{}/stop", run.id), json!(null))
        .await
        .ok();
    s.stop().await;
}

async fn claude_manual_reaches_login(b: Backend) {
    reaches_login(b, "claude-code", RunKind::Manual, "Not logged in").await;
}

async fn claude_afk_reaches_login(b: Backend) {
    reaches_login(b, "claude-code", RunKind::Afk, "Not logged in").await;
}

async fn codex_manual_reaches_login(b: Backend) {
    reaches_login(b, "codex", RunKind::Manual, "Sign in with ChatGPT").await;
}

async fn codex_afk_reaches_login(b: Backend) {
    reaches_login(b, "codex", RunKind::Afk, "Sign in with ChatGPT").await;
}

/// The real Claude Code runs lab's hooks from its `--settings`, in its
/// sandbox, beside the user's own: a run started without a prompt is `idle`
/// once its `SessionStart` hook has reached lab through `labctl hook`
/// (ADR 13), and the user's `SessionStart` hook ran too. (An `apiKeyHelper`
/// that prints no real key gets Claude past its login screen; it never
/// calls the API without a prompt.)
async fn claude_s_own_hook_reports_its_session(b: Backend) {
    let bin = real::cli("claude-code");
    let s = TestServer::start_tweaked(b, |cfg| {
        cfg.provider_bins
            .insert("claude-code".parse().unwrap(), bin.clone());
    })
    .await;
    let user = s.tmp().join("home/.claude");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("settings.json"),
        json!({
            "apiKeyHelper": "echo not-a-key",
            "hooks": {"SessionStart": [{"hooks": [{"type": "command",
                "command": "cat > \"$HOME/.claude/user-hook.json\""}]}]}
        })
        .to_string(),
    )
    .unwrap();
    s.add_repo("r").await;
    // The operator's settings do not reach a run unless carried (ADR 24):
    // without its apiKeyHelper the CLI is not logged in, and their hook
    // does not run.
    let first = s.start_run("r", "").await;
    let f = first["id"].as_i64().unwrap();
    s.wait_run(f, 30, |r| r["state"] == "waiting").await;
    s.post(&format!("/api/v1/runs/{f}/stop"), json!(null))
        .await
        .ok();
    let own = |n: i64| s.data_dir().join(format!("runs/{n}/home/.claude"));
    assert!(!own(f).join("user-hook.json").exists());
    assert!(!user.join("user-hook.json").exists());
    // Carried by key, they do: in the run's own folder.
    s.patch(
        "/api/v1/settings",
        json!({"runs": {"carry_cli_keys": ["apiKeyHelper", "hooks"]}}),
    )
    .await
    .expect(200);
    let run = s.start_run("r", "").await;
    assert_eq!(run["state"], "running", "{run}");
    assert!(run["agent_state"].is_null(), "{run}");
    let n = run["id"].as_i64().unwrap();
    let idle = s
        .wait_run(n, 30, |r| r["agent_state"]["state"] == "idle")
        .await;
    assert!(idle["agent_state"]["reason"].is_null(), "{idle}");
    let stored = s.runner().store().run(n).await.unwrap().agent.unwrap();
    assert_eq!(stored.by, lab::domain::AgentBy::Hook);
    // The carried hook runs beside lab's, in the run's home: it may end a
    // moment later.
    let theirs: serde_json::Value = wait::until("the user's hook", wait::secs(10), async || {
        std::fs::read(own(n).join("user-hook.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or("not yet")
    })
    .await;
    assert_eq!(theirs["hook_event_name"], "SessionStart", "{theirs}");
    assert!(!user.join("user-hook.json").exists());
    s.post(&format!("/api/v1/runs/{n}/stop"), json!(null))
        .await
        .ok();
    s.stop().await;
}

async fn doctor_passes_with_the_pinned_clis(b: Backend) {
    let (claude, codex) = (real::cli("claude-code"), real::cli("codex"));
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let db = b.fresh_url().await;
    let (code, out) = crate::doctor::lab_doctor(
        &data,
        db.as_deref(),
        &[("LAB_CLAUDE_CODE_BIN", &claude), ("LAB_CODEX_BIN", &codex)],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out.matches("accepts lab's command line").count(),
        2,
        "{out}"
    );
    assert!(out.contains("(the version lab was checked with)"), "{out}");
}

/// lab's own check of each real CLI, signed out, says so in lab's words
/// (their own sign-in checks: `claude auth status`, `codex login status`).
async fn the_check_of_a_signed_out_cli_says_not_logged_in(b: Backend) {
    let (claude, codex) = (real::cli("claude-code"), real::cli("codex"));
    let s = TestServer::start_tweaked(b, |cfg| {
        cfg.provider_bins
            .insert("claude-code".parse().unwrap(), claude.clone());
        cfg.provider_bins
            .insert("codex".parse().unwrap(), codex.clone());
    })
    .await;
    for provider in ["claude-code", "codex"] {
        let body = s
            .post(
                &format!("/api/v1/afk/providers/{provider}/check"),
                serde_json::Value::Null,
            )
            .await
            .ok();
        assert_eq!(body["works"], false, "{provider}: {body}");
        assert!(
            body["reason"]
                .as_str()
                .unwrap_or("")
                .contains("not logged in"),
            "{provider}: {body}"
        );
    }
    s.stop().await;
}

/// With `ANTHROPIC_API_KEY` in `lab serve`'s own environment (as
/// docs/security.md says to give it), the pinned Claude Code never stops at
/// its "Detected a custom API key" dialog: lab approved the key in the run's
/// own config, so the prompt's turn reaches the model with that key and
/// ends (issue 40 §1). The run's page says what lab approved.
async fn claude_uses_lab_s_api_key_without_asking(b: Backend) {
    let bin = real::cli("claude-code");
    let model = crate::support::model::StandIn::start().await;
    let key = "sk-ant-api03-lab-test-0123456789abcdefghijKLMNOP";
    let home = crate::support::process::LabHome::new(&b).await;
    let lab = home
        .start(&[
            ("LAB_CLAUDE_CODE_BIN", &bin.to_string_lossy()),
            ("ANTHROPIC_API_KEY", key),
            ("ANTHROPIC_BASE_URL", &model.url),
        ])
        .await;
    let path = crate::support::git::init_repo(home.tmp.path(), "r");
    lab.post(
        "/api/v1/repos",
        json!({"name": "r", "path": path, "provider": "claude-code"}),
    )
    .await
    .ok();
    let run = lab
        .post("/api/v1/runs", json!({"repo": "r", "prompt": "Say hi."}))
        .await
        .ok();
    let id = crate::support::id(&run);
    let asked = "Detected a custom API key";
    let mut last = String::new();
    wait::until(
        "the turn's answer on the screen",
        wait::secs(60),
        async || {
            let shot = lab.get(&format!("/api/v1/runs/{id}/screen")).await.ok();
            last = shot["text"].as_str().unwrap_or("").to_owned();
            assert!(!last.contains(asked), "Claude Code asked:\n{last}");
            if last.contains("Done.") {
                Ok(())
            } else {
                Err(last.clone())
            }
        },
    )
    .await;
    let calls = model.messages();
    assert!(!calls.is_empty(), "the turn reached the model");
    assert!(
        calls.iter().all(|c| c.header("x-api-key") == Some(key)),
        "every call carried lab's key: {:?}",
        calls
            .iter()
            .map(|c| c.header("x-api-key"))
            .collect::<Vec<_>>()
    );
    let idle = lab
        .wait_run(id, 30, |r| r["agent_state"]["state"] == "idle")
        .await;
    assert_eq!(idle["state"], "running", "{idle}");
    let cookie = crate::pages_input::session(&lab).await;
    let page =
        crate::pages_input::visit(&lab, &cookie, reqwest::Method::GET, &format!("/runs/{id}"))
            .await
            .text()
            .await
            .unwrap();
    assert!(
        page.contains("approved by lab in this run") && !page.contains("KLMNOP"),
        "{page}"
    );
    lab.post(&format!("/api/v1/runs/{id}/stop"), json!(null))
        .await
        .ok();
}

/// While the model API answers 529, the pinned Claude Code retries and
/// says so only on its screen: lab shows the run `retrying` with the error
/// (not `working`), in the API and `labctl ps`; once the API answers, the
/// turn goes on and ends idle (issue 40 §3).
async fn claude_s_retries_show_as_retrying(b: Backend) {
    use crate::support::model::{Answer, StandIn};
    let bin = real::cli("claude-code");
    let model = StandIn::start().await;
    model.answer(Answer::overloaded());
    let home = crate::support::process::LabHome::new(&b).await;
    let lab = home
        .start(&[
            ("LAB_CLAUDE_CODE_BIN", &bin.to_string_lossy()),
            (
                "ANTHROPIC_API_KEY",
                "sk-ant-api03-lab-test-0123456789abcdefghijKLMNOP",
            ),
            ("ANTHROPIC_BASE_URL", &model.url),
        ])
        .await;
    let path = crate::support::git::init_repo(home.tmp.path(), "r");
    lab.post(
        "/api/v1/repos",
        json!({"name": "r", "path": path, "provider": "claude-code"}),
    )
    .await
    .ok();
    let run = lab
        .post("/api/v1/runs", json!({"repo": "r", "prompt": "Say hi."}))
        .await
        .ok();
    let id = crate::support::id(&run);
    let retrying = lab
        .wait_run(id, 60, |r| r["agent_state"]["state"] == "retrying")
        .await;
    assert_eq!(retrying["state"], "running", "{retrying}");
    // Its first attempts say `API error`, later ones the API's own words.
    let why = retrying["agent_state"]["reason"].as_str().unwrap();
    assert!(
        why == "retrying: API error" || why == "retrying: 529 Overloaded",
        "{retrying}"
    );
    assert_eq!(retrying["state_reason"], why, "{retrying}");
    let ps = std::process::Command::new(env!("CARGO_BIN_EXE_labctl"))
        .arg("ps")
        .env("LAB_URL", &lab.url)
        .env("LAB_TOKEN", &lab.token)
        .env("LABCTL_CONFIG", home.tmp.path().join("labctl.toml"))
        .output()
        .unwrap();
    let ps = crate::labctl::ok(&ps);
    assert!(ps.contains("retrying") && ps.contains("retrying: "), "{ps}");
    wait::until("the CLI calls again", wait::secs(30), async || {
        let n = model.messages().len();
        if n >= 2 { Ok(()) } else { Err(n) }
    })
    .await;
    // The API answers again: the same turn goes on, and ends.
    model.answer(Answer::Text("Done.".into()));
    let idle = lab
        .wait_run(id, 60, |r| r["agent_state"]["state"] == "idle")
        .await;
    assert_eq!(idle["state_reason"], serde_json::Value::Null, "{idle}");
    let shot = lab.get(&format!("/api/v1/runs/{id}/screen")).await.ok();
    assert!(shot["text"].as_str().unwrap().contains("Done."), "{shot}");
    lab.post(&format!("/api/v1/runs/{id}/stop"), json!(null))
        .await
        .ok();
}

on_both!(
    claude_s_retries_show_as_retrying,
    claude_uses_lab_s_api_key_without_asking,
    the_check_of_a_signed_out_cli_says_not_logged_in,
    doctor_passes_with_the_pinned_clis,
    claude_manual_reaches_login,
    claude_afk_reaches_login,
    codex_manual_reaches_login,
    codex_afk_reaches_login,
    claude_s_own_hook_reports_its_session
);
