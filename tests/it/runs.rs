//! Manual runs in real tmux, with real git workspaces and the fake agent.

use serde_json::{Value, json};

use crate::on_both;
use crate::support::agent;
use crate::support::{Backend, TestServer, git, id, wait};

/// The hostile prompt of the runs issue: it must arrive as one argv element,
/// byte for byte, and nothing in it may run.
fn hostile_prompt(pwned: &std::path::Path) -> String {
    let p = pwned.display();
    let mut s = format!(
        "a; touch {p}.1;\nb\\; run-shell 'touch {p}.2';\n$(touch {p}.3) `touch {p}.4` \"q\" 'q' #{{pane_pid}} #S ##{{x}} \
         unicode: żółć 🚀 ⟨⟩ \t tab\n"
    );
    while s.len() < 100 * 1024 {
        s.push_str("lorem ipsum; dolor $(sit) `amet` #{consectetur} ");
    }
    // The last argument tmux would see ends in `;` followed by what looks
    // like a tmux command.
    s.push_str(&format!(" ; run-shell 'touch {p}.5' ;"));
    s
}

async fn a_hostile_prompt_arrives_byte_for_byte_and_nothing_runs(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let pwned = s.tmp().join("pwned");
    let prompt = hostile_prompt(&pwned);
    assert!(prompt.len() > 100 * 1024);
    let run = s.start_run("r", &prompt).await;
    assert_eq!(run["state"], "running", "{run}");
    let argv = agent::argv(&s.record(id(&run), "argv").await);
    // lab's hooks (ADR 13) run the labctl beside lab.
    let labctl = std::path::Path::new(env!("CARGO_BIN_EXE_lab")).with_file_name("labctl");
    let hook = [
        labctl.to_str().unwrap().to_owned(),
        "hook".into(),
        "claude-code".into(),
    ];
    let settings = json!({"hooks": lab::provider::hooks::claude_hooks(&hook)}).to_string();
    let session = run["cli_session_id"].as_str().unwrap();
    let want: Vec<Vec<u8>> = [
        "--model",
        "sonnet",
        "--effort",
        "high",
        "--session-id",
        session,
        "--settings",
        &settings,
        "--",
        &prompt,
    ]
    .iter()
    .map(|a| a.as_bytes().to_vec())
    .collect();
    assert_eq!(argv.len(), want.len());
    assert!(argv == want, "argv differs");
    // Nothing to wait for: a shell would have run its commands before the
    // agent started (it recorded its argv above), and a tmux command list
    // runs `run-shell` to its end before the call that started the run
    // returns (the run was `running` when it did).
    for i in 1..=5 {
        assert!(
            !std::path::Path::new(&format!("{}.{i}", pwned.display())).exists(),
            "pwned.{i} was created"
        );
    }
    // The prompt is stored as given.
    assert_eq!(
        s.get(&format!("/api/v1/runs/{}", id(&run))).await.ok()["prompt"],
        prompt.as_str()
    );
    s.stop().await;
}

async fn each_run_has_its_own_workspace_branch_and_token(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let r1 = s.start_run("r", "one").await;
    let r2 = s.start_run("r", "two").await;
    let mut seen = Vec::new();
    for r in [&r1, &r2] {
        let cwd = String::from_utf8(s.record(id(r), "cwd").await).unwrap();
        assert_eq!(cwd.trim(), r["workspace"].as_str().unwrap());
        assert!(
            std::path::Path::new(cwd.trim()).join("README.md").exists(),
            "a checkout of main"
        );
        let env = agent::env(&s.record(id(r), "env").await);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("LAB_RUN_ID"), Some(id(r).to_string()));
        assert_eq!(get("LAB_RUN_KIND").as_deref(), Some("manual"));
        assert_eq!(r["phase"], "working", "{r}");
        assert_eq!(get("LAB_URL").as_deref(), Some(s.url.as_str()));
        let token = get("LAB_TOKEN").unwrap();
        assert_ne!(token, s.token, "a run never gets the admin token");
        assert_eq!(token.len(), 64);
        seen.push((cwd, r["branch"].as_str().unwrap().to_owned(), token));
    }
    assert_ne!(seen[0], seen[1]);
    // Each workspace is a clone of its own on the run's branch; the
    // registered repo gets the branch back when the run is done with it.
    for (cwd, branch, _) in &seen {
        let head = std::process::Command::new("git")
            .args(["-C", cwd.trim(), "rev-parse", "--abbrev-ref", "HEAD"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&head.stdout).trim(), branch);
        assert!(
            std::path::Path::new(cwd.trim()).join(".git").is_dir(),
            "a clone, not a worktree"
        );
    }
    s.stop().await;
}

