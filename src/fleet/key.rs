//! How the nodes of a fleet trust one another (issue 29, ADR 34).
//!
//! Every node reads one key from the shared database (`fleet_key`, made by
//! the first node that asks). A node calling another signs the call: an
//! HMAC-SHA256, under that key, of who calls, which node it calls, when, a
//! fresh nonce, the method, the path with its query, the browser session it
//! acts for (if any) and the body's digest. The key itself never goes on
//! the wire, a signature opens only the one request it was made for, at
//! the one node it was made for, for [`WINDOW_MS`] and once: the node called
//! remembers the signatures it took until they are too old anyway.
//!
//! Host side only: a run sees neither the database nor this node's memory,
//! and a run's token is never a node's credential (a run's requests are
//! never forwarded: the node that owns a run is the one its agent calls).

use std::collections::HashMap;
use std::sync::Mutex;

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

/// The calling node's id.
pub const NODE: HeaderName = HeaderName::from_static("x-lab-node");
/// When it signed (ms since the epoch).
pub const AT: HeaderName = HeaderName::from_static("x-lab-node-at");
/// The browser session (its stored digest) the call acts for.
pub const SESSION: HeaderName = HeaderName::from_static("x-lab-node-session");
/// A fresh random value: two identical calls in one millisecond still
/// sign apart (the node called takes each signature once).
pub const NONCE: HeaderName = HeaderName::from_static("x-lab-node-nonce");
/// The signature, hex.
pub const SIGNATURE: HeaderName = HeaderName::from_static("x-lab-node-signature");

/// How far a signature's time may be from the called node's clock.
pub const WINDOW_MS: i64 = 30_000;

/// The header a node's refusal of a node credential carries, so that the
/// node that forwarded the call tells its caller the fleet failed, not
/// that the caller's own token was wrong.
pub const REFUSED: HeaderName = HeaderName::from_static("x-lab-node-refused");

/// A call another node of the fleet signed, once checked: it acts for an
/// operator that node authenticated (with its own admin token, or a
/// browser session when `session` is set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCall {
    pub from: String,
    /// The stored digest of the browser session the call acts for.
    pub session: Option<String>,
}

/// Why a node credential was refused (the caller is told only that it was).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refused {
    #[error("the node credential is incomplete or malformed")]
    Malformed,
    #[error("the node credential is too old or from the future (clocks more than 30 s apart?)")]
    Stale,
    #[error("the node credential does not match the request")]
    Forged,
    #[error("the node credential was used already")]
    Replayed,
}

impl Refused {
    /// The word for it in [`REFUSED`].
    pub fn code(&self) -> &'static str {
        match self {
            Refused::Malformed => "malformed",
            Refused::Stale => "stale",
            Refused::Forged => "forged",
            Refused::Replayed => "replayed",
        }
    }
}

/// The fleet's key, and the signatures this node took lately.
pub struct FleetKey {
    key: Vec<u8>,
    taken: Mutex<HashMap<[u8; 32], i64>>,
}

impl std::fmt::Debug for FleetKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FleetKey(..)")
    }
}

