//! The last problem that kept the scheduler from each repo's issues, for
//! `afk status` (the tick's, a forge's rate limit, an issue lab could not
//! tell).

use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct Problems(Mutex<BTreeMap<String, String>>);

impl Problems {
    /// Every repo's problem, by repo name.
    pub fn all(&self) -> BTreeMap<String, String> {
        self.0.lock().expect("poisoned").clone()
    }

    /// Notes `repo`'s problem (logged when it is new), or that it has none.
    pub fn note(&self, repo: &str, problem: Option<String>) {
        let mut p = self.0.lock().expect("poisoned");
        match problem {
            Some(m) => {
                if p.get(repo) != Some(&m) {
                    tracing::warn!(repo, problem = %m, "AFK scheduler");
                }
                p.insert(repo.to_owned(), m);
            }
            None => {
                p.remove(repo);
            }
        }
    }

    /// Clears `repo`'s problem when it starts with `prefix` (the note of
    /// the module that found it over).
    pub fn clear_if(&self, repo: &str, prefix: &str) {
        let mut p = self.0.lock().expect("poisoned");
        if p.get(repo).is_some_and(|m| m.starts_with(prefix)) {
            p.remove(repo);
        }
    }
}
