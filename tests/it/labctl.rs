//! The real labctl binary against a real server.

use std::process::{Command, Output};

use serde_json::Value;

use crate::on_both;
use crate::support::{Backend, TestServer, git, wait};

pub fn labctl(s: &TestServer, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_labctl"))
        .args(args)
        .env("LAB_URL", &s.url)
        .env_remove("LAB_TOKEN")
        .env("LAB_DATA_DIR", s.data_dir())
        .env("LABCTL_CONFIG", s.tmp().join("labctl.toml"))
        .output()
        .expect("labctl runs")
}

#[track_caller]
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "labctl failed ({:?}): {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[track_caller]
pub fn json(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).expect("labctl --json prints JSON")
}

#[track_caller]
fn code(out: &Output) -> (i32, String) {
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn repos_settings_and_resolve(b: Backend) {
    let s = TestServer::start(b).await;
    let path = git::init_repo(&s.tmp(), "web");
    let p = path.to_str().unwrap();

    let v = json(&labctl(&s, &["providers", "--json"]));
    assert_eq!(v[0]["id"], "claude-code");
    assert!(ok(&labctl(&s, &["providers"])).contains("ultracode"));

    let r = json(&labctl(
        &s,
        &[
            "repo", "add", "web", "--path", p, "--model", "opus", "--json",
        ],
    ));
    assert_eq!(r["model_default"], "opus");
    let out = ok(&labctl(&s, &["repo", "list"]));
    assert!(out.contains("web") && out.contains("claude-code"), "{out}");
    assert_eq!(
        json(&labctl(&s, &["repo", "list", "--json"]))[0]["name"],
        "web"
    );
    assert!(ok(&labctl(&s, &["repo", "show", "web"])).contains("opus"));

    let r = json(&labctl(
        &s,
        &[
            "repo",
            "set",
            "web",
            "--afk-model",
            "haiku",
            "--afk-option",
            "ultracode=true",
            "--json",
        ],
    ));
    assert_eq!(r["afk_model_default"], "haiku");
    assert_eq!(r["afk_options"]["ultracode"], "true");
    let r = json(&labctl(
        &s,
        &[
            "repo",
            "set",
            "web",
            "--model",
            "",
            "--afk-option",
            "ultracode=",
            "--json",
        ],
    ));
    assert!(r["model_default"].is_null());
    assert_eq!(r["afk_options"], serde_json::json!({}));

    let v = json(&labctl(
        &s,
        &[
            "settings",
            "set",
            "--provider",
            "claude-code",
            "--model",
            "fable",
            "--tick-seconds",
            "12",
            "--json",
        ],
    ));
    assert_eq!(v["providers"]["claude-code"]["model_default"], "fable");
    assert_eq!(v["afk"]["tick_seconds"], 12);
    assert!(ok(&labctl(&s, &["settings", "show"])).contains("fable"));

    let v = json(&labctl(&s, &["resolve", "web", "--kind", "afk", "--json"]));
    assert_eq!(v["model"]["value"], "haiku");
    assert_eq!(v["model"]["source"], "repo.afk");
    let out = ok(&labctl(&s, &["resolve", "web"]));
    assert!(
        out.contains("fable") && out.contains("global.base"),
        "{out}"
    );

    ok(&labctl(&s, &["repo", "rm", "web"]));
    assert_eq!(
        json(&labctl(&s, &["repo", "list", "--json"])),
        serde_json::json!([])
    );
    s.stop().await;
}

async fn exit_codes_mean_something(b: Backend) {
    let s = TestServer::start(b).await;
    let path = git::init_repo(&s.tmp(), "x");
    let (c, err) = code(&labctl(&s, &["repo", "show", "nope"]));
    assert_eq!(c, 3, "{err}");
    assert!(err.contains("repo 'nope' not found"), "{err}");
    assert_eq!(err.lines().count(), 1, "printed once: {err}");
    let (c, err) = code(&labctl(
        &s,
        &[
            "repo",
            "add",
            "x",
            "--path",
            path.to_str().unwrap(),
            "--model",
            "gpt-5.5",
        ],
    ));
    assert_eq!(c, 5, "{err}");
    assert!(
        err.contains("unknown model 'gpt-5.5'") && err.contains("opus"),
        "{err}"
    );
    ok(&labctl(
        &s,
        &["repo", "add", "x", "--path", path.to_str().unwrap()],
    ));
    let (c, _) = code(&labctl(
        &s,
        &["repo", "add", "x", "--path", path.to_str().unwrap()],
    ));
    assert_eq!(c, 4);
    let (c, _) = code(&labctl(&s, &["settings", "set", "--model", "opus"]));
    assert_eq!(c, 5, "--provider is required");
    let (c, _) = code(&labctl(&s, &["repo", "bogus"]));
    assert_eq!(c, 2);
    let out = Command::new(env!("CARGO_BIN_EXE_labctl"))
        .args(["repo", "list"])
        .env("LAB_URL", &s.url)
        .env("LAB_TOKEN", "wrong")
        .output()
        .unwrap();
    assert_eq!(code(&out).0, 6);
    let (_held, refused) = crate::support::refused_url();
    let out = Command::new(env!("CARGO_BIN_EXE_labctl"))
        .args(["repo", "list"])
        .env("LAB_URL", &refused)
        .env("LAB_TOKEN", "x")
        .output()
        .unwrap();
    let (c, err) = code(&out);
    assert_eq!(c, 7, "{err}");
    assert!(err.contains("cannot reach lab"), "{err}");
    s.stop().await;
}

#[test]
fn completions_are_generated() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(env!("CARGO_BIN_EXE_labctl"))
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("labctl") && text.contains("resolve"),
            "{shell}"
        );
    }
}

