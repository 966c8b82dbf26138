//! [`ProviderId`]: the id of a provider lab has.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use super::{ALL, Provider};

/// The id of a provider of lab's registry ([`super::all`]), which it always
/// names: one is made only by parsing an id against the registry (or by
/// [`ProviderId::all`]). Serialised as the plain id (`"claude-code"`).
///
/// Stored rows (a run's or a repo's provider) and the API's bodies keep the
/// plain string: a row naming a provider that left the catalog still loads
/// and shows, and a client does not reject a body naming a provider it does
/// not know. They become a `ProviderId` where lab acts on the provider.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ProviderId(
    /// Its place in the registry.
    u8,
);

/// An id that names no provider of lab's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider '{}'; allowed: {}", .0.escape_debug(), super::ids().join(", "))]
pub struct UnknownProvider(pub String);

impl ProviderId {
    /// Every provider's id, in display order.
    pub fn all() -> impl Iterator<Item = ProviderId> {
        (0..ALL.len()).map(|i| ProviderId(i as u8))
    }

    /// The provider a new repo gets ([`super::DEFAULT_PROVIDER`]).
    pub fn default_for_repo() -> ProviderId {
        super::DEFAULT_PROVIDER
            .parse()
            .expect("the default provider is registered")
    }

    pub fn as_str(self) -> &'static str {
        self.provider().id()
    }

    /// The provider it names.
    pub fn provider(self) -> &'static dyn Provider {
        ALL[usize::from(self.0)]
    }
}

impl FromStr for ProviderId {
    type Err = UnknownProvider;

    /// Exactly a registered id (ids are lower case; no other spelling).
    fn from_str(id: &str) -> Result<Self, Self::Err> {
        ALL.iter()
            .position(|p| p.id() == id)
            .map(|i| ProviderId(i as u8))
            .ok_or_else(|| UnknownProvider(id.to_owned()))
    }
}

impl TryFrom<&str> for ProviderId {
    type Error = UnknownProvider;

    fn try_from(id: &str) -> Result<Self, Self::Error> {
        id.parse()
    }
}

// Ordered, compared and hashed as its id, so that a map keyed by it is in
// the ids' order and can be looked up by a `&str` (`Borrow<str>`).
impl Ord for ProviderId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for ProviderId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Hash for ProviderId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl Borrow<str> for ProviderId {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for ProviderId {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for ProviderId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ProviderId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl serde::Serialize for ProviderId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_id_parses_to_itself_and_nothing_else_does() {
        let ids: Vec<ProviderId> = ProviderId::all().collect();
        assert_eq!(ids.len(), ALL.len());
        for (id, p) in ids.iter().zip(super::super::all()) {
            assert_eq!(id.as_str(), p.id());
            assert_eq!(p.id().parse::<ProviderId>(), Ok(*id));
            assert_eq!(ProviderId::try_from(p.id()), Ok(*id));
            assert!(std::ptr::addr_eq(id.provider(), *p));
        }
        for bad in ["", "gemini", "Codex", " codex", "claude_code"] {
            assert_eq!(
                bad.parse::<ProviderId>(),
                Err(UnknownProvider(bad.to_owned()))
            );
        }
        assert_eq!(
            "gemini".parse::<ProviderId>().unwrap_err().to_string(),
            "unknown provider 'gemini'; allowed: claude-code, codex"
        );
        assert_eq!(ProviderId::default_for_repo(), "claude-code");
    }

    #[test]
    fn it_orders_hashes_and_serialises_as_its_id() {
        let codex: ProviderId = "codex".parse().unwrap();
        let claude: ProviderId = "claude-code".parse().unwrap();
        assert!(claude < codex);
        let map: std::collections::BTreeMap<ProviderId, u8> = [(codex, 1), (claude, 2)].into();
        assert_eq!(map.get("codex"), Some(&1));
        assert_eq!(map.get("gemini"), None);
        let set: std::collections::HashSet<ProviderId> = [codex].into();
        assert!(set.contains("codex"));
        assert_eq!(
            serde_json::to_string(&map).unwrap(),
            r#"{"claude-code":2,"codex":1}"#
        );
        assert_eq!(format!("{codex} {codex:?}"), r#"codex "codex""#);
    }
}
