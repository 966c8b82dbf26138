//! The resolve cache (ADR 11): repeat reads cost no query, and no read ever
//! sees a row older than a write that finished before it, on this node or,
//! on PostgreSQL, on another.

use std::time::{Duration, Instant};

use lab::domain::Change;
use lab::repo::RepoPatch;
use lab::settings::{DefaultsPatch, SettingsPatch};
use lab::store::{RepoKey, Store, StoreError};
use sqlx::Connection;

use crate::store::{new_repo, open};
use crate::support::{Backend, wait};
use crate::{on_both, on_postgres};

fn afk_model(model: &str) -> SettingsPatch {
    SettingsPatch {
        providers: [(
            "claude-code".to_owned(),
            DefaultsPatch {
                afk_model_default: Change::Set(model.into()),
                ..DefaultsPatch::default()
            },
        )]
        .into(),
        ..SettingsPatch::default()
    }
}

fn model(model: &str) -> RepoPatch {
    RepoPatch {
        defaults: DefaultsPatch {
            model_default: Change::Set(model.into()),
            ..DefaultsPatch::default()
        },
        ..RepoPatch::default()
    }
}

/// Reads `key` until one is answered from the cache (a PostgreSQL store's
/// cache is on once its listener listens), and returns what it read.
async fn until_cached(store: &Store, key: &RepoKey) -> lab::repo::Repo {
    let patience = wait::secs(10).every_ms(20);
    wait::until("the cache to answer a read", patience, async || {
        let before = store.cache_stats().repos.hits;
        // (A read on a connection the database ended fails once.)
        let (repo, _) = store.repo_with_global(key).await.ok()?;
        (store.cache_stats().repos.hits > before).then_some(repo)
    })
    .await
}

/// Reads `key` until `check` holds, for at most `within`.
async fn until_seen(
    store: &Store,
    key: &RepoKey,
    within: Duration,
    check: impl Fn(&lab::repo::Repo) -> bool,
) {
    let patience = wait::Patience::from(within).every_ms(20);
    wait::until("a read of the repo as written", patience, async || {
        // (A read on a connection the database ended fails once.)
        let read = store.repo_with_global(key).await;
        if read.as_ref().is_ok_and(|(repo, _)| check(repo)) {
            Ok(())
        } else {
            Err(format!("{read:?}"))
        }
    })
    .await
}

async fn cached_reads_follow_every_write(b: Backend) {
    let (store, _d) = open(&b).await;
    let created = store.create_repo(&new_repo("c")).await.unwrap();
    let (by_id, by_name) = (RepoKey::Id(created.id), RepoKey::Name("c".into()));
    until_cached(&store, &by_id).await;
    until_cached(&store, &by_name).await;
    let patience = wait::secs(10).every_ms(20);
    wait::until("the settings to be cached too", patience, async || {
        let hits = store.cache_stats().settings.hits;
        store.settings().await.unwrap();
        store.cache_stats().settings.hits > hits
    })
    .await;

    // Each write is seen by the very next read, by id and by name.
    store
        .update_repo(&by_id, |r| lab::repo::apply(r, &model("opus")))
        .await
        .unwrap();
    for key in [&by_id, &by_name] {
        let (r, _) = store.repo_with_global(key).await.unwrap();
        assert_eq!(r.defaults.model_default.as_deref(), Some("opus"));
    }
    store.update_settings(&afk_model("sonnet")).await.unwrap();
    let (_, g) = store.repo_with_global(&by_name).await.unwrap();
    assert_eq!(g.afk_model_default.as_deref(), Some("sonnet"));
    let s = store.settings().await.unwrap();
    assert_eq!(
        s.provider("claude-code".parse().unwrap())
            .afk_model_default
            .as_deref(),
        Some("sonnet")
    );

    // A rename: the old name is gone, the new one found.
    until_cached(&store, &by_name).await;
    store
        .update_repo(&by_id, |r| {
            lab::repo::apply(
                r,
                &RepoPatch {
                    name: Change::Set("d".into()),
                    ..RepoPatch::default()
                },
            )
        })
        .await
        .unwrap();
    assert!(matches!(
        store.repo_with_global(&by_name).await,
        Err(StoreError::NotFound)
    ));
    let (r, _) = store
        .repo_with_global(&RepoKey::Name("d".into()))
        .await
        .unwrap();
    assert_eq!(r.id, created.id);

    // A rejected change writes nothing and the cache still answers truly.
    until_cached(&store, &by_id).await;
    let rejected = store
        .update_repo(&by_id, |r| lab::repo::apply(r, &model("no-such-model")))
        .await;
    assert!(
        matches!(rejected, Err(StoreError::Invalid(_))),
        "{rejected:?}"
    );
    let (r, _) = store.repo_with_global(&by_id).await.unwrap();
    assert_eq!(r.defaults.model_default.as_deref(), Some("opus"));

    // A deleted repo is not served from the cache.
    until_cached(&store, &by_id).await;
    store.delete_repo(&by_id).await.unwrap();
    assert!(matches!(
        store.repo_with_global(&by_id).await,
        Err(StoreError::NotFound)
    ));
}

