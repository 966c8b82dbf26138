//! Snapshots of every provider's resume command line (a lost run, an AFK
//! round of an ended session; ADR 18, ADR 20).

use expect_test::{Expect, expect};

use super::super::*;
use super::{render, spec};

fn check_resume(provider: &str, s: SpawnSpec, want: Expect) {
    let p = get(provider).unwrap();
    want.assert_eq(&render(&p.resume_line(&s)));
}

/// A lost run resumes its session (ADR 18): `--resume` takes the place of
/// `--session-id`, every option and the hooks stay, the prompt is the
/// resume message as given (no ultracode directive).
#[test]
fn claude_resume_keeps_every_option() {
    check_resume(
        "claude-code",
        spec(
            "opus",
            "max",
            &[("permission_mode", "dontAsk"), ("ultracode", "true")],
            "continue",
        ),
        expect![[r#"
            "--model"
            "opus"
            "--effort"
            "max"
            "--resume"
            "0f8e4c1a-3b5d-4e7f-9a2c-6d1b8e0f4a37"
            "--permission-mode"
            "dontAsk"
            "--"
            "continue"
            env DISABLE_AUTOUPDATER="1"
            env -CLAUDE_CODE_EFFORT_LEVEL
        "#]],
    );
}

#[test]
fn claude_resume_of_a_manual_run_without_a_prompt() {
    check_resume(
        "claude-code",
        spec("sonnet", "high", &[], ""),
        expect![[r#"
            "--model"
            "sonnet"
            "--effort"
            "high"
            "--resume"
            "0f8e4c1a-3b5d-4e7f-9a2c-6d1b8e0f4a37"
            env DISABLE_AUTOUPDATER="1"
            env -CLAUDE_CODE_EFFORT_LEVEL
        "#]],
    );
}

/// `codex resume <options> -- <session id> [prompt]`.
#[test]
fn codex_resume_keeps_every_option() {
    let mut s = spec(
        "gpt-6.2-sol",
        "high",
        &[("approval", "never"), ("sandbox", "workspace-write")],
        "continue",
    );
    s.session_id = Some("019a0c4e-7b2d-7c11-9e3f-5a6b7c8d9e0f".into());
    check_resume(
        "codex",
        s,
        expect![[r#"
        "resume"
        "-m"
        "gpt-6.2-sol"
        "-c"
        "model_reasoning_effort=high"
        "-a"
        "never"
        "-s"
        "workspace-write"
        "--"
        "019a0c4e-7b2d-7c11-9e3f-5a6b7c8d9e0f"
        "continue"
    "#]],
    );
}

#[test]
fn codex_resume_without_a_prompt() {
    let mut s = spec("gpt-6.2-sol", "low", &[], "");
    s.session_id = Some("019a0c4e-7b2d-7c11-9e3f-5a6b7c8d9e0f".into());
    check_resume(
        "codex",
        s,
        expect![[r#"
        "resume"
        "-m"
        "gpt-6.2-sol"
        "-c"
        "model_reasoning_effort=low"
        "--"
        "019a0c4e-7b2d-7c11-9e3f-5a6b7c8d9e0f"
    "#]],
    );
}