impl FleetKey {
    /// The key as the database keeps it (hex); any other text is taken as
    /// its bytes.
    pub fn new(hex_key: &str) -> FleetKey {
        FleetKey {
            key: hex::decode(hex_key).unwrap_or_else(|_| hex_key.as_bytes().to_vec()),
            taken: Mutex::new(HashMap::new()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn mac(
        &self,
        from: &str,
        to: &str,
        at: i64,
        nonce: &str,
        method: &Method,
        path: &str,
        session: Option<&str>,
        body: &[u8],
    ) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key)
            .expect("HMAC takes a key of any length");
        let body = Sha256::digest(body);
        // Every part is framed by its length: no two requests sign alike.
        for part in [
            from.as_bytes(),
            to.as_bytes(),
            at.to_string().as_bytes(),
            nonce.as_bytes(),
            method.as_str().as_bytes(),
            path.as_bytes(),
            session.unwrap_or("").as_bytes(),
            body.as_slice(),
        ] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac
    }

    /// The headers that sign a call of `method` `path` (with its query,
    /// exactly as it goes on the wire) from node `from` to node `to` at `at`
    /// (ms), acting for browser session `session`.
    #[allow(clippy::too_many_arguments)]
    pub fn sign(
        &self,
        from: &str,
        to: &str,
        at: i64,
        method: &Method,
        path: &str,
        session: Option<&str>,
        body: &[u8],
    ) -> HeaderMap {
        let nonce = crate::auth::new_token();
        let sig = self
            .mac(from, to, at, &nonce, method, path, session, body)
            .finalize()
            .into_bytes();
        let mut h = HeaderMap::new();
        let value = |s: &str| HeaderValue::from_str(s).ok();
        if let Some(v) = value(from) {
            h.insert(NODE, v);
        }
        h.insert(AT, HeaderValue::from(at));
        h.insert(
            NONCE,
            HeaderValue::from_str(&nonce).expect("hex is a header value"),
        );
        if let Some(v) = session.and_then(value) {
            h.insert(SESSION, v);
        }
        h.insert(
            SIGNATURE,
            HeaderValue::from_str(&hex::encode(sig)).expect("hex is a header value"),
        );
        h
    }

    /// Checks a signed call to node `me` at `now` (ms); the call it is, once.
    pub fn verify(
        &self,
        headers: &HeaderMap,
        me: &str,
        method: &Method,
        path: &str,
        body: &[u8],
        now: i64,
    ) -> Result<NodeCall, Refused> {
        let text = |name: &HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        let (Some(from), Some(at), Some(nonce), Some(sig)) =
            (text(&NODE), text(&AT), text(&NONCE), text(&SIGNATURE))
        else {
            return Err(Refused::Malformed);
        };
        let session = text(&SESSION);
        let at: i64 = at.parse().map_err(|_| Refused::Malformed)?;
        let sig: [u8; 32] = hex::decode(sig)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or(Refused::Malformed)?;
        // `at` is the caller's word, unchecked yet: no arithmetic on it
        // may overflow.
        if now.abs_diff(at) > WINDOW_MS as u64 {
            return Err(Refused::Stale);
        }
        self.mac(from, me, at, nonce, method, path, session, body)
            .verify_slice(&sig)
            .map_err(|_| Refused::Forged)?;
        let mut taken = self.taken.lock().expect("poisoned");
        taken.retain(|_, at| now.abs_diff(*at) <= WINDOW_MS as u64);
        if taken.insert(sig, at).is_some() {
            return Err(Refused::Replayed);
        }
        Ok(NodeCall {
            from: from.to_owned(),
            session: session.map(str::to_owned),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    fn signed(k: &FleetKey) -> HeaderMap {
        k.sign(
            "a",
            "b",
            NOW,
            &Method::POST,
            "/api/v1/runs/3/input",
            None,
            b"{}",
        )
    }

    #[test]
    fn a_signed_call_passes_once() {
        let k = FleetKey::new("00ff");
        let h = signed(&k);
        let call = k
            .verify(
                &h,
                "b",
                &Method::POST,
                "/api/v1/runs/3/input",
                b"{}",
                NOW + 5,
            )
            .unwrap();
        assert_eq!(call.from, "a");
        assert_eq!(call.session, None);
        assert_eq!(
            k.verify(
                &h,
                "b",
                &Method::POST,
                "/api/v1/runs/3/input",
                b"{}",
                NOW + 6
            ),
            Err(Refused::Replayed)
        );
    }

    #[test]
    fn two_identical_calls_sign_apart() {
        let k = FleetKey::new("00ff");
        let (one, two) = (signed(&k), signed(&k));
        assert_ne!(one.get(SIGNATURE), two.get(SIGNATURE));
        for h in [one, two] {
            assert!(
                k.verify(&h, "b", &Method::POST, "/api/v1/runs/3/input", b"{}", NOW)
                    .is_ok()
            );
        }
    }

    #[test]
    fn any_change_to_the_call_is_refused() {
        let k = FleetKey::new("00ff");
        let h = signed(&k);
        let check = |m: &Method, p: &str, b: &[u8], now: i64| k.verify(&h, "b", m, p, b, now);
        assert_eq!(
            check(&Method::GET, "/api/v1/runs/3/input", b"{}", NOW),
            Err(Refused::Forged)
        );
        assert_eq!(
            check(&Method::POST, "/api/v1/runs/4/input", b"{}", NOW),
            Err(Refused::Forged)
        );
        assert_eq!(
            check(&Method::POST, "/api/v1/runs/3/input", b"{\"a\":1}", NOW),
            Err(Refused::Forged)
        );
        assert_eq!(
            check(
                &Method::POST,
                "/api/v1/runs/3/input",
                b"{}",
                NOW + WINDOW_MS + 1
            ),
            Err(Refused::Stale)
        );
        // Another fleet's key, another session, no signature at all.
        let other = FleetKey::new("00fe");
        assert_eq!(
            other.verify(&h, "b", &Method::POST, "/api/v1/runs/3/input", b"{}", NOW),
            Err(Refused::Forged)
        );
        let mut s = h.clone();
        s.insert(SESSION, HeaderValue::from_static("abc"));
        assert_eq!(
            k.verify(&s, "b", &Method::POST, "/api/v1/runs/3/input", b"{}", NOW),
            Err(Refused::Forged)
        );
        let mut nonce = h.clone();
        nonce.insert(NONCE, HeaderValue::from_static("00"));
        assert_eq!(
            k.verify(
                &nonce,
                "b",
                &Method::POST,
                "/api/v1/runs/3/input",
                b"{}",
                NOW
            ),
            Err(Refused::Forged)
        );
        let mut none = h.clone();
        none.remove(SIGNATURE);
        assert_eq!(
            k.verify(
                &none,
                "b",
                &Method::POST,
                "/api/v1/runs/3/input",
                b"{}",
                NOW
            ),
            Err(Refused::Malformed)
        );
        // Made for node b, it opens nothing at node c.
        assert_eq!(
            k.verify(&h, "c", &Method::POST, "/api/v1/runs/3/input", b"{}", NOW),
            Err(Refused::Forged)
        );
        // A time no clock can be near is stale, not an overflow.
        let mut far = h.clone();
        far.insert(AT, HeaderValue::from(i64::MIN));
        assert_eq!(
            k.verify(&far, "b", &Method::POST, "/api/v1/runs/3/input", b"{}", NOW),
            Err(Refused::Stale)
        );
        // Still good after all that: nothing above took it.
        assert!(check(&Method::POST, "/api/v1/runs/3/input", b"{}", NOW).is_ok());
    }
}
