//! Merging and closing the built-in tracker's pull requests into the
//! registered repo: a fast-forward, a merge commit made without a working
//! tree, refusals that change nothing, close, and the answers for what is
//! not there.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::diffs::{file, git};
use crate::on_both;
use crate::support::{Backend, TestServer, id};

/// A repo `r`, a run that committed `files` on its branch, and its pull
/// request #1. Returns the run, the repo's path and the branch's commit.
pub async fn pull_with(s: &TestServer, files: &[(&str, &str)]) -> (Value, PathBuf, String) {
    let repo = s.add_repo("r").await;
    let run = s.working_run("r").await;
    let ws = Path::new(run["workspace"].as_str().unwrap()).to_path_buf();
    for (name, text) in files {
        std::fs::write(ws.join(name), text).unwrap();
    }
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-q", "-m", "the agent's work"]);
    let head = git(&ws, &["rev-parse", "HEAD"]);
    s.post(
        &format!("/api/v1/runs/{}/pull", id(&run)),
        json!({"title": "Work", "body": "done"}),
    )
    .await
    .expect(201);
    (run, PathBuf::from(repo["path"].as_str().unwrap()), head)
}

/// Everything a refused merge must leave as it was: refs, work tree and
/// index state, files.
fn snapshot(repo: &Path) -> (String, String, String) {
    (
        git(repo, &["for-each-ref", "--format=%(refname) %(objectname)"]),
        git(repo, &["status", "--porcelain", "-z"]),
        std::fs::read_to_string(repo.join("README.md")).unwrap(),
    )
}

fn commit_on_main(repo: &Path, name: &str, text: &str) -> String {
    std::fs::write(repo.join(name), text).unwrap();
    git(repo, &["add", name]);
    git(repo, &["commit", "-q", "-m", "a person's work"]);
    git(repo, &["rev-parse", "main"])
}

fn has_branch(repo: &Path, branch: &str) -> bool {
    !git(repo, &["branch", "--list", branch]).is_empty()
}

async fn a_fast_forward_moves_the_checked_out_main(b: Backend) {
    let s = TestServer::start(b).await;
    let (run, repo, head) = pull_with(&s, &[("new.txt", "new\n")]).await;
    let branch = run["branch"].as_str().unwrap();
    assert!(has_branch(&repo, branch));
    let pr = s.get("/api/v1/repos/r/pulls/1").await.expect(200);
    assert_eq!(file(&pr["diff"], "new.txt")["added"], 1, "{pr}");
    assert!(
        s.get("/api/v1/repos/r/pulls/1?diff=false")
            .await
            .expect(200)["diff"]
            .is_null()
    );

    let m = s
        .post("/api/v1/repos/r/pulls/1/merge", json!(null))
        .await
        .expect(200);
    assert_eq!(m["sha"], head.as_str(), "{m}");
    assert_eq!(m["fast_forward"], true);
    assert_eq!(m["pull"]["state"], "merged");
    assert_eq!(git(&repo, &["rev-parse", "main"]), head);
    // main is checked out: its files moved with it, and nothing is left over.
    assert_eq!(
        std::fs::read_to_string(repo.join("new.txt")).unwrap(),
        "new\n"
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert!(!has_branch(&repo, branch), "the branch is deleted");
    // The merged pull request keeps its diff.
    let pr = s.get("/api/v1/repos/r/pulls/1").await.expect(200);
    assert_eq!(pr["state"], "merged");
    assert_eq!(pr["merged_sha"], head.as_str());
    assert_eq!(file(&pr["diff"], "new.txt")["added"], 1, "{pr}");
    // Once only; closing it is refused too.
    let again = s
        .post("/api/v1/repos/r/pulls/1/merge", json!(null))
        .await
        .expect(409);
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already merged"),
        "{again}"
    );
    s.post("/api/v1/repos/r/pulls/1/close", json!(null))
        .await
        .expect(409);
    // Removing the run does not bring the merged branch back.
    let rid = id(&run);
    s.post(&format!("/api/v1/runs/{rid}/stop"), json!(null))
        .await
        .ok();
    s.wait_run(rid, 20, |r| r["state"] != "running").await;
    assert_eq!(s.delete(&format!("/api/v1/runs/{rid}")).await.status, 204);
    assert!(!has_branch(&repo, branch), "the branch came back");
    s.stop().await;
}

on_both!(a_fast_forward_moves_the_checked_out_main);

/// A pull request whose commits main already has (a person merged them
/// outside lab) is refused: merging it would make an empty merge commit.
async fn a_merge_with_nothing_to_merge_is_refused(b: Backend) {
    let s = TestServer::start(b).await;
    let (_run, repo, head) = pull_with(&s, &[("new.txt", "new\n")]).await;
    git(&repo, &["merge", "--ff-only", "-q", &head]);
    let before = snapshot(&repo);
    let e = s
        .post("/api/v1/repos/r/pulls/1/merge", json!(null))
        .await
        .expect(409);
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.contains("nothing to merge"), "{msg}");
    assert_eq!(snapshot(&repo), before, "nothing changed");
    s.stop().await;
}

on_both!(a_merge_with_nothing_to_merge_is_refused);

