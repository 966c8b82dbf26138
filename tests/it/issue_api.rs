//! The issue routes the pages added, over the API and labctl: reopen, and
//! labels on and off (`POST /repos/{id}/issues/{n}/reopen|labels`,
//! `labctl issue reopen|label`), with bad input and a run's token refused.

use serde_json::json;

use crate::issue_pages::new_issue;
use crate::labctl::{labctl, ok};
use crate::on_both;
use crate::support::{Backend, TestServer};

async fn reopen_and_labels_api(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let n = new_issue(&s, "r", "t", &["bug"]).await;
    let base = format!("/api/v1/repos/r/issues/{n}");
    s.post(&format!("{base}/close"), json!(null)).await.ok();
    let i = s.post(&format!("{base}/reopen"), json!(null)).await.ok();
    assert_eq!(i["state"], "open");
    let i = s
        .post(
            &format!("{base}/labels"),
            json!({"add": ["ready-for-agent", "ui"], "remove": ["bug", "absent"]}),
        )
        .await
        .ok();
    assert_eq!(i["labels"], json!(["ready-for-agent", "ui"]));
    // Bad input: 400 naming the field, nothing changed.
    let e = s
        .post(
            &format!("{base}/labels"),
            json!({"add": ["ok", "a,b"], "remove": ["ui"]}),
        )
        .await
        .expect(400);
    assert_eq!(e["error"]["field"], "add[1]", "{e}");
    let many: Vec<String> = (0..21).map(|i| format!("l{i}")).collect();
    let e = s
        .post(&format!("{base}/labels"), json!({"add": many}))
        .await
        .expect(400);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 20"),
        "{e}"
    );
    s.post(&format!("{base}/labels"), json!({"add": ["x"], "extra": 1}))
        .await
        .expect(400);
    let i = s.get(&base).await.ok();
    assert_eq!(i["labels"], json!(["ready-for-agent", "ui"]));
    s.post("/api/v1/repos/r/issues/99/reopen", json!(null))
        .await
        .expect(404);
    s.post("/api/v1/repos/r/issues/99/labels", json!({"add": ["x"]}))
        .await
        .expect(404);
    s.post("/api/v1/repos/nosuch/issues/1/reopen", json!(null))
        .await
        .expect(404);

    // A run's token reads its repo's issues, and changes none.
    let run = s.working_run("r").await;
    let token = s.run_token(crate::support::id(&run)).await;
    let as_run = crate::support::api::Api::new(s.url.clone(), token);
    as_run.get(&base).await.ok();
    as_run
        .post(&format!("{base}/labels"), json!({"remove": ["ui"]}))
        .await
        .expect(403);
    as_run
        .post(&format!("{base}/close"), json!(null))
        .await
        .expect(403);
    as_run
        .post(&format!("{base}/reopen"), json!(null))
        .await
        .expect(403);
    assert_eq!(
        s.get(&base).await.ok()["labels"],
        json!(["ready-for-agent", "ui"])
    );

    // labctl issue reopen and label.
    let cli = |line: String| labctl(&s, &line.split(' ').collect::<Vec<_>>());
    s.post(&format!("{base}/close"), json!(null)).await.ok();
    let out = ok(&cli(format!("issue reopen {n} --repo r")));
    assert!(out.contains(&format!("reopened issue #{n} of r")), "{out}");
    assert_eq!(s.get(&base).await.ok()["state"], "open");
    let out = ok(&cli(format!(
        "issue label {n} --repo r --add docs --remove ui"
    )));
    assert_eq!(
        out.trim(),
        format!("issue #{n} of r: docs, ready-for-agent")
    );
    let bad = cli(format!("issue label {n} --repo r --add a,b"));
    assert_eq!(bad.status.code(), Some(5), "invalid: {bad:?}");
    let bad = labctl(&s, &["issue", "reopen", "99", "--repo", "r"]);
    assert_eq!(bad.status.code(), Some(3), "not found");
    s.stop().await;
}

on_both!(reopen_and_labels_api);
