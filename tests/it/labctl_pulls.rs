//! `labctl diff` and `labctl pr list|view|merge|close` against a real
//! server: what a person reads in a terminal, an agent's control characters
//! never sent raw.

use std::path::Path;

use crate::diffs::git;
use crate::labctl::{json, labctl, ok};
use crate::on_both;
use crate::pulls_merge::pull_with;
use crate::support::{Backend, TestServer, id};

async fn labctl_reads_merges_and_closes(b: Backend) {
    let s = TestServer::start(b).await;
    let (run, repo, head) = pull_with(&s, &[("new.txt", "new\n")]).await;
    let rid = id(&run).to_string();
    let ws = Path::new(run["workspace"].as_str().unwrap());
    std::fs::write(ws.join("e\x1b[31mvil"), "red\x1b[0m\n").unwrap();

    let d = json(&labctl(&s, &["diff", &rid, "--json"]));
    assert_eq!(d["work_tree"], true, "{d}");
    assert_eq!(d["files"].as_array().unwrap().len(), 2, "{d}");
    let stat = ok(&labctl(&s, &["diff", &rid, "--stat"]));
    assert!(stat.contains(" new.txt | +1 -0 (added)"), "{stat}");
    assert!(stat.contains("e\\x1b[31mvil"), "{stat}");
    assert!(stat.contains("2 files changed, +2 -0"), "{stat}");
    let full = ok(&labctl(&s, &["diff", &rid]));
    assert!(
        full.contains("+++ b/new.txt\n@@ -0,0 +1 @@\n+new\n"),
        "{full}"
    );
    assert!(
        !full.contains('\x1b'),
        "a raw escape reached the terminal: {full:?}"
    );

    let list = ok(&labctl(&s, &["pr", "list", "--repo", "r"]));
    assert!(list.contains("Work") && list.contains("open"), "{list}");
    let view = ok(&labctl(&s, &["pr", "view", "1", "--repo", "r"]));
    assert!(view.contains("#1 Work (open)"), "{view}");
    assert!(view.contains("+new"), "{view}");
    let m = json(&labctl(&s, &["pr", "merge", "1", "--repo", "r", "--json"]));
    assert_eq!(m["sha"], head.as_str(), "{m}");
    assert_eq!(git(&repo, &["rev-parse", "main"]), head);
    let again = labctl(&s, &["pr", "close", "1", "--repo", "r"]);
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("already merged"), "{err}");
    // `pr create` still answers as before (once per run).
    let create = labctl(&s, &["pr", "create", "--title", "t", "--run", &rid]);
    assert!(!create.status.success());
    assert!(String::from_utf8_lossy(&create.stderr).contains("already opened"));
    s.stop().await;
}

on_both!(labctl_reads_merges_and_closes);
