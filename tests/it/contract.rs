//! The contract with the real CLIs: every model × effort × option
//! combination lab can build, for both run kinds, is accepted by the pinned
//! CLI's own parser with no warning.
//!
//! Argvs that differ only in the prompt's text (ultracode adds a line to it)
//! are checked once: the prompt is one element after `--`, which this test
//! asserts for every combination, and no parser reads its content.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use lab::provider::{self, Provider, SpawnSpec, Verdict};
use lab::run::cli_check;

use crate::support::real;

mod pre_tool_use;

const PROMPT: &str = "Resolve issue 1.";

/// Every spawn spec lab can build for `p`: manual runs (no options) and AFK
/// runs (every combination of option values), for every model and effort.
fn combinations(p: &dyn Provider) -> Vec<SpawnSpec> {
    let mut option_sets: Vec<BTreeMap<String, String>> = vec![BTreeMap::new()];
    for o in p.spawn_options() {
        option_sets = option_sets
            .into_iter()
            .flat_map(|set| {
                o.values.iter().map(move |v| {
                    let mut s = set.clone();
                    s.insert(o.key.to_owned(), (*v).to_owned());
                    s
                })
            })
            .collect();
    }
    let mut kinds = vec![BTreeMap::new()];
    kinds.extend(option_sets);
    let mut out = Vec::new();
    for (i, m) in p.models().iter().enumerate() {
        for e in p.efforts() {
            for options in &kinds {
                out.push(SpawnSpec {
                    session_name: "lab-1-contract".into(),
                    model: (*m).into(),
                    effort: (*e).into(),
                    options: options.clone(),
                    initial_prompt: PROMPT.into(),
                    working_dir: "/tmp".into(),
                    sandboxed: true,
                    // The hooks every run reports its state through (ADR 13).
                    hook_command: Some(vec![
                        "/opt/lab/bin/labctl".into(),
                        "hook".into(),
                        p.id().into(),
                    ]),
                    // lab gives each Claude Code run a session id of its own.
                    session_id: p.takes_session_id().then(lab::run::new_session_id),
                    // A scope: Claude Code's live write check is on the line.
                    writes: vec!["src/**".into()],
                    // Every other model as a planning or review run's
                    // (read-only: its deny rules on the line).
                    read_only: i % 2 == 1,
                });
            }
        }
    }
    out
}

