//! The store, directly, on both backends.

use lab::domain::Change;
use lab::repo::{self, RepoPatch};
use lab::settings::{DefaultsPatch, SettingsPatch};
use lab::store::{RepoKey, Store, StoreError};

use crate::on_both;
use crate::support::Backend;

pub(crate) async fn open(b: &Backend) -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = match b.fresh_url().await {
        Some(url) => Store::connect(&url).await.unwrap(),
        None => Store::open_sqlite_file(&dir.path().join("lab.db"))
            .await
            .unwrap(),
    };
    store.migrate().await.unwrap();
    // Migrating twice is a no-op.
    store.migrate().await.unwrap();
    (store, dir)
}

pub(crate) fn new_repo(name: &str) -> lab::repo::Repo {
    repo::create(&RepoPatch {
        name: Change::Set(name.into()),
        path: Change::Set(format!("/srv/{name}")),
        ..RepoPatch::default()
    })
    .unwrap()
}

async fn repos_round_trip(b: Backend) {
    let (store, _d) = open(&b).await;
    let mut r = new_repo("one");
    r.defaults
        .afk_options
        .insert("ultracode".into(), "true".into());
    r.afk_enabled = true;
    let created = store.create_repo(&r).await.unwrap();
    assert!(created.id > 0);
    assert!(created.created_at > 0);
    assert_eq!(created.defaults.afk_options["ultracode"], "true");
    assert!(created.afk_enabled);
    assert_eq!(store.repo(&RepoKey::Id(created.id)).await.unwrap(), created);
    assert_eq!(
        store.repo(&RepoKey::Name("one".into())).await.unwrap(),
        created
    );
    assert!(matches!(
        store.create_repo(&r).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store.repo(&RepoKey::Name("two".into())).await,
        Err(StoreError::NotFound)
    ));

    let updated = store
        .update_repo(&RepoKey::Name("one".into()), |cur| {
            repo::apply(
                cur,
                &RepoPatch {
                    afk_max_concurrent: Change::Set(5),
                    ..RepoPatch::default()
                },
            )
        })
        .await
        .unwrap();
    assert_eq!(updated.afk_max_concurrent, 5);
    assert_eq!(store.repo(&RepoKey::Id(created.id)).await.unwrap(), updated);

    // A rejected change writes nothing.
    let e = store
        .update_repo(&RepoKey::Id(created.id), |cur| {
            repo::apply(
                cur,
                &RepoPatch {
                    afk_max_concurrent: Change::Set(0),
                    ..RepoPatch::default()
                },
            )
        })
        .await;
    assert!(matches!(e, Err(StoreError::Invalid(_))));
    assert_eq!(store.repo(&RepoKey::Id(created.id)).await.unwrap(), updated);

    store.delete_repo(&RepoKey::Id(created.id)).await.unwrap();
    assert!(matches!(
        store.delete_repo(&RepoKey::Id(created.id)).await,
        Err(StoreError::NotFound)
    ));
    assert!(store.repos().await.unwrap().is_empty());
}

async fn repo_with_global_reads_both_in_one_query(b: Backend) {
    let (store, _d) = open(&b).await;
    let created = store.create_repo(&new_repo("j")).await.unwrap();
    let (r, g) = store
        .repo_with_global(&RepoKey::Name("j".into()))
        .await
        .unwrap();
    assert_eq!(r, created);
    assert_eq!(g, Default::default(), "no global row yet");
    store
        .update_settings(&SettingsPatch {
            providers: [(
                "claude-code".to_owned(),
                DefaultsPatch {
                    afk_model_default: Change::Set("opus".into()),
                    ..DefaultsPatch::default()
                },
            )]
            .into(),
            ..SettingsPatch::default()
        })
        .await
        .unwrap();
    let (_, g) = store
        .repo_with_global(&RepoKey::Id(created.id))
        .await
        .unwrap();
    assert_eq!(g.afk_model_default.as_deref(), Some("opus"));
}

