//! Who may call lab: the admin token (created on first start, mode 0600 in
//! the data dir), run tokens, and browser sessions. Token minting and
//! digests live here, below every caller: the launch path mints run tokens,
//! the pages mint browser sessions, the API checks both.

pub mod browser;

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

/// The caller of a request, once authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Admin,
    /// A live run's own token: it may read its repo's issues, read its run,
    /// and open its run's pull request; nothing else. Its repo is its id
    /// (none once the repo is removed): a name can pass to another repo.
    Run {
        run_id: i64,
        repo_id: Option<i64>,
    },
}

pub struct Auth {
    admin: [u8; 32],
}

impl Auth {
    pub fn new(admin_token: &str) -> Auth {
        Auth {
            admin: digest(admin_token),
        }
    }

    /// Who a bearer token belongs to, if anyone.
    pub fn principal(&self, token: &str) -> Option<Principal> {
        // Comparing digests keeps the comparison's timing independent of how
        // much of the token matched.
        (digest(token) == self.admin).then_some(Principal::Admin)
    }
}

pub fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A new random token: 32 bytes, hex.
pub fn new_token() -> String {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).expect("the OS random source failed");
    hex::encode(b)
}

/// Reads the admin token from `path`, or creates it (mode 0600). Returns the
/// token and whether it was just created.
pub fn load_or_create_token(path: &Path) -> std::io::Result<(String, bool)> {
    match std::fs::read_to_string(path) {
        Ok(t) if !t.trim().is_empty() => return Ok((t.trim().to_owned(), false)),
        Ok(_) => {
            return Err(std::io::Error::other(format!(
                "{} is empty: delete it to have lab create a new token",
                path.display()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let token = new_token();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    writeln!(f, "{token}")?;
    f.sync_all()?;
    Ok((token, true))
}
