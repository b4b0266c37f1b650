//! Request signing: who is calling, checked before anything is parsed.
//!
//! A participant holds a key id and a secret. Every request carries three headers:
//!
//! * `x-rtgs-key` — the key id;
//! * `x-rtgs-timestamp` — Unix time in seconds, within ±[`TIMESTAMP_SKEW_S_MAX`] of the server's,
//!   optionally followed by `.` and a nonce of up to [`NONCE_CHARS_MAX`] characters
//!   (`A-Z a-z 0-9 - _`), e.g. `1790000000.k3x9`: signed with the rest, it makes two requests
//!   sent in the same second distinct;
//! * `x-rtgs-signature` — lowercase hex of HMAC-SHA256(secret, message), where message is
//!   `METHOD "\n" PATH_AND_QUERY "\n" TIMESTAMP "\n" BODY` (the body's exact bytes; empty for GET).
//!
//! Each header is given once: a request carrying one of them twice is refused (401
//! `duplicate_credentials`), never read first-wins (the server checks this before [`Keyring::verify`]).
//!
//! The signature is compared in constant time (`Mac::verify_slice`). Secrets never leave this
//! module: [`Participant`]'s `Debug` prints the key id only.
//!
//! **Replays.** A write (any method but GET and HEAD) is accepted once: its signature is
//! remembered while its timestamp is inside the window, and the same signed request again is
//! 401 `replayed_request` — a captured request cannot be replayed later, when the `bmi` may have
//! left the dedupe windows. A client that retries signs again with a new nonce or a later time (a
//! different signature; the retry then gets the original answer through idempotency by `bmi`). Reads are
//! not deduplicated: replaying one tells an eavesdropper nothing it did not see. The memory is
//! bounded ([`REPLAY_GUARD_ENTRIES_MAX`]); beyond it the oldest signatures are forgotten first —
//! every write carries a `bmi`, so a replay that slips through is still never journaled twice.

use crate::limits::{REPLAY_GUARD_ENTRIES_MAX, TIMESTAMP_SKEW_S_MAX};
use hmac::{Hmac, Mac};
use rtgs_core::entry::AccountId;
use rtgs_core::hash::Prehashed;
use sha2::Sha256;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex};

pub const HEADER_KEY: &str = "x-rtgs-key";
pub const HEADER_TIMESTAMP: &str = "x-rtgs-timestamp";
pub const HEADER_SIGNATURE: &str = "x-rtgs-signature";

/// Longest nonce after the timestamp's seconds.
pub const NONCE_CHARS_MAX: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// A participant's credentials and the accounts it may debit and read.
pub struct Participant {
    /// Shared with every tracked transfer the participant submitted (no copy per record).
    pub key_id: Arc<str>,
    secret: Vec<u8>,
    pub accounts: BTreeSet<AccountId>,
    /// The namespace of the participant's `bmi`s (derived from its key id).
    pub scope: crate::scope::Scope,
}

impl Participant {
    pub fn new(key_id: String, secret: Vec<u8>, accounts: BTreeSet<AccountId>) -> Self {
        let scope = crate::scope::Scope::of(&key_id);
        Participant { key_id: Arc::from(key_id), secret, accounts, scope }
    }

    pub fn owns(&self, account: AccountId) -> bool {
        self.accounts.contains(&account)
    }
}

impl fmt::Debug for Participant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Participant")
            .field("key_id", &self.key_id)
            .field("secret", &"<redacted>")
            .field("accounts", &self.accounts)
            .finish()
    }
}

/// The three signature headers of a request, as received.
#[derive(Copy, Clone, Debug, Default)]
pub struct SignedHeaders<'a> {
    pub key: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub signature: Option<&'a str>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    #[error("header {0} appears more than once")]
    DuplicateHeader(&'static str),
    #[error("x-rtgs-timestamp must be Unix seconds, optionally followed by '.' and a nonce of 1 to 32 of A-Z a-z 0-9 - _")]
    BadTimestamp,
    #[error("x-rtgs-timestamp is more than 300 s away from the server's clock")]
    StaleTimestamp,
    #[error("unknown key id")]
    UnknownKey,
    #[error("signature does not match")]
    BadSignature,
    #[error("this signed request was already received; sign a retry with the current time")]
    Replayed,
}

impl AuthError {
    /// The machine-readable code of the 401 answer.
    pub fn code(self) -> &'static str {
        match self {
            AuthError::MissingHeader(_) => "missing_credentials",
            AuthError::DuplicateHeader(_) => "duplicate_credentials",
            AuthError::BadTimestamp => "bad_timestamp",
            AuthError::StaleTimestamp => "stale_timestamp",
            AuthError::UnknownKey => "unknown_key",
            AuthError::BadSignature => "bad_signature",
            AuthError::Replayed => "replayed_request",
        }
    }
}

fn mac(secret: &[u8], method: &str, path: &str, timestamp: &str, body: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    let mut mac = match HmacSha256::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC takes keys of any length"),
    };
    for part in [method.as_bytes(), b"\n", path.as_bytes(), b"\n", timestamp.as_bytes(), b"\n", body] {
        mac.update(part);
    }
    mac
}

