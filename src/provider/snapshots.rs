//! Snapshot tests of every provider's command line. Refresh with
//! `UPDATE_EXPECT=1 cargo test provider::snapshots`.

use std::collections::BTreeMap;

use expect_test::{Expect, expect};

use super::*;

fn spec(model: &str, effort: &str, options: &[(&str, &str)], prompt: &str) -> SpawnSpec {
    SpawnSpec {
        session_name: "lab-demo-1".into(),
        model: model.into(),
        effort: effort.into(),
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        initial_prompt: prompt.into(),
        working_dir: "/work/demo".into(),
        sandboxed: false,
        hook_command: None,
        session_id: Some("0f8e4c1a-3b5d-4e7f-9a2c-6d1b8e0f4a37".into()),
        writes: Vec::new(),
        read_only: false,
    }
}

/// A spec whose CLI reports to lab through hooks (ADR 13).
fn hooked(mut s: SpawnSpec) -> SpawnSpec {
    s.hook_command = Some(vec![
        "/opt/lab/bin/labctl".into(),
        "hook".into(),
        "claude-code".into(),
    ]);
    s
}

#[test]
fn claude_hooks_share_the_one_settings_layer_with_bypass() {
    check(
        "claude-code",
        hooked(spec(
            "sonnet",
            "high",
            &[("permission_mode", "bypassPermissions")],
            "go",
        )),
        expect![[r#"
            "--model"
            "sonnet"
            "--effort"
            "high"
            "--session-id"
            "0f8e4c1a-3b5d-4e7f-9a2c-6d1b8e0f4a37"
            "--permission-mode"
            "bypassPermissions"
            "--settings"
            "{\"skipDangerousModePermissionPrompt\":true,\"hooks\":{\"SessionStart\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}],\"UserPromptSubmit\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}],\"PostToolUse\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}],\"Notification\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}],\"PermissionRequest\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}],\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}],\"StopFailure\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}]}}"
            "--"
            "go"
            env DISABLE_AUTOUPDATER="1"
            env -CLAUDE_CODE_EFFORT_LEVEL
        "#]],
    );
}

#[test]
fn claude_hooks_without_bypass() {
    check(
        "claude-code",
        hooked(spec("sonnet", "high", &[], "")),
        expect![[r#"
            "--model"
            "sonnet"
            "--effort"
            "high"
            "--session-id"
            "0f8e4c1a-3b5d-4e7f-9a2c-6d1b8e0f4a37"
            "--settings"
            "{\"hooks\":{\"SessionStart\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}],\"UserPromptSubmit\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}],\"PostToolUse\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}],\"Notification\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}],\"PermissionRequest\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}],\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}],\"StopFailure\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/lab/bin/labctl' 'hook' 'claude-code'\",\"timeout\":10}]}]}}"
            env DISABLE_AUTOUPDATER="1"
            env -CLAUDE_CODE_EFFORT_LEVEL
        "#]],
    );
}

#[test]
fn codex_notify_runs_lab_s_hook() {
    let mut s = hooked(spec(
        "gpt-6.2-sol",
        "medium",
        &[("approval", "never")],
        "go",
    ));
    s.hook_command = Some(vec![
        "/opt/lab/bin/labctl".into(),
        "hook".into(),
        "codex".into(),
    ]);
    check(
        "codex",
        s,
        expect![[r#"
            "-m"
            "gpt-6.2-sol"
            "-c"
            "model_reasoning_effort=medium"
            "-c"
            "notify=[\"/opt/lab/bin/labctl\",\"hook\",\"codex\"]"
            "-a"
            "never"
            "--"
            "go"
        "#]],
    );
}

/// One argv element per line, quoted, so every byte is visible.
fn render(cl: &CommandLine) -> String {
    let mut out = String::new();
    for a in &cl.args {
        out.push_str(&format!("{a:?}\n"));
    }
    for (k, v) in &cl.env {
        out.push_str(&format!("env {k}={v:?}\n"));
    }
    for k in &cl.env_remove {
        out.push_str(&format!("env -{k}\n"));
    }
    out
}

/// A run with a scope: Claude Code gets a `PreToolUse` hook on its
/// file-writing tools that runs `labctl writes-hook` with the workspace and
/// the globs (issue 28 §4); Codex, with no such hook, gets nothing more.
#[test]
fn a_scope_adds_the_live_write_check_to_claude_only() {
    let scoped = |provider: &str| {
        let mut s = spec("sonnet", "high", &[], "");
        s.hook_command = Some(vec![
            "/opt/lab/bin/labctl".into(),
            "hook".into(),
            provider.into(),
        ]);
        s.writes = vec!["src/**".into(), "docs/it's.md".into()];
        get(provider).unwrap().command_line(&s)
    };
    let claude = scoped("claude-code");
    let at = claude.args.iter().position(|a| a == "--settings").unwrap();
    let settings: serde_json::Value = serde_json::from_str(&claude.args[at + 1]).unwrap();
    expect![[r#"
        [
          {
            "matcher": "Write|Edit|MultiEdit|NotebookEdit",
            "hooks": [
              {
                "type": "command",
                "command": "'/opt/lab/bin/labctl' 'writes-hook' '--root' '/work/demo' '--' 'src/**' 'docs/it'\\''s.md'",
                "timeout": 10
              }
            ]
          }
        ]"#]]
    .assert_eq(&serde_json::to_string_pretty(&settings["hooks"]["PreToolUse"]).unwrap());
    let mut unscoped = spec("sonnet", "high", &[], "");
    unscoped.hook_command = Some(vec![
        "/opt/lab/bin/labctl".into(),
        "hook".into(),
        "codex".into(),
    ]);
    assert_eq!(
        render(&scoped("codex")),
        render(&get("codex").unwrap().command_line(&unscoped))
    );
}

/// A planning or review run: Claude Code's settings deny its file-writing
/// tools (lab's sandbox shows the workspace read-only either way); a work
/// run's have no such rule.
#[test]
fn a_read_only_run_denies_claude_s_writing_tools() {
    let mut s = spec(
        "sonnet",
        "high",
        &[("permission_mode", "bypassPermissions")],
        "",
    );
    s.read_only = true;
    let line = get("claude-code").unwrap().command_line(&s);
    let at = line.args.iter().position(|a| a == "--settings").unwrap();
    let settings: serde_json::Value = serde_json::from_str(&line.args[at + 1]).unwrap();
    assert_eq!(
        settings["permissions"]["deny"],
        serde_json::json!(["Write", "Edit", "NotebookEdit"])
    );
    s.read_only = false;
    let line = get("claude-code").unwrap().command_line(&s);
    let at = line.args.iter().position(|a| a == "--settings").unwrap();
    assert!(
        !line.args[at + 1].contains("permissions"),
        "{}",
        line.args[at + 1]
    );
}

fn check(provider: &str, s: SpawnSpec, want: Expect) {
    let p = get(provider).unwrap();
    want.assert_eq(&render(&p.command_line(&s)));
}

#[test]
fn claude_manual_without_prompt() {
    check(
        "claude-code",
        spec("opus", "max", &[], ""),
        expect![[r#"
            "--model"
            "opus"
            "--effort"
            "max"
            "--session-id"
            "0f8e4c1a-3b5d-4e7f-9a2c-6d1b8e0f4a37"
            env DISABLE_AUTOUPDATER="1"
            env -CLAUDE_CODE_EFFORT_LEVEL
        "#]],
    );
}

#[test]
fn claude_manual_with_prompt() {
    check(
        "claude-code",
        spec("sonnet", "low", &[], "fix the build"),
        expect![[r#"
            "--model"
            "sonnet"
            "--effort"
            "low"
            "--session-id"
            "0f8e4c1a-3b5d-4e7f-9a2c-6d1b8e0f4a37"
            "--"
            "fix the build"
            env DISABLE_AUTOUPDATER="1"
            env -CLAUDE_CODE_EFFORT_LEVEL
        "#]],
    );
}

#[test]
fn claude_ultracode_prepends_its_directive_to_a_prompt() {
    check(
        "claude-code",
        spec(
            "opus",
            "xhigh",
            &[
                ("ultracode", "true"),
                ("permission_mode", "bypassPermissions"),
            ],
            "Resolve issue 7.",
        ),
        expect![[r#"
            "--model"
            "opus"
            "--effort"
            "xhigh"
            "--session-id"
            "0f8e4c1a-3b5d-4e7f-9a2c-6d1b8e0f4a37"
            "--permission-mode"
            "bypassPermissions"
            "--settings"
            "{\"skipDangerousModePermissionPrompt\":true}"
            "--"
            "ultracode: plan this task, then fan substantial parts out to parallel sub-agents.\n\nResolve issue 7."
            env DISABLE_AUTOUPDATER="1"
            env -CLAUDE_CODE_EFFORT_LEVEL
        "#]],
    );
}

#[test]
fn claude_ultracode_adds_nothing_to_an_empty_prompt() {
    check(
        "claude-code",
        spec(
            "opus",
            "high",
            &[("ultracode", "true"), ("permission_mode", "dontAsk")],
            "",
        ),
        expect![[r#"
            "--model"
            "opus"
            "--effort"
            "high"
            "--session-id"
            "0f8e4c1a-3b5d-4e7f-9a2c-6d1b8e0f4a37"
            "--permission-mode"
            "dontAsk"
            env DISABLE_AUTOUPDATER="1"
            env -CLAUDE_CODE_EFFORT_LEVEL
        "#]],
    );
}

#[test]
fn claude_ultracode_off_leaves_the_prompt_alone() {
    check(
        "claude-code",
        spec(
            "haiku",
            "medium",
            &[("ultracode", "false"), ("permission_mode", "dontAsk")],
            "-starts with a dash",
        ),
        expect![[r#"
            "--model"
            "haiku"
            "--effort"
            "medium"
            "--session-id"
            "0f8e4c1a-3b5d-4e7f-9a2c-6d1b8e0f4a37"
            "--permission-mode"
            "dontAsk"
            "--"
            "-starts with a dash"
            env DISABLE_AUTOUPDATER="1"
            env -CLAUDE_CODE_EFFORT_LEVEL
        "#]],
    );
}

#[test]
fn claude_in_lab_s_sandbox_says_so() {
    let mut s = spec(
        "opus",
        "high",
        &[("permission_mode", "bypassPermissions")],
        "go",
    );
    s.sandboxed = true;
    check(
        "claude-code",
        s,
        expect![[r#"
            "--model"
            "opus"
            "--effort"
            "high"
            "--session-id"
            "0f8e4c1a-3b5d-4e7f-9a2c-6d1b8e0f4a37"
            "--permission-mode"
            "bypassPermissions"
            "--settings"
            "{\"skipDangerousModePermissionPrompt\":true}"
            "--"
            "go"
            env DISABLE_AUTOUPDATER="1"
            env IS_SANDBOX="1"
            env -CLAUDE_CODE_EFFORT_LEVEL
        "#]],
    );
}

#[test]
fn codex_manual_without_prompt() {
    check(
        "codex",
        spec("gpt-6.2-sol", "medium", &[], ""),
        expect![[r#"
            "-m"
            "gpt-6.2-sol"
            "-c"
            "model_reasoning_effort=medium"
        "#]],
    );
}

#[test]
fn codex_afk_options() {
    check(
        "codex",
        spec(
            "gpt-6-sol",
            "xhigh",
            &[("approval", "never"), ("sandbox", "workspace-write")],
            "Resolve issue 7.",
        ),
        expect![[r#"
            "-m"
            "gpt-6-sol"
            "-c"
            "model_reasoning_effort=xhigh"
            "-a"
            "never"
            "-s"
            "workspace-write"
            "--"
            "Resolve issue 7."
        "#]],
    );
}

#[test]
fn codex_other_option_values() {
    check(
        "codex",
        spec(
            "gpt-6.2-astra",
            "low",
            &[
                ("approval", "on-request"),
                ("sandbox", "danger-full-access"),
            ],
            "",
        ),
        expect![[r#"
            "-m"
            "gpt-6.2-astra"
            "-c"
            "model_reasoning_effort=low"
            "-a"
            "on-request"
            "-s"
            "danger-full-access"
        "#]],
    );
}

/// A prompt full of shell and tmux metacharacters is one argv element,
/// byte for byte, for every provider and with every option.
#[test]
fn a_hostile_prompt_is_one_untouched_element() {
    let prompt = "a; b && c | d `e` $(f) ${HOME} 'g' \"h\" \\ i;\n#{session_name} #S ~ * ? [x] > /tmp/x < y & \u{1F600};";
    for p in all() {
        let opts: Vec<(&str, &str)> = p
            .spawn_options()
            .iter()
            .map(|o| (o.key, o.default))
            .collect();
        for options in [vec![], opts] {
            let s = spec(p.default_model(), p.default_effort(), &options, prompt);
            let args = p.command_line(&s).args;
            let last = args.last().unwrap();
            assert!(last.ends_with(prompt), "{}: {last:?}", p.id());
            assert_eq!(
                args.iter().filter(|a| a.contains("$(f)")).count(),
                1,
                "{}",
                p.id()
            );
            assert_eq!(args[args.len() - 2], "--", "{}", p.id());
        }
    }
}

/// Every option combination of every provider builds, and the options
/// appear exactly as given.
#[test]
fn every_option_combination_builds() {
    for p in all() {
        let specs = p.spawn_options();
        let mut combos: Vec<Vec<(&str, &str)>> = vec![vec![]];
        for o in specs {
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    o.values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.push((o.key, *v));
                        c
                    })
                })
                .collect();
        }
        let expected: usize = specs.iter().map(|o| o.values.len()).product();
        assert_eq!(combos.len(), expected);
        for c in combos {
            for prompt in ["", "do it"] {
                let args = p
                    .command_line(&spec(p.default_model(), p.default_effort(), &c, prompt))
                    .args;
                assert_eq!(
                    args.contains(&"--".to_owned()),
                    !prompt.is_empty(),
                    "{} {c:?}",
                    p.id()
                );
            }
        }
    }
}

mod resume;
