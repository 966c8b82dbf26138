//! The AFK ledger the database counts, against the same ledger counted in
//! memory from every claim row (how lab counted it before).

use std::collections::BTreeMap;
use std::time::Duration;

use lab::domain::Outcome;
use lab::store::{Claim, ClaimResult, LedgerBy, LedgerCount, Store, Written};

use crate::on_both;
use crate::store::{new_repo, open};
use crate::support::Backend;

/// Claims `issue` of `repo` (id, name) on node-a, under caps it never
/// reaches.
async fn claim(store: &Store, repo: (i64, &str), issue: i64) -> Claim {
    let ClaimResult::Claimed(c) = store
        .claim_issue(
            repo.0,
            repo.1,
            issue,
            "node-a",
            100,
            100,
            lab::store::now_ms(),
        )
        .await
        .unwrap()
    else {
        panic!("issue {issue} of {} not claimed", repo.1);
    };
    *c
}

/// Claims `issue` and, unless `outcome` is `None`, gives it a run of about
/// `ms` milliseconds that ends with `outcome` ("" leaves the run live).
async fn afk_run(
    store: &Store,
    repo: (i64, &str),
    issue: i64,
    how: Option<(&str, &str, u64, &str)>,
) {
    let c = claim(store, repo, issue).await;
    let Some((model, effort, ms, outcome)) = how else {
        return;
    };
    store
        .attach_run(c.id, 1000 + issue, model, effort)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(ms)).await;
    if !outcome.is_empty() {
        let outcome = outcome.parse().unwrap();
        assert!(store.finish_claim(c.id, outcome, "").await.unwrap());
    }
}

/// The outcomes that left a pull request.
const PULLS: [&str; 3] = ["pr-green", "pr-opened", "needs-human"];

/// A ledger by group (name, sub): runs, succeeded, failed, timed out,
/// median ms.
type Ledger = BTreeMap<(String, String), (i64, i64, i64, i64, Option<f64>)>;

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The ledger counted in memory: (name, sub) → (runs, succeeded, failed,
/// timed out, median ms).
fn by_hand(claims: &[Claim], by: LedgerBy) -> Ledger {
    type Group<'a> = (Vec<&'a Claim>, Vec<f64>);
    let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
    for c in claims.iter().filter(|c| c.run_id.is_some()) {
        let key = match by {
            LedgerBy::Repo => (c.repo_name.clone(), String::new()),
            LedgerBy::Model => (
                c.model.clone().unwrap_or_default(),
                c.effort.clone().unwrap_or_default(),
            ),
            LedgerBy::Outcome => (
                c.outcome
                    .map(Outcome::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                String::new(),
            ),
        };
        let g = groups.entry(key).or_default();
        g.0.push(c);
        if let (Some(a), Some(b)) = (c.started_at, c.ended_at) {
            g.1.push((b - a) as f64);
        }
    }
    groups
        .into_iter()
        .map(|(k, (cs, d))| {
            let count = |f: &dyn Fn(&str) -> bool| {
                cs.iter()
                    .filter(|c| c.outcome.map(Outcome::as_str).is_some_and(f))
                    .count() as i64
            };
            let v = (
                cs.len() as i64,
                count(&|o| PULLS.contains(&o)),
                count(&|o| !PULLS.contains(&o) && o != "timed-out"),
                count(&|o| o == "timed-out"),
                median(d),
            );
            (k, v)
        })
        .collect()
}

fn from_db(rows: Vec<LedgerCount>) -> Ledger {
    rows.into_iter()
        .map(|r| {
            (
                (r.name, r.sub),
                (r.runs, r.succeeded, r.failed, r.timed_out, r.median_ms),
            )
        })
        .collect()
}

async fn the_database_counts_the_ledger_as_memory_did(b: Backend) {
    let (store, _d) = open(&b).await;
    let a = store.create_repo(&new_repo("a")).await.unwrap();
    let bb = store.create_repo(&new_repo("b")).await.unwrap();
    let (a, bb) = ((a.id, "a"), (bb.id, "b"));
    // Repo a: three ended runs (an odd count), one of each outcome.
    afk_run(&store, a, 1, Some(("sonnet", "high", 5, "pr-green"))).await;
    afk_run(&store, a, 2, Some(("sonnet", "high", 30, "failed"))).await;
    afk_run(&store, a, 3, Some(("sonnet", "high", 60, "timed-out"))).await;
    // Repo b: four ended runs (an even count), one still live, one claim
    // whose run never started (not a run: not counted).
    afk_run(&store, bb, 1, Some(("opus", "low", 10, "pr-opened"))).await;
    afk_run(&store, bb, 2, Some(("opus", "low", 45, "needs-human"))).await;
    afk_run(&store, bb, 3, Some(("sonnet", "high", 20, "failed"))).await;
    afk_run(&store, bb, 4, Some(("opus", "max", 15, "over-budget"))).await;
    afk_run(&store, bb, 5, Some(("opus", "low", 0, ""))).await;
    afk_run(&store, bb, 6, None).await;

    let claims = store.claims(i64::MAX).await.unwrap();
    assert_eq!(claims.len(), 9);
    for by in [LedgerBy::Repo, LedgerBy::Model, LedgerBy::Outcome] {
        let want = by_hand(&claims, by);
        let got = from_db(store.afk_ledger(by).await.unwrap());
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{by:?}"
        );
        for (k, w) in &want {
            let g = &got[k];
            assert_eq!((g.0, g.1, g.2, g.3), (w.0, w.1, w.2, w.3), "{by:?} {k:?}");
            match (g.4, w.4) {
                (Some(x), Some(y)) => assert!((x - y).abs() < 1e-6, "{by:?} {k:?}: {x} vs {y}"),
                (x, y) => assert_eq!(x, y, "{by:?} {k:?}"),
            }
        }
    }
    // Spelled out for repo b: five runs (the claim without one is not a
    // run), two succeeded, two failed (an unknown outcome is a failure).
    let b_row =
        &from_db(store.afk_ledger(LedgerBy::Repo).await.unwrap())[&("b".to_owned(), String::new())];
    assert_eq!((b_row.0, b_row.1, b_row.2, b_row.3), (5, 2, 2, 0));
    assert_eq!(
        store
            .live_claim_counts()
            .await
            .unwrap()
            .values()
            .sum::<i64>(),
        2
    );
}