/// The signature a client sends (lowercase hex).
pub fn sign(secret: &[u8], method: &str, path: &str, timestamp: &str, body: &[u8]) -> String {
    hex::encode(mac(secret, method, path, timestamp, body).finalize().into_bytes())
}

/// Signatures (16-byte prefixes) remembered, and (timestamp, signature) in arrival order. An
/// HMAC output is uniformly distributed and cannot be chosen without the secret: its bytes are
/// the hash ([`Prehashed`]), no second hashing.
type Remembered = (HashSet<u128, Prehashed>, VecDeque<(u64, u128)>);

/// Signatures of the writes accepted within the window (see the module docs).
#[derive(Debug, Default)]
struct ReplayGuard {
    inner: Mutex<Remembered>,
}

impl ReplayGuard {
    /// False if `signature` was seen already; remembers it otherwise.
    fn first_time(&self, signature: &[u8], at_s: u64, now_s: u64) -> bool {
        let mut prefix = [0u8; 16];
        let n = signature.len().min(16);
        prefix[..n].copy_from_slice(&signature[..n]);
        let key = u128::from_le_bytes(prefix);
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (seen, order) = &mut *g;
        // A timestamp older than the window is refused as stale anyway: forget it.
        while order.front().is_some_and(|&(at, _)| at + TIMESTAMP_SKEW_S_MAX < now_s)
            || order.len() >= REPLAY_GUARD_ENTRIES_MAX
        {
            if let Some((_, old)) = order.pop_front() {
                seen.remove(&old);
            }
        }
        if !seen.insert(key) {
            return false;
        }
        order.push_back((at_s, key));
        true
    }
}

/// Participants by key id.
#[derive(Debug, Default)]
pub struct Keyring {
    by_key: HashMap<String, Participant>,
    replays: ReplayGuard,
}

impl Keyring {
    /// The participant (or operator) with key id `key_id`.
    pub fn get(&self, key_id: &str) -> Option<&Participant> {
        self.by_key.get(key_id)
    }

    pub fn new(participants: Vec<Participant>) -> Self {
        Keyring {
            by_key: participants.into_iter().map(|p| (p.key_id.to_string(), p)).collect(),
            replays: ReplayGuard::default(),
        }
    }