on_both!(repos_settings_and_resolve, exit_codes_mean_something);

async fn start_ps_logs_stop_rm(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("web").await;
    let run = json(&labctl(
        &s,
        &[
            "start",
            "web",
            "--prompt",
            "FAKE_LINES=3",
            "--effort",
            "low",
            "--json",
        ],
    ));
    assert_eq!(run["state"], "running");
    assert_eq!(run["effort"]["value"], "low");
    let id = run["id"].as_i64().unwrap().to_string();
    let text = ok(&labctl(&s, &["start", "web", "--prompt", "FAKE_EXIT=0"]));
    assert!(text.contains("labctl attach"), "{text}");

    let ps = json(&labctl(&s, &["ps", "--json"]));
    assert!(
        ps.as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"].as_i64().map(|i| i.to_string()).as_deref() == Some(id.as_str()))
    );
    let table = ok(&labctl(&s, &["ps"]));
    assert!(
        table.contains("running") && table.contains("web"),
        "{table}"
    );

    let line_3 = "fake-agent line 3 in `labctl logs`";
    wait::until(line_3, wait::secs(10).every_ms(100), async || {
        let logs = ok(&labctl(&s, &["logs", &id]));
        if logs.contains("fake-agent line 3") {
            Ok(())
        } else {
            Err(logs)
        }
    })
    .await;
    // `logs -f` follows until the run ends: once it has printed the log so
    // far (it follows then), stop the run from another labctl.
    let mut follower = tokio::process::Command::new(env!("CARGO_BIN_EXE_labctl"))
        .args(["logs", "-f", &id])
        .env("LAB_URL", &s.url)
        .env("LAB_DATA_DIR", s.data_dir())
        .env_remove("LAB_TOKEN")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut printed = Vec::new();
    let mut stdout = follower.stdout.take().unwrap();
    let read_to_line_3 = async {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&printed).contains("fake-agent line 3") {
            let n = stdout.read(&mut buf).await.unwrap();
            assert!(n > 0, "`logs -f` ended before it printed line 3");
            printed.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read_to_line_3)
        .await
        .expect("`logs -f` prints the log so far within 10 s");
    let stopped = json(&labctl(&s, &["stop", &id, "--json"]));
    assert_eq!(stopped["state"], "stopped");
    let ended = async {
        use tokio::io::AsyncReadExt;
        stdout.read_to_end(&mut printed).await.unwrap();
        follower.wait().await.unwrap()
    };
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), ended)
        .await
        .expect("`logs -f` ends with its run");
    assert!(status.success(), "{}", String::from_utf8_lossy(&printed));

    // Stopping a run that ended is no error: it says so.
    let again = ok(&labctl(&s, &["stop", &id]));
    assert!(again.contains("already ended (stopped)"), "{again}");
    let (c, err) = code(&labctl(&s, &["attach", &id]));
    assert_eq!(c, 4, "{err}");
    assert!(err.contains("labctl logs"), "{err}");
    ok(&labctl(&s, &["rm", &id]));
    let (c, _) = code(&labctl(&s, &["logs", &id]));
    assert_eq!(c, 3);
    let (c, _) = code(&labctl(&s, &["start", "web", "--model", "gpt-6-sol"]));
    assert_eq!(c, 5);
    s.stop().await;
}

/// `labctl attach` in a real terminal (script(1) gives it one) becomes a
/// tmux client of the run's session.
async fn attach_joins_the_session(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("web").await;
    let run = s.start_run("web", "stay").await;
    let id = run["id"].as_i64().unwrap();
    let socket = run["tmux_socket"].as_str().unwrap().to_owned();
    let cmd = format!("{} attach {id}", env!("CARGO_BIN_EXE_labctl"));
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("LAB_URL", &s.url)
        .env("LAB_DATA_DIR", s.data_dir())
        .env("TERM", "xterm")
        .env_remove("LAB_TOKEN")
        .env_remove("TMUX")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let attached = wait::within(wait::secs(5), async || {
        let out = Command::new("tmux")
            .args(["-S", &socket, "list-clients", "-F", "#{client_session}"])
            .output()
            .unwrap();
        let attached = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        (!attached.is_empty()).then_some(attached)
    })
    .await
    .unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(attached, run["session"].as_str().unwrap());
    s.stop().await;
}

