//! Where a machine cannot sandbox runs: a run that would ask nobody is
//! refused with the fix, unless the operator allowed it (per repo or
//! globally); every run says whether it is sandboxed, and only a sandboxed
//! one is told so (`IS_SANDBOX`).

use serde_json::json;

use crate::afk::issue;
use crate::on_both;
use crate::support::{Backend, TestServer, agent, id};

fn has_var(env: &[(String, String)], name: &str, value: &str) -> bool {
    env.iter().any(|(k, v)| k == name && v == value)
}

async fn without_a_sandbox_an_unattended_run_needs_the_operator_s_leave(b: Backend) {
    let s = TestServer::start_unsandboxed(b).await;
    // AFK off for the repo: only `afk start` starts its runs.
    s.add_repo("r").await;
    issue(&s, "r", "Work").await;
    // An AFK run acts without asking anyone (bypassPermissions): refused,
    // naming the fix, and nothing is recorded.
    let refused = s.post("/api/v1/repos/r/afk/start", json!(null)).await;
    let body = refused.expect(409);
    assert_eq!(body["error"]["code"], "unsandboxed", "{body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("bubblewrap") && msg.contains("--allow-unsandboxed"),
        "{msg}"
    );
    assert_eq!(
        s.get("/api/v1/runs").await.ok().as_array().unwrap().len(),
        0
    );
    // A manual run asks a person before it acts: it starts, unsandboxed.
    let manual = s.start_run("r", "stay").await;
    assert_eq!(manual["state"], "running", "{manual}");
    assert_eq!(manual["sandboxed"], false);
    let env = agent::env(&s.record(id(&manual), "env").await);
    assert!(!env.iter().any(|(k, _)| k == "IS_SANDBOX"), "{env:?}");
    // The operator allows it for this repo: the AFK run starts, and says so.
    let repo = s
        .patch("/api/v1/repos/r", json!({"allow_unsandboxed": true}))
        .await
        .ok();
    assert_eq!(repo["allow_unsandboxed"], true);
    let run = s
        .post("/api/v1/repos/r/afk/start", json!(null))
        .await
        .expect(201);
    assert_eq!(run["sandboxed"], false, "{run}");
    // Or globally, when the repo inherits.
    s.patch("/api/v1/repos/r", json!({"allow_unsandboxed": null}))
        .await
        .ok();
    let settings = s
        .patch(
            "/api/v1/settings",
            json!({"runs": {"allow_unsandboxed": true}}),
        )
        .await
        .ok();
    assert_eq!(settings["runs"]["allow_unsandboxed"], true);
    s.stop().await;
}

async fn a_sandboxed_run_says_so(b: Backend) {
    let s = TestServer::start(b).await;
    // AFK off for the repo: only `afk start` starts its runs.
    s.add_repo("r").await;
    issue(&s, "r", "Work").await;
    let run = s
        .post("/api/v1/repos/r/afk/start", json!(null))
        .await
        .expect(201);
    assert_eq!(run["sandboxed"], true, "{run}");
    let env = agent::env(&s.record(id(&run), "env").await);
    assert!(has_var(&env, "IS_SANDBOX", "1"), "{env:?}");
    assert!(has_var(&env, "TMPDIR", "/tmp"), "{env:?}");
    s.stop().await;
}

/// A server whose fake agent is one file in a folder (`agent_dir`), which
/// the sandbox binds alone (issue 40 §10: never its neighbours), and no
/// operator path but the agent's script: the run sees the system, its CLI,
/// its repo's objects and its own folders only.
async fn deny_by_default(b: Backend, agent_dir: &std::path::Path) -> TestServer {
    let fake = agent::install(agent_dir);
    let records = agent_dir.join("records");
    let script = agent_dir.join("afk.sh");
    std::fs::write(&script, "").unwrap();
    TestServer::start_tweaked(b, |c| {
        for p in ["claude-code", "codex"] {
            c.provider_bins.insert(p.parse().unwrap(), fake.clone());
        }
        c.sandbox_ro = vec![script];
        c.sandbox_rw = vec![records];
    })
    .await
}