/// Concurrent changes to different option keys all land (no lost update).
async fn concurrent_settings_changes_merge(b: Backend) {
    let (store, _d) = open(&b).await;
    let mut tasks = Vec::new();
    for (key, value) in [("ultracode", "true"), ("permission_mode", "dontAsk")] {
        for i in 0..10 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let tick = Change::Set(10 + i);
                store
                    .update_settings(&SettingsPatch {
                        providers: [(
                            "claude-code".to_owned(),
                            DefaultsPatch {
                                afk_options: [(key.to_owned(), Change::Set(value.to_owned()))]
                                    .into(),
                                ..DefaultsPatch::default()
                            },
                        )]
                        .into(),
                        afk: lab::settings::AfkPatch {
                            tick_seconds: tick,
                            ..Default::default()
                        },
                        ..SettingsPatch::default()
                    })
                    .await
                    .unwrap();
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let s = store.settings().await.unwrap();
    let o = &s.provider("claude-code".parse().unwrap()).afk_options;
    assert_eq!(o.get("ultracode").map(String::as_str), Some("true"));
    assert_eq!(
        o.get("permission_mode").map(String::as_str),
        Some("dontAsk")
    );
}

on_both!(
    repos_round_trip,
    repo_with_global_reads_both_in_one_query,
    concurrent_settings_changes_merge
);

/// The two backends' migrations are kept in step: the same files, in the
/// same order (sqlx applies them by version, one folder per backend).
#[test]
fn migrations_are_kept_in_step() {
    let names = |backend: &str| -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("migrations")
            .join(backend);
        let mut v: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let (sqlite, postgres) = (names("sqlite"), names("postgres"));
    assert!(sqlite.len() >= 5, "{sqlite:?}");
    assert_eq!(sqlite, postgres);
}

on_both!(claims_from_before_keep_their_pull_request_numbers);

/// Migration 0016's backfill, run as it is written on a table of old
/// claims: each keeps the number its URL ends with, and a URL without one
/// (or none at all) gets none.
async fn claims_from_before_keep_their_pull_request_numbers(b: Backend) {
    use sqlx::Connection;
    let folder = match b {
        Backend::Sqlite => "sqlite",
        Backend::Postgres(_) => "postgres",
    };
    let file = format!(
        "{}/migrations/{folder}/0016_claim_pull_numbers.sql",
        env!("CARGO_MANIFEST_DIR")
    );
    let sql = std::fs::read_to_string(file).unwrap();
    let backfill = sql[sql.find("UPDATE afk_claims").expect("the backfill")..].to_owned();
    let rows: [(i64, Option<&str>); 5] = [
        (1, Some("https://github.com/o/r/pull/42")),
        (2, Some("https://gitea.example/o/r/pulls/7/")),
        (3, Some("https://gitea.example/o/r")),
        (4, None),
        (5, Some("http://127.0.0.1:7878/repos/r/pulls/3")),
    ];
    let create = "CREATE TABLE afk_claims (id BIGINT PRIMARY KEY, pr_url TEXT, pr_number BIGINT)";
    let numbers: Vec<(i64, Option<i64>)> = match b.fresh_url().await {
        None => {
            let mut c = sqlx::SqliteConnection::connect("sqlite::memory:")
                .await
                .unwrap();
            sqlx::query(create).execute(&mut c).await.unwrap();
            for (id, url) in rows {
                sqlx::query("INSERT INTO afk_claims (id, pr_url) VALUES ($1, $2)")
                    .bind(id)
                    .bind(url)
                    .execute(&mut c)
                    .await
                    .unwrap();
            }
            sqlx::query(sqlx::AssertSqlSafe(backfill))
                .execute(&mut c)
                .await
                .unwrap();
            sqlx::query_as("SELECT id, pr_number FROM afk_claims ORDER BY id")
                .fetch_all(&mut c)
                .await
                .unwrap()
        }
        Some(url) => {
            let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
            sqlx::query(create).execute(&mut c).await.unwrap();
            for (id, url) in rows {
                sqlx::query("INSERT INTO afk_claims (id, pr_url) VALUES ($1, $2)")
                    .bind(id)
                    .bind(url)
                    .execute(&mut c)
                    .await
                    .unwrap();
            }
            sqlx::query(sqlx::AssertSqlSafe(backfill))
                .execute(&mut c)
                .await
                .unwrap();
            sqlx::query_as("SELECT id, pr_number FROM afk_claims ORDER BY id")
                .fetch_all(&mut c)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        numbers,
        vec![
            (1, Some(42)),
            (2, Some(7)),
            (3, None),
            (4, None),
            (5, Some(3))
        ]
    );
}
