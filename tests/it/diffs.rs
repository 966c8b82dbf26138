//! A run's changes (`GET /api/v1/runs/{id}/diff`): committed, uncommitted
//! and untracked files of a live run, read without touching its workspace;
//! hostile names, a binary file, a huge file cut short; then, once the
//! workspace is gone, its branch in the repo.

use std::path::Path;

use serde_json::{Value, json};

use crate::on_both;
use crate::support::{Backend, TestServer, id};

pub use crate::support::git::git;

/// The file of a diff at `path`.
pub fn file<'a>(d: &'a Value, path: &str) -> &'a Value {
    d["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("no {path:?} in {d}"))
}

/// A name no shell or patch header would read back as it is.
pub const HOSTILE: &str = "sp ace \"q\"\ttab\nnew\\line ünï.txt";

async fn a_live_runs_diff_has_all_its_work(b: Backend) {
    let s = TestServer::start(b).await;
    let repo = s.add_repo("r").await;
    let main = git(
        Path::new(repo["path"].as_str().unwrap()),
        &["rev-parse", "main"],
    );
    let run = s.working_run("r").await;
    let rid = id(&run);
    let ws = Path::new(run["workspace"].as_str().unwrap()).to_path_buf();

    // Committed: a new file.
    std::fs::write(ws.join("a.txt"), "one\ntwo\n").unwrap();
    git(&ws, &["add", "a.txt"]);
    git(&ws, &["commit", "-q", "-m", "add a"]);
    let head = git(&ws, &["rev-parse", "HEAD"]);
    // Uncommitted: a change to a tracked file; staged: nothing else.
    std::fs::write(ws.join("README.md"), "# r, changed\n").unwrap();
    // Untracked: a hostile name, a binary file, a huge file.
    std::fs::write(ws.join(HOSTILE), "hostile\n").unwrap();
    std::fs::write(ws.join("blob.bin"), [0u8, 1, 2, 0, 255, 0]).unwrap();
    let huge: String = (0..60_000).map(|i| format!("line {i:06}\n")).collect();
    std::fs::write(ws.join("huge.txt"), &huge).unwrap();
    let index = std::fs::read(ws.join(".git/index")).unwrap();
    let status = git(&ws, &["status", "--porcelain", "-z"]);

    let d = s.get(&format!("/api/v1/runs/{rid}/diff")).await.expect(200);
    assert_eq!(d["base"], main.as_str(), "{d}");
    assert_eq!(d["head"], head.as_str(), "{d}");
    assert_eq!(d["work_tree"], true);
    let a = file(&d, "a.txt");
    assert_eq!(
        (a["added"].as_u64(), a["removed"].as_u64()),
        (Some(2), Some(0))
    );
    assert_eq!(a["status"], "added");
    assert_eq!(a["patch"], "@@ -0,0 +1,2 @@\n+one\n+two\n");
    let readme = file(&d, "README.md");
    assert_eq!(readme["status"], "modified");
    assert_eq!(
        (readme["added"].as_u64(), readme["removed"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(
        readme["patch"].as_str().unwrap().contains("+# r, changed"),
        "{readme}"
    );
    let h = file(&d, HOSTILE);
    assert_eq!(h["patch"], "@@ -0,0 +1 @@\n+hostile\n");
    let bin = file(&d, "blob.bin");
    assert_eq!(bin["binary"], true, "{bin}");
    assert_eq!(bin["patch"], "");
    let big = file(&d, "huge.txt");
    assert_eq!(big["added"], 60_000);
    assert_eq!(big["truncated"], true);
    let patch = big["patch"].as_str().unwrap();
    assert!(
        patch.len() <= 512 * 1024 && patch.ends_with('\n'),
        "{}",
        patch.len()
    );
    assert_eq!(d["truncated"], true);
    assert_eq!(d["files"].as_array().unwrap().len(), 5, "{d}");

    // The agent's index and status are as they were.
    assert_eq!(std::fs::read(ws.join(".git/index")).unwrap(), index);
    assert_eq!(git(&ws, &["status", "--porcelain", "-z"]), status);

    // Not a run; not a number.
    s.get("/api/v1/runs/999999/diff").await.expect(404);
    s.get("/api/v1/runs/x/diff").await.expect(404);

    // Once the workspace is gone: the branch fetched back into the repo,
    // its commits only.
    s.post(&format!("/api/v1/runs/{rid}/stop"), json!(null))
        .await
        .ok();
    s.wait_run(rid, 20, |r| r["state"] != "running").await;
    assert_eq!(s.delete(&format!("/api/v1/runs/{rid}")).await.status, 204);
    assert!(!ws.exists());
    let repo_path = Path::new(repo["path"].as_str().unwrap());
    let branch = run["branch"].as_str().unwrap();
    assert_eq!(git(repo_path, &["rev-parse", branch]), head);
    s.stop().await;
}

on_both!(a_live_runs_diff_has_all_its_work);

async fn an_agents_git_config_is_not_run(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = s.working_run("r").await;
    let ws = Path::new(run["workspace"].as_str().unwrap()).to_path_buf();
    let marker = s.tmp().join("pwned");
    let cmd = format!("touch {}", marker.display());
    // A clean filter and an fsmonitor of the agent's: git would run them on
    // the agent's files if lab read them through the agent's config.
    git(&ws, &["config", "filter.evil.clean", &cmd]);
    git(&ws, &["config", "core.fsmonitor", &cmd]);
    git(&ws, &["config", "diff.external", &cmd]);
    std::fs::write(ws.join(".gitattributes"), "* filter=evil diff=evil\n").unwrap();
    std::fs::write(ws.join("x.txt"), "x\n").unwrap();
    let d = s
        .get(&format!("/api/v1/runs/{}/diff", id(&run)))
        .await
        .expect(200);
    assert_eq!(file(&d, "x.txt")["added"], 1, "{d}");
    assert!(!marker.exists(), "lab ran the agent's git config");
    s.stop().await;
}

on_both!(an_agents_git_config_is_not_run);