/// A repo under `/tmp` (which every run has a private one of): its objects
/// are bound wherever the repo lies, so the run commits and opens its pull
/// request; and the run sees nothing else of the host's: not the repo's
/// work tree, not the operator's home, not another folder of `/tmp`.
async fn a_repo_under_tmp_works_and_the_rest_of_the_host_is_not_there(b: Backend) {
    let agent_dir = tempfile::Builder::new()
        .prefix("lab-agent-")
        .tempdir()
        .unwrap();
    let s = deny_by_default(b, agent_dir.path()).await;
    crate::afk::afk_repo(&s, "r").await;
    let repo = s.tmp().join("r");
    assert!(repo.starts_with("/tmp"), "{}", repo.display());
    let operator = s.tmp().join("home");
    std::fs::create_dir_all(&operator).unwrap();
    std::fs::write(operator.join("secret"), "x").unwrap();
    // The CLI's neighbours: another tool, a key.
    let ad = agent_dir.path();
    std::fs::write(ad.join("other-tool"), "x").unwrap();
    std::fs::create_dir_all(ad.join(".ssh")).unwrap();
    std::fs::write(ad.join(".ssh/id"), "x").unwrap();
    let script = format!(
        r#"seen() {{ echo "SEEN: $1" >> "$FAKE_REC/../seen.txt"; }}
cat {ad}/other-tool >/dev/null 2>&1 && seen "the CLI's neighbour"
cat {ad}/.ssh/id >/dev/null 2>&1 && seen "a key beside the CLI"
cat {repo}/README.md >/dev/null 2>&1 && seen "the repo's work tree"
cat {operator}/secret >/dev/null 2>&1 && seen "the operator's home"
cat /etc/shadow 2>/dev/null | grep -q . && seen /etc/shadow
[ -n "$(ls -A /root 2>/dev/null)" ] && seen /root
[ -n "$(ls -A /var 2>/dev/null)" ] && seen /var
id -u > "$FAKE_REC/../uid.txt"
echo fixed > FIX.md && git add FIX.md
git commit -qm "Fix issue $LAB_ISSUE" || exit 8
labctl pr create --title Fix --body done || exit 7
"#,
        repo = repo.display(),
        operator = operator.display(),
        ad = ad.display(),
    );
    std::fs::write(agent_dir.path().join("afk.sh"), script).unwrap();
    let n = issue(&s, "r", "Work under /tmp").await;
    let c = crate::afk::outcome(&s, "r", n, 60).await;
    assert_eq!(c["outcome"], "pr-green", "{c}");
    let seen =
        std::fs::read_to_string(agent_dir.path().join("records/seen.txt")).unwrap_or_default();
    assert!(seen.is_empty(), "{seen}");
    // Not root inside: the agent's own user of its user namespace.
    let uid = std::fs::read_to_string(agent_dir.path().join("records/uid.txt")).unwrap();
    assert_eq!(uid.trim(), lab::run::sandbox::AGENT_UID.to_string());
    // The commit came with the operator's git identity or lab's.
    let log = crate::support::git::git(
        &repo,
        &[
            "log",
            "-1",
            "--format=%an",
            &format!("lab/run-{}", c["run_id"]),
        ],
    );
    assert!(!log.is_empty(), "{log}");
    s.stop().await;
}

/// `lab doctor` checks a CLI that is a link into a folder no run sees
/// (an npm or installer link under the operator's home): it binds what the
/// link resolves to, so the CLI starts and is not reported as refusing lab's
/// command line.
async fn the_doctor_follows_a_cli_link_into_a_hidden_folder(b: Backend) {
    let hidden = tempfile::Builder::new()
        .prefix("lab-hidden-")
        .tempdir()
        .unwrap();
    let real = agent::install(&hidden.path().join("real"));
    let bin = hidden.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("claude");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let s = TestServer::start_tweaked(b, |c| {
        c.provider_bins
            .insert("claude-code".parse().unwrap(), link.clone());
    })
    .await;
    let v = s.get("/api/v1/doctor").await.ok();
    let claude: Vec<&serde_json::Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["area"] == "claude-code")
        .collect();
    assert!(!claude.is_empty(), "{v}");
    for f in &claude {
        let msg = f["message"].as_str().unwrap_or("");
        assert!(!msg.contains("rejects"), "{f}");
        assert!(!msg.contains("did not"), "{f}");
    }
    s.stop().await;
}

on_both!(
    without_a_sandbox_an_unattended_run_needs_the_operator_s_leave,
    a_sandboxed_run_says_so,
    a_repo_under_tmp_works_and_the_rest_of_the_host_is_not_there,
    the_doctor_follows_a_cli_link_into_a_hidden_folder,
);