/// A PostgreSQL node on a fresh database of `pg`, its URL, and the id of a
/// repo its cache holds.
async fn node_with_a_cached_repo(pg: &Backend, name: &str) -> (String, Store, i64) {
    let url = pg.fresh_url().await.expect("a PostgreSQL database");
    let a = Store::connect(&url).await.unwrap();
    a.migrate().await.unwrap();
    let created = a.create_repo(&new_repo(name)).await.unwrap();
    let key = RepoKey::Id(created.id);
    until_cached(&a, &key).await;
    (url, a, created.id)
}

/// What another node's `update_repo` does, without a store: change the
/// repo's model and notify, in one transaction.
async fn write_as_another_node(conn: &mut sqlx::PgConnection, id: i64, model: &str) {
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("UPDATE repos SET model_default = $1 WHERE id = $2")
        .bind(model)
        .bind(id)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("NOTIFY lab_cache")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

/// Two nodes on one PostgreSQL database: a write on one reaches the other's
/// cache (by its notification) within moments.
async fn another_nodes_write_empties_this_nodes_cache(pg: Backend) {
    let (url, a, id) = node_with_a_cached_repo(&pg, "shared").await;
    let key = RepoKey::Id(id);
    let other = Store::connect(&url).await.unwrap();
    a.settings().await.unwrap();
    // Both nodes probe their listeners while nothing is written; a probe
    // empties no cache. (A probe answered late on a loaded machine turns the
    // cache off once, which also empties it: three tries.)
    let mut kept = false;
    for _ in 0..3 {
        let misses = a.cache_stats().repos.misses;
        let probes = a.cache_stats().probes;
        wait::until("two more probes heard back", wait::secs(30), async || {
            a.cache_stats().probes >= probes + 2
        })
        .await;
        a.repo_with_global(&key).await.unwrap();
        if a.cache_stats().repos.misses == misses {
            kept = true;
            break;
        }
        until_cached(&a, &key).await;
    }
    assert!(kept, "every probe emptied the cache");

    // A change to the repo on the other node reaches a.
    other
        .update_repo(&key, |r| lab::repo::apply(r, &model("opus")))
        .await
        .unwrap();
    until_seen(&a, &key, Duration::from_secs(3), |r| {
        r.defaults.model_default.as_deref() == Some("opus")
    })
    .await;

    other.update_settings(&afk_model("opus")).await.unwrap();
    let patience = wait::secs(3).every_ms(10);
    wait::until("node a to read the new settings", patience, async || {
        let (_, g) = a.repo_with_global(&key).await.unwrap();
        let s = a.settings().await.unwrap();
        g.afk_model_default.as_deref() == Some("opus")
            && s.provider("claude-code".parse().unwrap())
                .afk_model_default
                .as_deref()
                == Some("opus")
    })
    .await;
    until_cached(&a, &key).await;
    other.delete_repo(&key).await.unwrap();
    wait::until(
        "node a to stop reading a deleted repo",
        patience,
        async || a.repo_with_global(&key).await.is_err(),
    )
    .await;
}

/// A node whose listening connection dies misses the notifications sent
/// meanwhile; it must not serve what it had cached, and it must listen (and
/// cache) again afterwards.
async fn a_node_that_stopped_hearing_the_others_does_not_serve_stale_rows(pg: Backend) {
    let (url, a, id) = node_with_a_cached_repo(&pg, "deaf").await;
    let key = RepoKey::Id(id);

    // Another node's write while a cannot hear it: no connection to the
    // database may open, all of a's end (its listener among them, waited
    // for), then the repo changes and the change is announced to nobody.
    let mut other = sqlx::PgConnection::connect(&url).await.unwrap();
    let (db, other_pid): (String, i32) =
        sqlx::query_as("SELECT current_database()::text, pg_backend_pid()")
            .fetch_one(&mut other)
            .await
            .unwrap();
    let Backend::Postgres(server) = &pg else {
        unreachable!()
    };
    let mut admin = sqlx::PgConnection::connect(server).await.unwrap();
    let allow = |yes: bool| format!("ALTER DATABASE {db} ALLOW_CONNECTIONS {yes}");
    sqlx::query(sqlx::AssertSqlSafe(allow(false)))
        .execute(&mut admin)
        .await
        .unwrap();
    let ended: Vec<(String, bool)> = sqlx::query_as(
        "SELECT query, pg_terminate_backend(pid, 5000) FROM pg_stat_activity \
         WHERE datname = $1 AND pid <> $2",
    )
    .bind(&db)
    .bind(other_pid)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert!(ended.iter().all(|(_, gone)| *gone), "{ended:?}");
    assert!(
        ended.iter().any(|(q, _)| is_listener(q)),
        "a's listening connection was among them: {ended:?}"
    );
    write_as_another_node(&mut other, id, "haiku").await;
    sqlx::query(sqlx::AssertSqlSafe(allow(true)))
        .execute(&mut admin)
        .await
        .unwrap();

    until_seen(&a, &key, Duration::from_secs(5), |r| {
        r.defaults.model_default.as_deref() == Some("haiku")
    })
    .await;
    // It listens again: the cache answers, and hears the next write.
    until_cached(&a, &key).await;
    write_as_another_node(&mut other, id, "opus").await;
    until_seen(&a, &key, Duration::from_secs(3), |r| {
        r.defaults.model_default.as_deref() == Some("opus")
    })
    .await;
}

/// Whether a `pg_stat_activity.query` is a cache listener's last statement.
fn is_listener(query: &str) -> bool {
    query == "LISTEN \"lab_cache\"" || query.contains("lab_cache_listener")
}

/// Resumes a stopped process when dropped (also when the test fails).
struct Stopped(rustix::process::Pid);

impl Stopped {
    fn stop(pid: i32) -> Stopped {
        let pid = rustix::process::Pid::from_raw(pid).expect("a positive pid");
        rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = rustix::process::kill_process(self.0, rustix::process::Signal::CONT);
    }
}

/// A listening connection that neither fails nor delivers (its server
/// process frozen, as behind a half-open socket): the node's own probe goes
/// unanswered, so it stops trusting its cache within seconds.
async fn a_node_whose_listener_went_silent_stops_trusting_its_cache(pg: Backend) {
    let (url, a, id) = node_with_a_cached_repo(&pg, "frozen").await;
    let key = RepoKey::Id(id);

    let mut other = sqlx::PgConnection::connect(&url).await.unwrap();
    let listeners: Vec<(i32, String)> = sqlx::query_as(
        "SELECT pid, query FROM pg_stat_activity WHERE datname = current_database()",
    )
    .fetch_all(&mut other)
    .await
    .unwrap();
    let listeners: Vec<i32> = listeners
        .into_iter()
        .filter(|(_, q)| is_listener(q))
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(listeners.len(), 1, "a's listening connection");
    // Only a server process on this machine can be frozen from here.
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", listeners[0])).unwrap_or_default();
    assert_eq!(
        comm.trim(),
        "postgres",
        "this test needs LAB_TEST_DATABASE_URL's server on this machine (pid {} \
         is not a PostgreSQL process); `.ci/start-postgres` starts one",
        listeners[0]
    );
    let frozen = Stopped::stop(listeners[0]);
    write_as_another_node(&mut other, id, "haiku").await;

    let started = Instant::now();
    until_seen(&a, &key, Duration::from_secs(6), |r| {
        r.defaults.model_default.as_deref() == Some("haiku")
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "seen only after {:?}",
        started.elapsed()
    );
    drop(frozen);
    // It listens again on another connection, and caches again.
    until_cached(&a, &key).await;
}

/// Writes whose caller is dropped at every point of their life (a client
/// that hung up), including mid-commit: whatever landed, the cache never
/// keeps what was there before.
async fn an_abandoned_write_never_leaves_the_cache_stale(b: Backend) {
    let (store, _d) = open(&b).await;
    let created = store.create_repo(&new_repo("dropped")).await.unwrap();
    let key = RepoKey::Id(created.id);
    for i in 0..150u64 {
        store.repo_with_global(&key).await.unwrap();
        let writer = store.clone();
        let name = if i % 2 == 0 { "opus" } else { "haiku" };
        let write = tokio::spawn(async move {
            writer
                .update_repo(&RepoKey::Id(created.id), |r| {
                    lab::repo::apply(r, &model(name))
                })
                .await
        });
        tokio::time::sleep(Duration::from_micros((i * 37) % 3000)).await;
        write.abort();
        let _ = write.await;
        // A commit the write left behind finishes on its own, then empties
        // the cache; give it that moment.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let truth = store.repo(&key).await.unwrap();
        let (cached, _) = store.repo_with_global(&key).await.unwrap();
        assert_eq!(
            cached.defaults.model_default, truth.defaults.model_default,
            "round {i}: the cache kept a row the database no longer has"
        );
    }
}

on_both!(
    cached_reads_follow_every_write,
    an_abandoned_write_never_leaves_the_cache_stale
);

on_postgres!(
    another_nodes_write_empties_this_nodes_cache,
    a_node_that_stopped_hearing_the_others_does_not_serve_stale_rows,
    a_node_whose_listener_went_silent_stops_trusting_its_cache
);
