//! The resolve inputs (a repo with its provider's global defaults, and the
//! global settings) kept in memory, so a resolve that hits costs no database
//! round trip (ADR 11).
//!
//! Every entry was read at a known *generation*. Any write that could change
//! an entry bumps the generation and empties the cache: this node's writes
//! right after they commit, other nodes' writes when their notification
//! arrives (`notify.rs`). A read takes the generation before it queries and
//! may store its row only if the generation is still the same afterwards, so
//! a row read before a write can never be stored after it. While a
//! PostgreSQL node cannot hear the other nodes (its listener is down), the
//! cache is off: every read goes to the database.
//!
//! Invariant: an entry is served only while the cache is on and was stored
//! at the current generation.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::RepoKey;
use crate::domain::Defaults;
use crate::repo::Repo;

use crate::settings::Settings;

/// More entries than this and the cache starts over (each repo is cached at
/// most twice, by id and by name; unknown keys are never cached).
const MAX_REPOS: usize = 4096;

#[derive(Debug, Default)]
pub struct Cache {
    inner: RwLock<Inner>,
    repos: Counters,
    settings: Counters,
    /// Probes this node's listener heard back (PostgreSQL, ADR 11).
    probes: AtomicU64,
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
}

impl Counters {
    fn count(&self, hit: bool) {
        let counter = if hit { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn get(&self) -> Counts {
        Counts {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// Bumped by every invalidation and every turn on or off.
    generation: u64,
    /// Whether entries may be stored and served.
    on: bool,
    repos: HashMap<RepoKey, (Repo, Defaults)>,
    settings: Option<Settings>,
}

/// Whether the cache is on, and how its reads went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    pub on: bool,
    /// `repo_with_global` reads.
    pub repos: Counts,
    /// `settings` reads.
    pub settings: Counts,
    /// Probes this node's listener sent itself and heard back: it hears
    /// other nodes' writes (PostgreSQL only).
    pub probes: u64,
}

/// How often the cache served a read, and how often a read went to the
/// database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub hits: u64,
    pub misses: u64,
}

impl Cache {
    /// A cache that is on from the start (this node hears every write).
    pub fn on() -> Cache {
        let c = Cache::default();
        c.write().on = true;
        c
    }

    /// A cache that stays off until [`Cache::turn_on`].
    pub fn off() -> Cache {
        Cache::default()
    }

    /// The generation a read about to query the database must present to
    /// store its row; `None` while the cache is off.
    pub fn generation(&self) -> Option<u64> {
        let inner = self.read();
        inner.on.then_some(inner.generation)
    }

    pub fn repo(&self, key: &RepoKey) -> Option<(Repo, Defaults)> {
        let hit = self.read().repos.get(key).cloned();
        self.repos.count(hit.is_some());
        hit
    }

    pub fn store_repo(&self, generation: Option<u64>, key: &RepoKey, value: &(Repo, Defaults)) {
        let mut inner = self.write();
        if !inner.current(generation) {
            return;
        }
        if inner.repos.len() >= MAX_REPOS {
            inner.repos.clear();
        }
        inner.repos.insert(key.clone(), value.clone());
    }

    pub fn settings(&self) -> Option<Settings> {
        let hit = self.read().settings.clone();
        self.settings.count(hit.is_some());
        hit
    }

    pub fn store_settings(&self, generation: Option<u64>, value: &Settings) {
        let mut inner = self.write();
        if inner.current(generation) {
            inner.settings = Some(value.clone());
        }
    }

    /// Something the cache holds may have changed: forget everything. Reads
    /// that queried before this cannot store what they read.
    pub fn invalidate(&self) {
        self.write().forget();
    }

    /// This node can no longer hear other nodes' writes.
    pub fn turn_off(&self) {
        let mut inner = self.write();
        inner.forget();
        inner.on = false;
    }

    /// This node hears other nodes' writes again, from now on; whatever was
    /// read before is forgotten.
    pub fn turn_on(&self) {
        let mut inner = self.write();
        inner.forget();
        inner.on = true;
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            on: self.read().on,
            repos: self.repos.get(),
            settings: self.settings.get(),
            probes: self.probes.load(Ordering::Relaxed),
        }
    }

    /// The listener heard its probe back.
    pub(super) fn probed(&self) {
        self.probes.fetch_add(1, Ordering::Relaxed);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }
}

impl Inner {
    fn current(&self, generation: Option<u64>) -> bool {
        self.on && generation == Some(self.generation)
    }

    fn forget(&mut self) {
        self.generation += 1;
        self.repos.clear();
        self.settings = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(name: &str) -> (Repo, Defaults) {
        let r = crate::repo::create(&crate::repo::RepoPatch {
            name: crate::domain::Change::Set(name.into()),
            path: crate::domain::Change::Set(format!("/srv/{name}")),
            ..Default::default()
        })
        .unwrap();
        (r, Defaults::default())
    }

    #[test]
    fn a_read_from_before_a_write_is_not_stored() {
        let c = Cache::on();
        let key = RepoKey::Name("a".into());
        let g = c.generation();
        c.invalidate();
        c.store_repo(g, &key, &repo("a"));
        assert!(c.repo(&key).is_none());
        let g = c.generation();
        c.store_repo(g, &key, &repo("a"));
        assert_eq!(c.repo(&key).unwrap().0.name, "a");
        assert_eq!(c.stats().repos, Counts { hits: 1, misses: 1 });
    }

    #[test]
    fn an_off_cache_stores_nothing_until_turned_on() {
        let c = Cache::off();
        let s = Settings::default();
        assert_eq!(c.generation(), None);
        c.store_settings(c.generation(), &s);
        assert!(c.settings().is_none());
        c.turn_on();
        c.store_settings(c.generation(), &s);
        assert!(c.settings().is_some());
        // A read begun before the node went deaf, finished after it heard
        // again: it may have missed a write in between.
        let begun = c.generation();
        c.turn_off();
        assert!(c.settings().is_none(), "turning off forgets");
        c.invalidate();
        assert_eq!(c.generation(), None, "invalidating does not turn it on");
        c.turn_on();
        c.store_settings(begun, &s);
        assert!(c.settings().is_none());
    }

    #[test]
    fn invalidating_forgets_every_entry() {
        let c = Cache::on();
        let (a, b) = (RepoKey::Id(1), RepoKey::Name("b".into()));
        c.store_repo(c.generation(), &a, &repo("a"));
        c.store_repo(c.generation(), &b, &repo("b"));
        c.store_settings(c.generation(), &Settings::default());
        c.invalidate();
        assert!(c.repo(&a).is_none() && c.repo(&b).is_none() && c.settings().is_none());
    }
}
