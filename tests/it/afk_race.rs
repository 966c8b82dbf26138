//! Two `lab serve` processes on one PostgreSQL database, their schedulers
//! and operators' `afk start` racing over many issues: no issue is launched
//! twice, no cap is exceeded.

use std::collections::HashMap;

use serde_json::json;
use sqlx::Connection;

use crate::on_postgres;
use crate::support::process::LabProcess;
use crate::support::{Backend, agent, git, wait};

async fn two_nodes_never_take_an_issue_twice_nor_pass_a_cap(pg: Backend) {
    let url = pg.fresh_url().await.expect("a PostgreSQL database");
    let tmp = tempfile::Builder::new()
        .prefix("lab-race-")
        .tempdir()
        .unwrap();
    let bin = agent::install(tmp.path());
    // Every AFK run works a little and fails (so its issue is relabelled and
    // never taken again).
    std::fs::write(tmp.path().join("afk.sh"), "sleep 1\nexit 1\n").unwrap();
    let (da, db) = (tmp.path().join("a"), tmp.path().join("b"));
    for d in [&da, &db] {
        std::fs::create_dir_all(d).unwrap();
    }
    let a = LabProcess::start(&da, Some(&url), &bin, &[]).await;
    let b = LabProcess::start(&db, Some(&url), &bin, &[]).await;
    let (repo_cap, global_cap, repos, per_repo) = (2, 3, 4, 10);
    // Pause first, so both schedulers start on a full backlog at once.
    a.post("/api/v1/afk/pause", json!(null)).await;
    a.patch(
        "/api/v1/settings",
        json!({"afk": {"tick_seconds": 1, "max_concurrent": global_cap, "max_attempts": 1}}),
    )
    .await;
    for r in 0..repos {
        let name = format!("r{r}");
        let path = git::init_repo(tmp.path(), &name);
        a.post("/api/v1/repos", json!({"name": name, "path": path, "afk_enabled": true, "afk_max_concurrent": repo_cap}))
            .await
            .expect(201);
        for i in 0..per_repo {
            let node = if i % 2 == 0 { &a } else { &b };
            node.post(
                &format!("/api/v1/repos/{name}/issues"),
                json!({"title": format!("issue {i}"), "labels": ["ready-for-agent"]}),
            )
            .await
            .expect(201);
        }
    }
    b.post("/api/v1/afk/resume", json!(null)).await;

    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let total = (repos * per_repo) as i64;
    let (mut max_global, mut max_repo) = (0i64, 0i64);
    // Operators start runs on both nodes meanwhile, into the schedulers'
    // race. It also keeps one node from holding every slot (a node that
    // settles a run ticks at once, so on a loaded machine one node could
    // otherwise take every issue and the race would go untested).
    let mut asked = 0usize;
    let outcomes = format!("all {total} issues to get an outcome");
    wait::until(outcomes, wait::secs(240), async || {
        let node = if asked.is_multiple_of(2) { &a } else { &b };
        let path = format!("/api/v1/repos/r{}/afk/start", asked % repos);
        let st = node.post(&path, json!(null)).await.status;
        assert!(
            st == 201 || st == 409,
            "POST {path} answered {st}; a start is made or refused"
        );
        asked += 1;
        let (active,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM afk_claims WHERE active")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        let per: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT repo_id, COUNT(*) FROM afk_claims WHERE active GROUP BY repo_id",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap();
        max_global = max_global.max(active);
        max_repo = max_repo.max(per.iter().map(|(_, n)| *n).max().unwrap_or(0));
        assert!(
            active <= global_cap,
            "{active} AFK runs live at once; the cap is {global_cap}"
        );
        for (repo, n) in &per {
            assert!(
                *n <= repo_cap,
                "repo {repo} had {n} AFK runs live at once; its cap is {repo_cap}"
            );
        }
        let (done,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM afk_claims WHERE outcome IS NOT NULL")
                .fetch_one(&mut conn)
                .await
                .unwrap();
        if done >= total {
            Ok(())
        } else {
            Err(format!("only {done} of {total} issues got an outcome"))
        }
    })
    .await;
    // Both schedulers look again (a tick a second): nothing more is taken.
    a.after_afk_ticks(2).await;
    b.after_afk_ticks(2).await;
    let claims: Vec<(i64, i64, String, Option<i64>)> =
        sqlx::query_as("SELECT repo_id, issue_number, node, run_id FROM afk_claims")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    let mut per_issue: HashMap<(i64, i64), usize> = HashMap::new();
    let mut per_node: HashMap<String, usize> = HashMap::new();
    for (repo, issue, node, run) in &claims {
        *per_issue.entry((*repo, *issue)).or_default() += 1;
        *per_node.entry(node.clone()).or_default() += 1;
        assert!(run.is_some());
    }
    assert_eq!(per_issue.len() as i64, total, "every issue was taken");
    assert!(
        per_issue.values().all(|n| *n == 1),
        "an issue was launched twice: {per_issue:?}"
    );
    let (runs,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM runs WHERE kind = 'afk'")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(runs, total, "one run per issue");
    assert_eq!(
        max_global, global_cap,
        "the global cap was reached (so it was tested)"
    );
    assert_eq!(max_repo, repo_cap, "a repo cap was reached");
    eprintln!("claims per node: {per_node:?}");
    assert_eq!(per_node.len(), 2, "both nodes took issues: {per_node:?}");
    drop(a);
    drop(b);
    agent::kill_tmux(&da.join("tmux.sock"));
    agent::kill_tmux(&db.join("tmux.sock"));
}

on_postgres!(two_nodes_never_take_an_issue_twice_nor_pass_a_cap);