async fn contract(id: &'static str) {
    let p = provider::get(id).unwrap();
    let bin = real::cli(id);
    let version = cli_check::version(p, &bin).await.unwrap();
    assert_eq!(
        version,
        p.checked_version(),
        "the CLI under test is the pinned one"
    );

    let specs = combinations(p);
    let mut distinct: BTreeMap<Vec<String>, lab::provider::CommandLine> = BTreeMap::new();
    for s in &specs {
        let cl = p.command_line(s);
        let n = cl.args.len();
        assert!(
            n >= 2 && cl.args[n - 2] == "--",
            "{id}: the prompt is the last element after --: {:?}",
            cl.args
        );
        assert!(cl.args[n - 1].ends_with(PROMPT));
        let mut key = cl.args.clone();
        key.pop();
        // Each spec has a session id of its own (the CLI refuses one already
        // in use); argvs that differ only by it are one to check.
        if let Some(i) = key.iter().position(|a| a == "--session-id") {
            key[i + 1] = "<session id>".into();
        }
        key.extend(cl.env.iter().map(|(k, v)| format!("{k}={v}")));
        distinct.entry(key).or_insert(cl);
    }
    // The resumes of the same runs (ADR 18): the same flags, the session id
    // after `--resume` (Claude Code) or `resume … --` (Codex), and lab's
    // resume message. Every option set, with the default model and effort:
    // a resume builds those two flags with the start's own code, checked
    // above for the whole catalogs (and each check costs a CLI start).
    let resumes = specs
        .iter()
        .filter(|s| s.model == p.default_model() && s.effort == p.default_effort());
    for s in resumes {
        let mut s = s.clone();
        let sid = lab::run::new_session_id();
        s.session_id = Some(sid.clone());
        s.initial_prompt = lab::run::RESUME_PROMPT.into();
        let cl = p.resume_line(&s);
        assert_eq!(
            cl.args.last().map(String::as_str),
            Some(lab::run::RESUME_PROMPT),
            "{id}: the resume message is the last element: {:?}",
            cl.args
        );
        assert!(cl.args.contains(&sid), "{id}: {:?}", cl.args);
        let mut key: Vec<String> = cl
            .args
            .iter()
            .map(|a| {
                if *a == sid {
                    "<session id>".into()
                } else {
                    a.clone()
                }
            })
            .collect();
        key.extend(cl.env.iter().map(|(k, v)| format!("{k}={v}")));
        distinct.entry(key).or_insert(cl);
    }
    let began = Instant::now();
    let parallel = Arc::new(tokio::sync::Semaphore::new(4));
    let mut tasks = Vec::new();
    for (_, cl) in distinct.clone() {
        let (bin, parallel) = (bin.clone(), parallel.clone());
        tasks.push(tokio::spawn(async move {
            let _slot = parallel.acquire().await.unwrap();
            let v = cli_check::check(
                provider::get(id).unwrap(),
                &bin,
                &cl,
                Some((&bwrap(), policy())),
            )
            .await;
            (cl.args, v)
        }));
    }
    let mut bad = Vec::new();
    for t in tasks {
        let (args, v) = t.await.unwrap();
        if v != Verdict::Accepted {
            bad.push(format!("{args:?}: {v:?}"));
        }
    }
    eprintln!(
        "{id} {version}: {} combinations, {} distinct argvs checked in {:.1} s",
        specs.len(),
        distinct.len(),
        began.elapsed().as_secs_f64()
    );
    assert!(
        bad.is_empty(),
        "{} of {} argvs not accepted cleanly:\n{}",
        bad.len(),
        distinct.len(),
        bad.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_accepts_every_combination() {
    contract("claude-code").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_accepts_every_combination() {
    contract("codex").await;
}

/// The check tells a rejection and a warning from an acceptance (else the
/// contract could pass vacuously).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_sees_rejections_and_warnings() {
    {
        let bin = real::cli("claude-code");
        let p = provider::get("claude-code").unwrap();
        let cl = |args: &[&str]| lab::provider::CommandLine {
            args: args.iter().map(|s| s.to_string()).collect(),
            env: vec![],
            env_remove: vec![],
        };
        let v = cli_check::check(
            p,
            &bin,
            &cl(&["--model", "gpt-5", "--", "x"]),
            Some((&bwrap(), policy())),
        )
        .await;
        assert!(matches!(v, Verdict::Warning(_)), "{v:?}");
        let v = cli_check::check(
            p,
            &bin,
            &cl(&["--permission-mode", "sometimes", "--", "x"]),
            Some((&bwrap(), policy())),
        )
        .await;
        assert!(matches!(v, Verdict::Rejected(_)), "{v:?}");
        // A resume with a bad flag is refused before the session is looked
        // for; an unknown model is still a warning.
        let sid = lab::run::new_session_id();
        let v = cli_check::check(
            p,
            &bin,
            &cl(&[
                "--resume",
                &sid,
                "--permission-mode",
                "sometimes",
                "--",
                "x",
            ]),
            Some((&bwrap(), policy())),
        )
        .await;
        assert!(matches!(v, Verdict::Rejected(_)), "{v:?}");
        let v = cli_check::check(
            p,
            &bin,
            &cl(&["--model", "gpt-5", "--resume", &sid, "--", "x"]),
            Some((&bwrap(), policy())),
        )
        .await;
        assert!(matches!(v, Verdict::Warning(_)), "{v:?}");
    }
    {
        let bin = real::cli("codex");
        let p = provider::get("codex").unwrap();
        let cl = |args: &[&str]| lab::provider::CommandLine {
            args: args.iter().map(|s| s.to_string()).collect(),
            env: vec![],
            env_remove: vec![],
        };
        let v = cli_check::check(
            p,
            &bin,
            &cl(&["-a", "untrusted", "--", "x"]),
            Some((&bwrap(), policy())),
        )
        .await;
        assert!(matches!(v, Verdict::Rejected(_)), "{v:?}");
        let v = cli_check::check(
            p,
            &bin,
            &cl(&[
                "-m",
                "gpt-5.5",
                "-c",
                "model_reasoning_effort=high",
                "--",
                "x",
            ]),
            Some((&bwrap(), policy())),
        )
        .await;
        assert_eq!(v, Verdict::Accepted);
        let sid = lab::run::new_session_id();
        let v = cli_check::check(
            p,
            &bin,
            &cl(&["resume", "-a", "untrusted", "--", &sid, "x"]),
            Some((&bwrap(), policy())),
        )
        .await;
        assert!(matches!(v, Verdict::Rejected(_)), "{v:?}");
    }
}

/// bubblewrap: the contract is checked inside the sandbox runs get.
/// The sandbox view of this machine, as a CLI check outside a server gets it.
fn policy() -> &'static lab::run::sandbox::Policy {
    static P: std::sync::OnceLock<lab::run::sandbox::Policy> = std::sync::OnceLock::new();
    P.get_or_init(lab::run::sandbox::Policy::system_only)
}

fn bwrap() -> std::path::PathBuf {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("bwrap"))
            .find(|b| b.is_file())
    });
    found.expect("the contract tests need bubblewrap (apt-get install bubblewrap)")
}