async fn a_merge_commit_when_main_moved_on(b: Backend) {
    let s = TestServer::start(b).await;
    let (run, repo, head) = pull_with(&s, &[("new.txt", "new\n")]).await;
    // main is not checked out: lab moves the ref, the work tree stays.
    let old = commit_on_main(&repo, "mine.txt", "mine\n");
    git(&repo, &["switch", "-q", "-c", "elsewhere"]);
    let before_tree = git(&repo, &["status", "--porcelain"]);
    let m = s
        .post("/api/v1/repos/r/pulls/1/merge", json!(null))
        .await
        .expect(200);
    let sha = m["sha"].as_str().unwrap();
    assert_eq!(m["fast_forward"], false, "{m}");
    assert_eq!(git(&repo, &["rev-parse", "main"]), sha);
    assert_eq!(git(&repo, &["rev-parse", &format!("{sha}^1")]), old);
    assert_eq!(git(&repo, &["rev-parse", &format!("{sha}^2")]), head);
    assert_eq!(git(&repo, &["show", &format!("{sha}:new.txt")]), "new");
    assert_eq!(git(&repo, &["show", &format!("{sha}:mine.txt")]), "mine");
    assert_eq!(git(&repo, &["status", "--porcelain"]), before_tree);
    assert!(!has_branch(&repo, run["branch"].as_str().unwrap()));
    s.stop().await;
}

on_both!(a_merge_commit_when_main_moved_on);

async fn a_conflict_is_refused_and_changes_nothing(b: Backend) {
    let s = TestServer::start(b).await;
    let (run, repo, _) = pull_with(&s, &[("README.md", "the agent's\n")]).await;
    commit_on_main(&repo, "README.md", "a person's\n");
    let before = snapshot(&repo);
    let e = s
        .post("/api/v1/repos/r/pulls/1/merge", json!(null))
        .await
        .expect(409);
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("conflicts") && msg.contains("README.md"),
        "{msg}"
    );
    assert_eq!(snapshot(&repo), before);
    assert_eq!(
        s.get("/api/v1/repos/r/pulls/1").await.expect(200)["state"],
        "open"
    );
    assert!(has_branch(&repo, run["branch"].as_str().unwrap()));
    s.stop().await;
}

on_both!(a_conflict_is_refused_and_changes_nothing);

async fn a_dirty_checked_out_main_is_refused(b: Backend) {
    let s = TestServer::start(b).await;
    let (run, repo, _) = pull_with(&s, &[("new.txt", "new\n")]).await;
    std::fs::write(repo.join("README.md"), "a person is editing\n").unwrap();
    let before = snapshot(&repo);
    let e = s
        .post("/api/v1/repos/r/pulls/1/merge", json!(null))
        .await
        .expect(409);
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.contains("local changes"), "{msg}");
    assert_eq!(snapshot(&repo), before);
    assert!(!repo.join("new.txt").exists());
    assert_eq!(
        s.get("/api/v1/repos/r/pulls/1").await.expect(200)["state"],
        "open"
    );
    assert!(has_branch(&repo, run["branch"].as_str().unwrap()));
    s.stop().await;
}

on_both!(a_dirty_checked_out_main_is_refused);

async fn close_keeps_the_branch_and_ends_the_pull(b: Backend) {
    let s = TestServer::start(b).await;
    let (run, repo, _) = pull_with(&s, &[("new.txt", "new\n")]).await;
    let main = git(&repo, &["rev-parse", "main"]);
    let c = s
        .post("/api/v1/repos/r/pulls/1/close", json!(null))
        .await
        .expect(200);
    assert_eq!(c["state"], "closed", "{c}");
    assert!(has_branch(&repo, run["branch"].as_str().unwrap()));
    assert_eq!(git(&repo, &["rev-parse", "main"]), main);
    let e = s
        .post("/api/v1/repos/r/pulls/1/merge", json!(null))
        .await
        .expect(409);
    assert!(
        e["error"]["message"].as_str().unwrap().contains("closed"),
        "{e}"
    );
    s.post("/api/v1/repos/r/pulls/1/close", json!(null))
        .await
        .expect(409);
    // What is not there.
    s.post("/api/v1/repos/r/pulls/2/merge", json!(null))
        .await
        .expect(404);
    s.post("/api/v1/repos/nope/pulls/1/merge", json!(null))
        .await
        .expect(404);
    s.post("/api/v1/repos/r/pulls/x/merge", json!(null))
        .await
        .expect(400);
    s.post("/api/v1/repos/r/pulls/x/close", json!(null))
        .await
        .expect(400);
    // A run's token may not merge its own pull request.
    let token = s.run_token(id(&run)).await;
    let r = s
        .send(
            reqwest::Client::new()
                .post(format!("{}/api/v1/repos/r/pulls/1/merge", s.url))
                .bearer_auth(&token),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    s.stop().await;
}

on_both!(close_keeps_the_branch_and_ends_the_pull);

/// A page's merge without the session's CSRF token is refused and changes
/// nothing; with it, it merges and goes back to the pull request's page.
async fn a_page_merge_needs_its_csrf_token(b: Backend) {
    use crate::pages_input::{client, session, visit};
    use reqwest::header::{CONTENT_TYPE, COOKIE};
    let s = TestServer::start(b).await;
    let (_, repo, head) = pull_with(&s, &[("new.txt", "new\n")]).await;
    let before = snapshot(&repo);
    let cookie = session(&s).await;
    let post = |body: String| {
        client()
            .post(format!("{}/repos/r/pulls/1/merge", s.url))
            .header(COOKIE, &cookie)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let r = post("csrf=forged".into()).await.unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(snapshot(&repo), before);
    assert_eq!(
        s.get("/api/v1/repos/r/pulls/1").await.expect(200)["state"],
        "open"
    );
    let page = visit(&s, &cookie, reqwest::Method::GET, "/repos/r/pulls/1")
        .await
        .text()
        .await
        .unwrap();
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page has a CSRF token")
        .to_owned();
    let r = post(format!("csrf={csrf}")).await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(git(&repo, &["rev-parse", "main"]), head);
    s.stop().await;
}

on_both!(a_page_merge_needs_its_csrf_token);
