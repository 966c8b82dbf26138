//! One `lab serve` per data dir, and per SQLite database.
//!
//! A data dir holds one tmux server and one set of runs: two servers on it
//! would each reconcile the other's runs. A SQLite database is one process's
//! alone: its cache of resolve inputs hears only its own writes (ADR 11).
//! Several nodes share state through PostgreSQL, each with its own data dir.
//! The lock is an advisory `flock` on a file beside what it guards, held
//! until the server's process ends (or its [`Held`] is dropped).

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Locks held for as long as this value lives.
#[derive(Debug)]
pub struct Held {
    _files: Vec<File>,
}

/// Takes the data dir's lock and the SQLite database's (the default one in
/// the data dir, or the file a `sqlite:` URL names); fails, naming the place,
/// if another server holds one.
pub fn take(data_dir: &Path, database_url: Option<&str>) -> anyhow::Result<Held> {
    let mut held = vec![lock(&data_dir.join("lab.lock"), "data dir", data_dir)?];
    let db = match database_url {
        None => Some(data_dir.join("lab.db")),
        Some(url) => sqlite_file(url),
    };
    if let Some(db) = db {
        // The same file by another name (a symlink, `..`) is the same lock,
        // also before the file exists.
        let db = std::fs::canonicalize(&db).unwrap_or_else(|_| {
            match (db.parent().map(std::fs::canonicalize), db.file_name()) {
                (Some(Ok(dir)), Some(name)) => dir.join(name),
                _ => db.clone(),
            }
        });
        let mut name = db.clone().into_os_string();
        name.push(".lab-lock");
        held.push(lock(Path::new(&name), "SQLite database", &db)?);
    }
    Ok(Held { _files: held })
}

/// The file of a `sqlite:` URL (`None` for PostgreSQL or an in-memory one).
fn sqlite_file(url: &str) -> Option<PathBuf> {
    use std::str::FromStr;
    if !url.starts_with("sqlite:") || url.contains(":memory:") || url.contains("mode=memory") {
        return None;
    }
    let opts = sqlx::sqlite::SqliteConnectOptions::from_str(url).ok()?;
    let file = opts.get_filename();
    (!file.as_os_str().is_empty()).then(|| file.to_owned())
}

fn lock(path: &Path, what: &str, guarded: &Path) -> anyhow::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open the lock file {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => bail!(
            "another lab server is using the {what} {}: one server per data dir and per SQLite \
             database (several nodes share state through PostgreSQL, each with its own data dir)",
            guarded.display()
        ),
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_server_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let db = format!("sqlite://{}/elsewhere.db", dir.path().display());
        std::fs::create_dir_all(dir.path().join("a")).unwrap();
        std::fs::create_dir_all(dir.path().join("b")).unwrap();
        let first = take(&dir.path().join("a"), Some(&db)).unwrap();
        let same_dir = take(&dir.path().join("a"), None).unwrap_err().to_string();
        assert!(same_dir.contains("data dir"), "{same_dir}");
        let same_db = take(&dir.path().join("b"), Some(&db))
            .unwrap_err()
            .to_string();
        assert!(same_db.contains("SQLite database"), "{same_db}");
        assert!(same_db.contains("elsewhere.db"), "{same_db}");
        take(&dir.path().join("b"), Some("postgres://x/y")).expect("PostgreSQL is shared");
        take(&dir.path().join("b"), Some("sqlite::memory:")).expect("nothing to share");
        drop(first);
        take(&dir.path().join("b"), Some(&db)).expect("free again");
    }

    #[test]
    fn the_default_database_is_locked_under_any_name() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["a", "b", "c"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("a/lab.db"), "").unwrap();
        let _a = take(&dir.path().join("a"), None).unwrap();
        let by_url = format!("sqlite://{}/a/lab.db", dir.path().display());
        let e = take(&dir.path().join("b"), Some(&by_url))
            .unwrap_err()
            .to_string();
        assert!(e.contains("SQLite database"), "{e}");
        std::os::unix::fs::symlink(dir.path().join("a/lab.db"), dir.path().join("c/link.db"))
            .unwrap();
        let by_link = format!("sqlite://{}/c/link.db", dir.path().display());
        let e = take(&dir.path().join("c"), Some(&by_link))
            .unwrap_err()
            .to_string();
        assert!(e.contains("SQLite database"), "{e}");
    }
}