/// A start takes the repo's spare workspace, made after the one before
/// (issue 40 §11): on the run's own branch, at the default branch's head,
/// a clean checkout. When the repo moves, a spare made before is never
/// taken: the run starts at the new head.
async fn a_start_takes_a_spare_made_at_the_repo_s_head(b: Backend) {
    let s = TestServer::start(b).await;
    let repo = s.add_repo("r").await;
    let repo_path = std::path::PathBuf::from(repo["path"].as_str().unwrap());
    let spares = s.data_dir().join("spares");
    let spare_dirs = || -> Vec<String> {
        std::fs::read_dir(&spares)
            .map(|d| {
                d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let head = |dir: &std::path::Path, what: &str| git::git(dir, &["rev-parse", what]);
    let first = s.start_run("r", "one").await;
    let made = wait::until(
        "a spare after the first start",
        wait::secs(20),
        async || {
            let d = spare_dirs();
            // Made when its checkout is done: the spare's branch exists.
            d.first()
                .filter(|n| spares.join(n).join(".git/refs/heads/lab-spare").is_file())
                .cloned()
        },
    )
    .await;
    let second = s.start_run("r", "two").await;
    let ws = std::path::PathBuf::from(second["workspace"].as_str().unwrap());
    assert!(!spares.join(&made).exists(), "the spare was taken");
    assert_eq!(
        git::git(&ws, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        second["branch"].as_str().unwrap()
    );
    assert_eq!(head(&ws, "HEAD"), head(&repo_path, "main"));
    assert_eq!(git::git(&ws, &["status", "--porcelain"]).trim(), "");
    assert!(
        git::git(&ws, &["branch", "--list", "lab-spare"])
            .trim()
            .is_empty(),
        "no trace of the spare's branch"
    );
    assert_ne!(first["workspace"], second["workspace"]);
    // The repo moves; the spare made before is never taken.
    wait::until("the next spare", wait::secs(20), async || {
        let d = spare_dirs();
        d.iter()
            .any(|n| spares.join(n).join(".git/refs/heads/lab-spare").is_file())
            .then_some(())
    })
    .await;
    std::fs::write(repo_path.join("NEW.md"), "moved\n").unwrap();
    crate::support::git::commit_all(&repo_path, "move main");
    let third = s.start_run("r", "three").await;
    let ws = std::path::PathBuf::from(third["workspace"].as_str().unwrap());
    assert_eq!(head(&ws, "HEAD"), head(&repo_path, "main"));
    assert!(ws.join("NEW.md").is_file(), "the moved head is checked out");
    // A run's bytes never reach a spare: the run's own commit stays its.
    crate::support::git::commit_in_run(&third);
    let fourth = s.start_run("r", "four").await;
    let ws = std::path::PathBuf::from(fourth["workspace"].as_str().unwrap());
    assert_eq!(head(&ws, "HEAD"), head(&repo_path, "main"));
    s.stop().await;
}

async fn exit_status_is_recorded(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let ok = s.start_run("r", "FAKE_LINES=2 FAKE_EXIT=0").await;
    let bad = s.start_run("r", "FAKE_EXIT=3 FAKE_SLEEP_MS=200").await;
    let ok = s.wait_state(id(&ok), "exited").await;
    let bad = s.wait_state(id(&bad), "exited").await;
    assert_eq!(ok["exit_status"], 0);
    assert_eq!(bad["exit_status"], 3);
    assert!(bad["state_reason"].as_str().unwrap().contains("status 3"));
    assert!(bad["ended_at"].is_string());
    // The output stays readable after the run ended, and its session is gone.
    let out = s
        .send(s.req(
            reqwest::Method::GET,
            &format!("/api/v1/runs/{}/output", id(&ok)),
        ))
        .await;
    let text = out.body.as_str().unwrap().to_owned();
    // From its very first line: the shim pipes the pane into the log before
    // the agent exists.
    assert!(
        text.contains("fake-agent line 1")
            && text.contains("fake-agent line 2")
            && text.contains("exiting with 0"),
        "{text}"
    );
    let sessions = s.runner().tmux().panes().await.unwrap();
    assert!(
        sessions
            .iter()
            .all(|p| p.session != ok["session"].as_str().unwrap()),
        "{sessions:?}"
    );
    s.stop().await;
}

async fn invalid_starts_start_nothing(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let cases = [
        (json!({"repo": "r", "model": "gpt-5.5"}), 400, "model"),
        (json!({"repo": "r", "effort": "extreme"}), 400, "effort"),
        (json!({"repo": "r", "prompt": "nul\u{0}"}), 400, "prompt"),
        (
            json!({"repo": "r", "prompt": "x".repeat(121 * 1024)}),
            400,
            "prompt",
        ),
        (json!({"repo": "r", "kind": "afk"}), 400, ""),
        (json!({"repo": "nope"}), 404, ""),
        (json!({"model": "opus"}), 400, ""),
    ];
    for (body, status, field) in cases {
        let e = s.post("/api/v1/runs", body.clone()).await.expect(status);
        if !field.is_empty() {
            assert_eq!(e["error"]["field"], field, "{body}");
        }
    }
    assert_eq!(
        s.get("/api/v1/runs").await.ok(),
        json!([]),
        "nothing recorded"
    );
    assert!(
        s.runner().tmux().panes().await.unwrap().is_empty(),
        "no session started"
    );
    s.stop().await;
}

async fn a_missing_cli_is_a_clear_conflict(b: Backend) {
    // Point codex at a path that does not exist.
    let s = TestServer::start_tweaked(b, |cfg| {
        cfg.provider_bins
            .insert("codex".parse().unwrap(), "/nonexistent/codex".into());
    })
    .await;
    s.add_repo("r").await;
    s.patch("/api/v1/repos/r", json!({"provider": "codex"}))
        .await
        .ok();
    let e = s
        .post("/api/v1/runs", json!({"repo": "r"}))
        .await
        .expect(409);
    assert_eq!(e["error"]["code"], "provider_unavailable");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("LAB_CODEX_BIN"),
        "{e}"
    );
    assert_eq!(s.get("/api/v1/runs").await.ok(), json!([]));
    s.stop().await;
}

async fn a_url_repo_runs_from_a_mirror(b: Backend) {
    let s = TestServer::start(b).await;
    let src = git::init_repo(&s.tmp(), "upstream");
    let url = format!("file://{}", src.display());
    s.post("/api/v1/repos", json!({"name": "u", "url": url}))
        .await
        .expect(201);
    let run = s.start_run("u", "hello").await;
    assert_eq!(run["state"], "running", "{run}");
    let cwd = String::from_utf8(s.record(id(&run), "cwd").await).unwrap();
    assert!(std::path::Path::new(cwd.trim()).join("README.md").exists());
    assert!(s.data_dir().join("mirrors").read_dir().unwrap().count() == 1);
    // A new commit upstream is fetched before the next run.
    std::fs::write(src.join("NEW.md"), "new").unwrap();
    git::commit_all(&src, "second");
    let run2 = s.start_run("u", "again").await;
    let cwd2 = String::from_utf8(s.record(id(&run2), "cwd").await).unwrap();
    assert!(
        std::path::Path::new(cwd2.trim()).join("NEW.md").exists(),
        "the mirror was fetched"
    );
    // A branch that does not exist fails the run with a clear reason.
    s.patch("/api/v1/repos/u", json!({"default_branch": "nope"}))
        .await
        .ok();
    let bad = s
        .post("/api/v1/runs", json!({"repo": "u"}))
        .await
        .expect(201);
    assert_eq!(bad["state"], "failed");
    assert!(
        bad["state_reason"]
            .as_str()
            .unwrap()
            .contains("no branch 'nope'"),
        "{bad}"
    );
    s.stop().await;
}

async fn listing_filters(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("a").await;
    s.add_repo("c").await;
    let r1 = s.start_run("a", "FAKE_EXIT=0").await;
    let r2 = s.start_run("c", "stay").await;
    s.wait_state(id(&r1), "exited").await;
    let ids = |v: Value| v.as_array().unwrap().iter().map(id).collect::<Vec<_>>();
    assert_eq!(ids(s.get("/api/v1/runs").await.ok()), [id(&r2), id(&r1)]);
    assert_eq!(ids(s.get("/api/v1/runs?repo=a").await.ok()), [id(&r1)]);
    assert_eq!(
        ids(s.get("/api/v1/runs?state=running").await.ok()),
        [id(&r2)]
    );
    assert_eq!(
        ids(s.get("/api/v1/runs?kind=afk").await.ok()),
        Vec::<i64>::new()
    );
    assert_eq!(
        ids(s.get("/api/v1/runs?kind=manual&limit=1").await.ok()),
        [id(&r2)]
    );
    s.get("/api/v1/runs?state=done").await.expect(400);
    s.get("/api/v1/runs?limit=0").await.expect(400);
    s.get("/api/v1/runs/abc").await.expect(404);
    s.stop().await;
}

/// A launch dropped mid-way (its client hung up after the run was
/// recorded, before its session) leaves no run `starting` for ever:
/// reconcile fails it.
async fn a_dropped_launch_does_not_leave_a_run_starting(b: Backend) {
    use lab::run::LaunchRequest;
    use lab::store::RepoKey;
    // A slow launch: it waits 3 s between recording the run and making its
    // workspace, so it is dropped before any session exists. (A slow
    // checkout hook did this before; a hook whose file another process
    // still held open at its exec did not run, and the launch went through.)
    let s = TestServer::start_tweaked(b, |c| c.launch_pause_ms = 3000).await;
    s.add_repo("r").await;
    let (repo, global) = s
        .runner()
        .store()
        .repo_with_global(&RepoKey::Name("r".into()))
        .await
        .unwrap();
    let mut launch = Box::pin(s.runner().launch(LaunchRequest {
        options: Default::default(),
        repo,
        global,
        kind: lab::domain::RunKind::Manual,
        provider: None,
        model: None,
        effort: None,
        prompt: "FAKE_EXIT=0".into(),
        prompt_names_branch: false,
        env: Default::default(),
        afk_claim: None,
        issue: None,
        issue_layer: None,
        knobs: Vec::new(),
        start_at: None,
    }));
    let recorded = wait::until(
        "the run recorded",
        wait::secs(60).every_ms(20),
        async || {
            let runs = s.get("/api/v1/runs").await.expect(200);
            let run = runs.as_array().unwrap().first()?;
            assert_eq!(run["state"], "starting", "{run}");
            Some(id(run))
        },
    );
    let run_id = tokio::select! {
        r = &mut launch => panic!("the launch ended before it could be dropped: {:?}", r.map(|r| r.state)),
        run_id = recorded => run_id,
    };
    drop(launch);
    let run = s.wait_state(run_id, "failed").await;
    assert!(
        run["state_reason"].as_str().unwrap().contains("vanished"),
        "{run}"
    );
    s.stop().await;
}

on_both!(
    a_dropped_launch_does_not_leave_a_run_starting,
    a_hostile_prompt_arrives_byte_for_byte_and_nothing_runs,
    each_run_has_its_own_workspace_branch_and_token,
    a_start_takes_a_spare_made_at_the_repo_s_head,
    exit_status_is_recorded,
    invalid_starts_start_nothing,
    a_missing_cli_is_a_clear_conflict,
    a_url_repo_runs_from_a_mirror,
    listing_filters,
);

/// A data dir whose path tmux would misread (`#{…}`, a `;`, spaces, quotes)
/// and which is too deep for a Unix socket still runs agents.
async fn a_hostile_and_deep_data_dir_works(b: Backend) {
    let dir = tempfile::Builder::new()
        .prefix("lab-it-")
        .tempdir()
        .unwrap();
    let deep = dir
        .path()
        .join("we;ird #{session_name} 'q' \"d\";")
        .join("x".repeat(60))
        .join("data;");
    std::fs::create_dir_all(&deep).unwrap();
    let url = b.fresh_url().await;
    let s = TestServer::start_with(dir, url, |cfg| cfg.data_dir = Some(deep.clone())).await;
    assert_ne!(
        s.runner().tmux().socket(),
        deep.join("tmux.sock"),
        "a short fallback socket"
    );
    assert!(s.runner().tmux().socket().as_os_str().len() <= 107);
    s.add_repo("r").await;
    let run = s.start_run("r", "FAKE_LINES=1").await;
    assert_eq!(run["state"], "running", "{run}");
    let cwd = String::from_utf8(s.record(id(&run), "cwd").await).unwrap();
    assert_eq!(cwd.trim(), run["workspace"].as_str().unwrap());
    assert!(cwd.contains("#{session_name}"));
    let log = run["log_path"].as_str().unwrap().to_owned();
    let logged = "fake-agent line 1 in the log, where lab says it is";
    wait::until(logged, wait::secs(5), async || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.contains("fake-agent line 1")
    })
    .await;
    let stopped = s
        .post(&format!("/api/v1/runs/{}/stop", id(&run)), json!(null))
        .await
        .ok();
    assert_eq!(stopped["state"], "stopped");
    agent::kill_tmux(s.runner().tmux().socket());
    s.stop().await;
}

on_both!(a_hostile_and_deep_data_dir_works);