    /// Checks a request's signature; `now_s` is the server's Unix time.
    pub fn verify(
        &self,
        method: &str,
        path: &str,
        headers: SignedHeaders<'_>,
        body: &[u8],
        now_s: u64,
    ) -> Result<&Participant, AuthError> {
        let key = headers.key.ok_or(AuthError::MissingHeader(HEADER_KEY))?;
        let timestamp = headers.timestamp.ok_or(AuthError::MissingHeader(HEADER_TIMESTAMP))?;
        let signature = headers.signature.ok_or(AuthError::MissingHeader(HEADER_SIGNATURE))?;
        let (seconds, nonce) = timestamp.split_once('.').unwrap_or((timestamp, "x"));
        if seconds.is_empty() || seconds.len() > 20 || !seconds.bytes().all(|b| b.is_ascii_digit()) {
            return Err(AuthError::BadTimestamp);
        }
        let nonce_ok = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
        if nonce.is_empty() || nonce.len() > NONCE_CHARS_MAX || !nonce.bytes().all(nonce_ok) {
            return Err(AuthError::BadTimestamp);
        }
        let at_s: u64 = seconds.parse().map_err(|_| AuthError::BadTimestamp)?;
        if at_s.abs_diff(now_s) > TIMESTAMP_SKEW_S_MAX {
            return Err(AuthError::StaleTimestamp);
        }
        let participant = self.by_key.get(key).ok_or(AuthError::UnknownKey)?;
        let given = hex::decode(signature).map_err(|_| AuthError::BadSignature)?;
        mac(&participant.secret, method, path, timestamp, body)
            .verify_slice(&given)
            .map_err(|_| AuthError::BadSignature)?;
        if method != "GET" && method != "HEAD" && !self.replays.first_time(&given, at_s, now_s) {
            return Err(AuthError::Replayed);
        }
        Ok(participant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn keyring() -> Keyring {
        Keyring::new(vec![Participant::new("bank-a".into(), b"secret-of-bank-a".to_vec(), BTreeSet::new())])
    }

    fn headers<'a>(ts: &'a str, sig: &'a str) -> SignedHeaders<'a> {
        SignedHeaders { key: Some("bank-a"), timestamp: Some(ts), signature: Some(sig) }
    }

    #[test]
    fn accepts_a_correct_signature_within_the_window() {
        let k = keyring();
        for at in [NOW, NOW - 300, NOW + 300] {
            let ts = at.to_string();
            let sig = sign(b"secret-of-bank-a", "POST", "/v1/transfers", &ts, b"{}");
            let p = k.verify("POST", "/v1/transfers", headers(&ts, &sig), b"{}", NOW);
            assert_eq!(p.map(|p| p.key_id.as_ref()), Ok("bank-a"));
        }
    }

    #[test]
    fn every_signed_part_matters() {
        let k = keyring();
        let ts = NOW.to_string();
        let sig = sign(b"secret-of-bank-a", "POST", "/v1/transfers", &ts, b"{}");
        let bad = |m: &str, p: &str, t: &str, b: &[u8]| k.verify(m, p, headers(t, &sig), b, NOW).err();
        assert_eq!(bad("GET", "/v1/transfers", &ts, b"{}"), Some(AuthError::BadSignature));
        assert_eq!(bad("POST", "/v1/transfer", &ts, b"{}"), Some(AuthError::BadSignature));
        assert_eq!(
            bad("POST", "/v1/transfers", &(NOW + 1).to_string(), b"{}"),
            Some(AuthError::BadSignature)
        );
        assert_eq!(bad("POST", "/v1/transfers", &ts, b"{ }"), Some(AuthError::BadSignature));
        let wrong_secret = sign(b"another-secret!!", "POST", "/v1/transfers", &ts, b"{}");
        let r = k.verify("POST", "/v1/transfers", headers(&ts, &wrong_secret), b"{}", NOW);
        assert_eq!(r.err(), Some(AuthError::BadSignature));
        let r = k.verify("POST", "/v1/transfers", headers(&ts, "zz"), b"{}", NOW);
        assert_eq!(r.err(), Some(AuthError::BadSignature));
    }

    #[test]
    fn refuses_stale_bad_and_missing_credentials() {
        let k = keyring();
        let check = |h: SignedHeaders<'_>| k.verify("GET", "/", h, b"", NOW).err();
        for at in [NOW - 301, NOW + 301, 0] {
            let ts = at.to_string();
            let sig = sign(b"secret-of-bank-a", "GET", "/", &ts, b"");
            assert_eq!(check(headers(&ts, &sig)), Some(AuthError::StaleTimestamp));
        }
        for ts in ["", "-1", "1e9", "99999999999999999999999", "1800000000.", "1800000000.a b", ".abc"] {
            assert_eq!(check(headers(ts, "00")), Some(AuthError::BadTimestamp), "{ts}");
        }
        let ts = NOW.to_string();
        let mut h = headers(&ts, "00");
        h.key = Some("nobody");
        assert_eq!(check(h), Some(AuthError::UnknownKey));
        h.key = None;
        assert_eq!(check(h), Some(AuthError::MissingHeader(HEADER_KEY)));
    }

    #[test]
    fn a_write_is_accepted_once_per_signature_and_a_read_always() {
        let k = keyring();
        let ts = NOW.to_string();
        let post = sign(b"secret-of-bank-a", "POST", "/v1/transfers", &ts, b"{}");
        let check =
            |m: &str, sig: &str, now: u64| k.verify(m, "/v1/transfers", headers(&ts, sig), b"{}", now).err();
        assert_eq!(check("POST", &post, NOW), None);
        assert_eq!(check("POST", &post, NOW + 1), Some(AuthError::Replayed));
        // Re-signed a second later: a new signature, accepted.
        let ts2 = (NOW + 1).to_string();
        let again = sign(b"secret-of-bank-a", "POST", "/v1/transfers", &ts2, b"{}");
        assert!(k.verify("POST", "/v1/transfers", headers(&ts2, &again), b"{}", NOW + 1).is_ok());
        // The same second with another nonce: another signature, accepted.
        let ts_nonce = format!("{NOW}.n2");
        let nonce = sign(b"secret-of-bank-a", "POST", "/v1/transfers", &ts_nonce, b"{}");
        assert!(k.verify("POST", "/v1/transfers", headers(&ts_nonce, &nonce), b"{}", NOW).is_ok());
        let get = sign(b"secret-of-bank-a", "GET", "/v1/transfers", &ts, b"{}");
        assert_eq!(check("GET", &get, NOW), None);
        assert_eq!(check("GET", &get, NOW), None);
        // Past the window the signature is forgotten, and the timestamp is stale by then.
        assert_eq!(check("POST", &post, NOW + 301), Some(AuthError::StaleTimestamp));
        let ts3 = (NOW + 301).to_string();
        let later = sign(b"secret-of-bank-a", "POST", "/v1/transfers", &ts3, b"{}");
        assert!(k.verify("POST", "/v1/transfers", headers(&ts3, &later), b"{}", NOW + 301).is_ok());
        let remembered = k.replays.inner.lock().map(|g| g.0.len()).unwrap_or(0);
        // Forgotten in arrival order once expired: the first (NOW) went; the one signed at NOW + 1
        // is not expired yet and the NOW nonce one behind it waits for it (conservative).
        assert_eq!(remembered, 3);
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let p = Participant::new("bank-a".into(), b"top-secret-value".to_vec(), BTreeSet::new());
        let shown = format!("{p:?}");
        assert!(shown.contains("bank-a") && !shown.contains("top-secret-value"), "{shown}");
    }
}
