//! labctl as people expect a command line tool to behave (issue 25): a
//! closed pipe ends it quietly, `labctl login` saves where lab is, errors
//! come as JSON under `--json`, exit codes follow the documented table.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::labctl::{json, labctl, ok};
use crate::on_both;
use crate::support::{Backend, TestServer};

/// labctl with nothing set: no LAB_URL, no token, an empty data dir; only
/// the config file `config`.
fn bare(s: &TestServer, config: &std::path::Path, args: &[&str]) -> std::process::Output {
    let empty = s.tmp().join("empty-data");
    std::fs::create_dir_all(&empty).unwrap();
    Command::new(env!("CARGO_BIN_EXE_labctl"))
        .args(args)
        .env_remove("LAB_URL")
        .env_remove("LAB_TOKEN")
        .env("LAB_DATA_DIR", &empty)
        .env("LABCTL_CONFIG", config)
        .stdin(Stdio::null())
        .output()
        .expect("labctl runs")
}

/// `labctl ps -a | head -1`: the reader is gone before labctl writes; labctl
/// ends by SIGPIPE, as other tools do, with no panic on stderr.
async fn a_closed_pipe_ends_labctl_quietly(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_labctl"))
        .args(["repo", "list"])
        .env("LAB_URL", &s.url)
        .env_remove("LAB_TOKEN")
        .env("LAB_DATA_DIR", s.data_dir())
        .env("LABCTL_CONFIG", s.tmp().join("labctl.toml"))
        .stdout(writer)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?} {err}",
        out.status
    );
    s.stop().await;
}

/// `labctl login URL` checks the token, saves both (mode 0600), and later
/// calls need nothing set; a wrong token saves nothing; another server
/// never gets the saved token; `labctl logout` forgets it.
async fn login_saves_where_lab_is(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let config = s.tmp().join("conf/labctl.toml");
    // Nothing saved: no token goes with a call (the URL it falls back to,
    // `cli::config::DEFAULT_URL`, is the unit test's: a lab may listen
    // there on this machine, so no test may depend on it being free).
    let out = bare(&s, &config, &["--lab-url", &s.url, "repo", "list"]);
    assert_eq!(out.status.code(), Some(6), "{out:?}");

    let wrong = bare(&s, &config, &["login", &s.url, "--token", "nope"]);
    assert_eq!(wrong.status.code(), Some(6), "{wrong:?}");
    assert!(!config.exists(), "a refused login saves nothing");

    let said = ok(&bare(&s, &config, &["login", &s.url, "--token", &s.token]));
    assert!(said.contains("logged in"), "{said}");
    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let repos = json(&bare(&s, &config, &["repo", "list", "--json"]));
    assert_eq!(repos[0]["name"], "r", "{repos}");

    // Another URL on the command line: the saved token is not sent there.
    let other = Command::new(env!("CARGO_BIN_EXE_labctl"))
        .args([
            "--lab-url",
            &s.url.replace("127.0.0.1", "localhost"),
            "repo",
            "list",
        ])
        .env_remove("LAB_URL")
        .env_remove("LAB_TOKEN")
        .env("LAB_DATA_DIR", s.tmp().join("empty-data"))
        .env("LABCTL_CONFIG", &config)
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(6), "{other:?}");

    ok(&bare(&s, &config, &["logout"]));
    assert!(!config.exists());
    let bad = bare(&s, &config, &["login", "not a url"]);
    assert_eq!(bad.status.code(), Some(5), "{bad:?}");
    s.stop().await;
}

/// Under `--json` an error is JSON on stdout with the exit code's name;
/// `--state all` lists closed issues too; attach without a terminal is a
/// usage error (2).
async fn errors_are_json_and_exit_codes_follow_the_table(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let out = labctl(&s, &["show", "999", "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let e: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON error");
    assert_eq!(e["error"]["code"], "not_found", "{e}");
    assert_eq!(e["error"]["exit"], 3, "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("999"),
        "{e}"
    );
    let usage = labctl(&s, &["show", "--json"]);
    assert_eq!(usage.status.code(), Some(2));
    let e: serde_json::Value = serde_json::from_slice(&usage.stdout).expect("a JSON error");
    assert_eq!(e["error"]["code"], "usage", "{e}");

    for (title, close) in [("open one", false), ("closed one", true)] {
        let i = s
            .post("/api/v1/repos/r/issues", json!({"title": title}))
            .await
            .ok();
        if close {
            s.post(
                &format!("/api/v1/repos/r/issues/{}/close", i["number"]),
                json!(null),
            )
            .await
            .ok();
        }
    }
    let titles = |state: &str| -> Vec<String> {
        json(&labctl(
            &s,
            &["issue", "list", "--repo", "r", "--state", state, "--json"],
        ))
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["title"].as_str().unwrap().to_owned())
        .collect()
    };
    assert_eq!(titles("open"), ["open one"]);
    assert_eq!(titles("closed"), ["closed one"]);
    let mut all = titles("all");
    all.sort();
    assert_eq!(all, ["closed one", "open one"]);
    let bad = s
        .get("/api/v1/repos/r/issues?state=every")
        .await
        .expect(400);
    assert!(bad.to_string().contains("open, closed or all"), "{bad}");

    // A mistyped command gets the one meant.
    let typo = labctl(&s, &["sart", "r"]);
    assert_eq!(typo.status.code(), Some(2));
    let said = String::from_utf8_lossy(&typo.stderr);
    assert!(
        said.contains("similar subcommand exists: 'start'"),
        "{said}"
    );

    let run = s.start_run("r", "stay").await;
    let id = run["id"].to_string();
    let attach = labctl(&s, &["attach", &id]);
    assert_eq!(attach.status.code(), Some(2), "{attach:?}");
    s.stop().await;
}