/// Issues, the AFK scheduler's switches, an operator's AFK start, and the
/// ledger it ends up in, all through labctl.
async fn issues_afk_and_ledger(b: Backend) {
    let s = TestServer::start(b).await;
    std::fs::write(s.tmp().join("afk.sh"), "echo 'no can do'\nexit 2\n").unwrap();
    s.add_repo("web").await;

    let i = json(&labctl(
        &s,
        &[
            "issue",
            "create",
            "--repo",
            "web",
            "--title",
            "Add dark mode",
            "--label",
            "ready-for-agent",
            "--json",
        ],
    ));
    assert_eq!(i["number"], 1);
    let other = json(&labctl(
        &s,
        &[
            "issue", "create", "--repo", "web", "--title", "Later", "--json",
        ],
    ));
    let out = ok(&labctl(&s, &["issue", "list", "--repo", "web"]));
    assert!(
        out.contains("#1") && out.contains("Add dark mode") && out.contains("ready-for-agent"),
        "{out}"
    );
    let listed = json(&labctl(
        &s,
        &[
            "issue",
            "list",
            "--repo",
            "web",
            "--label",
            "ready-for-agent",
            "--json",
        ],
    ));
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let n = other["number"].to_string();
    ok(&labctl(&s, &["issue", "close", &n, "--repo", "web"]));
    assert!(ok(&labctl(&s, &["issue", "view", &n, "--repo", "web"])).contains("[closed]"));
    // Outside a run, the repo must be named.
    assert_eq!(code(&labctl(&s, &["issue", "list"])).0, 2);

    ok(&labctl(&s, &["afk", "pause"]));
    assert!(ok(&labctl(&s, &["afk", "status"])).contains("PAUSED"));
    let (c, err) = code(&labctl(&s, &["afk", "start", "web"]));
    assert_eq!(c, 4, "{err}");
    assert!(err.contains("paused"), "{err}");
    ok(&labctl(&s, &["afk", "resume"]));

    let run = json(&labctl(&s, &["afk", "start", "web", "--json"]));
    assert_eq!(run["kind"], "afk", "{run}");
    let ledger = wait::until(
        "an outcome in the ledger",
        wait::secs(30).every_ms(200),
        async || {
            let l = json(&labctl(&s, &["ledger", "--json"]));
            if l["by_repo"][0]["failed"] == 1 {
                Ok(l)
            } else {
                Err(l)
            }
        },
    )
    .await;
    assert_eq!(ledger["by_repo"][0]["runs"], 1);
    // The fake agent writes no transcript: no tokens, and no known cost.
    assert_eq!(ledger["by_outcome"][0]["outcome"], "failed", "{ledger}");
    assert_eq!(ledger["by_outcome"][0]["tokens"], 0, "{ledger}");
    assert!(ledger["by_outcome"][0]["cost_usd"].is_null(), "{ledger}");
    let out = ok(&labctl(&s, &["ledger"]));
    assert!(out.contains("web") && out.contains("FAILED"), "{out}");
    assert!(
        out.contains("TOKENS") && out.contains("PER SUCCESS") && out.contains("PER MERGED"),
        "{out}"
    );
    assert!(out.contains("OUTCOME"), "{out}");
    let out = ok(&labctl(&s, &["afk", "status"]));
    assert!(out.contains("#1") && out.contains("failed"), "{out}");
    assert!(out.contains("OUTCOME") && out.contains("TOKENS"), "{out}");

    let (c, err) = code(&labctl(&s, &["pr", "create", "--title", "x"]));
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("--run"), "{err}");

    // Issues on a forge, the token read from standard input (lab checks
    // it against the forge when it is set).
    let forge =
        crate::support::forge::FakeForge::start(crate::support::forge::Flavor::Github).await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_labctl"))
        .args([
            "repo",
            "set",
            "web",
            "--issue-source",
            "github",
            "--forge-url",
            &forge.url,
            "--forge-repo",
            "owner/repo",
            "--forge-token",
            "-",
            "--json",
        ])
        .env("LAB_URL", &s.url)
        .env_remove("LAB_TOKEN")
        .env("LAB_DATA_DIR", s.data_dir())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(format!("{}\n", forge.fake.token).as_bytes())
            .unwrap();
    }
    let r = json(&child.wait_with_output().unwrap());
    assert_eq!(r["issue_source"], "github", "{r}");
    assert_eq!(r["forge_repo"], "owner/repo");
    assert_eq!(r["forge_token"], "…1234", "only a hint comes back: {r}");
    let out = ok(&labctl(&s, &["repo", "show", "web"]));
    assert!(
        out.contains("github, owner/repo") && out.contains("…1234"),
        "{out}"
    );
    assert!(!out.contains("secret"), "{out}");
    let (c, _) = code(&labctl(
        &s,
        &["repo", "set", "web", "--issue-source", "gitlab"],
    ));
    assert_eq!(c, 2);
    let (c, err) = code(&labctl(
        &s,
        &[
            "repo",
            "set",
            "web",
            "--issue-source",
            "gitea",
            "--forge-url",
            "not a url",
        ],
    ));
    assert_eq!(c, 5, "{err}");
    assert!(err.contains("forge_url"), "{err}");
    s.stop().await;
}

on_both!(
    start_ps_logs_stop_rm,
    attach_joins_the_session,
    issues_afk_and_ledger
);