/// With no AFK run yet, the ledger is empty (not one row of zeros).
async fn an_empty_ledger_has_no_rows(b: Backend) {
    let (store, _d) = open(&b).await;
    for by in [LedgerBy::Repo, LedgerBy::Model] {
        assert!(store.afk_ledger(by).await.unwrap().is_empty());
    }
    assert_eq!(
        store
            .live_claim_counts()
            .await
            .unwrap()
            .values()
            .sum::<i64>(),
        0
    );
}

/// A listing of ready issues that began before an issue's outcome went on
/// it may still show the issue ready: a claim from it is refused (two nodes
/// once launched one issue twice that way); a listing made after is not.
async fn a_stale_listing_cannot_take_a_told_issue_again(b: Backend) {
    let (store, _dir) = open(&b).await;
    let r = store.create_repo(&new_repo("r")).await.unwrap();
    let stale = lab::store::now_ms();
    let ClaimResult::Claimed(c) = store
        .claim_issue(r.id, "r", 7, "node-a", 10, 10, stale)
        .await
        .unwrap()
    else {
        panic!("the first claim is refused");
    };
    assert!(
        store
            .finish_claim(c.id, lab::domain::Outcome::Failed, "")
            .await
            .unwrap()
    );
    store.mark_relabelled(c.id).await.unwrap();
    let again = store
        .claim_issue(r.id, "r", 7, "node-b", 10, 10, stale)
        .await
        .unwrap();
    assert_eq!(again, ClaimResult::IssueTaken);
    let fresh = lab::store::now_ms() + 10_000;
    let later = store
        .claim_issue(r.id, "r", 7, "node-b", 10, 10, fresh)
        .await
        .unwrap();
    assert!(matches!(later, ClaimResult::Claimed(_)), "{later:?}");
}

/// The AFK loop and the notifier wait for the store to announce a claims
/// write (`Store::subscribe(Written::Claims)`): every way of writing a claim
/// must announce it, or a new claim would wait ten seconds to be followed.
async fn every_claim_write_moves_the_claims_count(b: Backend) {
    let (store, _dir) = open(&b).await;
    let r = store.create_repo(&new_repo("r")).await.unwrap();
    let mut last = store.written(Written::Claims);
    let mut moved = |what: &str, store: &Store| {
        let now = store.written(Written::Claims);
        assert!(
            now > last,
            "{what} did not move the claims count ({last} → {now})"
        );
        last = now;
    };
    let c = claim(&store, (r.id, "r"), 7).await;
    moved("claim_issue", &store);
    store.attach_run(c.id, 1, "m", "e").await.unwrap();
    moved("attach_run", &store);
    store.set_claim_pr(c.id, "https://x/pr/1", 1).await.unwrap();
    moved("set_claim_pr", &store);
    store
        .start_round(c.id, "k", lab::domain::RoundCause::Check)
        .await
        .unwrap();
    moved("start_round", &store);
    store.set_claim_checks(c.id, "{}").await.unwrap();
    moved("set_claim_checks", &store);
    store.finish_claim(c.id, Outcome::Failed, "").await.unwrap();
    moved("finish_claim", &store);
    store.mark_relabelled(c.id).await.unwrap();
    moved("mark_relabelled", &store);
    let c2 = claim(&store, (r.id, "r"), 8).await;
    moved("claim_issue", &store);
    store.release_claim(c2.id).await.unwrap();
    moved("release_claim", &store);
    // Reads do not.
    store.active_claims("node-a").await.unwrap();
    store.claims_to_relabel("node-a").await.unwrap();
    assert_eq!(
        store.written(Written::Claims),
        last,
        "a read moved the claims count"
    );
}

on_both!(
    every_claim_write_moves_the_claims_count,
    a_stale_listing_cannot_take_a_told_issue_again,
    the_database_counts_the_ledger_as_memory_did,
    an_empty_ledger_has_no_rows
);