/// `labctl start --provider` runs another provider than the repo's, on its
/// own defaults (issue 40 §9); a model of the wrong provider is refused
/// with the chosen one's models and how to choose another; an unknown
/// provider is refused and nothing starts. `labctl repo show` names the
/// check command.
async fn start_chooses_the_provider_and_repo_show_names_the_check(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("web").await;
    let run = json(&labctl(
        &s,
        &[
            "start",
            "web",
            "--provider",
            "codex",
            "--prompt",
            "stay",
            "--json",
        ],
    ));
    assert_eq!(run["provider"], "codex", "{run}");
    assert_eq!(run["model"]["source"], "provider.default", "{run}");
    let wrong = labctl(&s, &["start", "web", "--model", "gpt-6-sol"]);
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(5), "{err}");
    assert!(
        err.contains("for provider claude-code; allowed: ")
            && err.contains("labctl start --provider"),
        "{err}"
    );
    let unknown = labctl(&s, &["start", "web", "--provider", "gemini"]);
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(unknown.status.code(), Some(5), "{err}");
    assert!(
        err.contains("unknown provider 'gemini'; allowed: claude-code, codex"),
        "{err}"
    );
    let runs = s.get("/api/v1/runs").await.ok();
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
    let shown = ok(&labctl(&s, &["repo", "show", "web"]));
    assert!(shown.contains("check command:   none"), "{shown}");
    s.patch("/api/v1/repos/web", json!({"check_command": "cargo test"}))
        .await
        .ok();
    let shown = ok(&labctl(&s, &["repo", "show", "web"]));
    assert!(shown.contains("check command:   cargo test"), "{shown}");
    s.stop().await;
}

/// A manual run's permission mode is a provider option like the others
/// (issue 40 §9): `labctl start --option` passes it to the CLI, the modes
/// that ask a person included; without one the CLI runs its own default; a
/// bad value or key is refused naming what is allowed, and nothing starts.
/// The AFK defaults still refuse the modes that ask a person.
async fn start_takes_the_provider_s_options(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("web").await;
    let run = json(&labctl(
        &s,
        &[
            "start",
            "web",
            "--option",
            "permission_mode=acceptEdits",
            "--prompt",
            "stay",
            "--json",
        ],
    ));
    let id = run["id"].as_i64().unwrap();
    assert_eq!(
        run["options"]["permission_mode"],
        json!({"value": "acceptEdits", "source": "request"}),
        "{run}"
    );
    let argv = crate::support::agent::argv(&s.record(id, "argv").await);
    let at = argv
        .iter()
        .position(|a| a == b"--permission-mode")
        .expect("--permission-mode");
    assert_eq!(argv[at + 1], b"acceptEdits");
    let plain = json(&labctl(&s, &["start", "web", "--prompt", "stay", "--json"]));
    let argv = crate::support::agent::argv(&s.record(plain["id"].as_i64().unwrap(), "argv").await);
    assert!(
        !argv.iter().any(|a| a == b"--permission-mode"),
        "no mode asked, none passed: {argv:?}"
    );
    for (arg, says) in [
        (
            "permission_mode=sometimes",
            "invalid value 'sometimes' for option 'permission_mode': must be one of the listed \
             values; allowed: bypassPermissions, dontAsk, manual, acceptEdits, plan, auto",
        ),
        (
            "colour=red",
            "unknown option 'colour' for provider claude-code",
        ),
    ] {
        let bad = labctl(&s, &["start", "web", "--option", arg]);
        let err = String::from_utf8_lossy(&bad.stderr);
        assert_eq!(bad.status.code(), Some(5), "{err}");
        assert!(err.contains(says), "{err}");
    }
    let runs = s.get("/api/v1/runs").await.ok();
    assert_eq!(runs.as_array().map(Vec::len), Some(2), "{runs}");
    let refused = s
        .patch(
            "/api/v1/settings",
            json!({"providers": {"claude-code": {"afk_options": {"permission_mode": "acceptEdits"}}}}),
        )
        .await
        .expect(400);
    assert!(
        refused
            .to_string()
            .contains("allowed: bypassPermissions, dontAsk\""),
        "{refused}"
    );
    s.stop().await;
}

on_both!(
    start_takes_the_provider_s_options,
    start_chooses_the_provider_and_repo_show_names_the_check,
    a_closed_pipe_ends_labctl_quietly,
    login_saves_where_lab_is,
    errors_are_json_and_exit_codes_follow_the_table,
);
