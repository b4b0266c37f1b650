//! Participants' `bmi`s, each in the participant's own namespace.
//!
//! A participant writes a `bmi` text (ISO 20022 `BizMsgIdr`, `Max35Text`: 1 to 35 printable
//! ASCII). The engines know one namespace of `bmi`s, every one paid at most once, ever. So that
//! one participant's text can neither block nor reveal another's, the API journals a
//! participant's entry under its **scoped key**: `~`, the participant's 7-character tag, then
//! the text (≤ 43 bytes, `rtgs_core::limits::BMI_BYTES_MAX`). Two participants' equal texts are
//! two keys (both paid, each its own payment), and a retry of any age is the same key, which the
//! engine answers with the original seq. The participant only ever sees its text: answers,
//! statuses, pacs.002, statements and errors take the scope off ([`Scope::text`], [`shown`]);
//! operators see keys as journaled (`GET /v1/operator/entries/{bmi}` takes a scoped key).
//!
//! The tag is 42 bits of SHA-256 over the participant's key id (not keyed: every API of the
//! cluster, and the same one after a restart, must derive the same key), in the URL-safe base64
//! alphabet; a config whose participants' tags coincide is refused
//! ([`crate::config::ConfigError::ScopeCollision`]). Operators' and internal `bmi`s are journaled
//! as written, and an operator's may not start with `~` ([`crate::checks::parse_operator_bmi`]),
//! so no raw `bmi` can be a participant's key.
//!
//! A participant's key therefore follows its key id: a participant whose key id changes gets a
//! new namespace (its older `bmi`s are no longer its retries).

use rtgs_core::entry::Bmi;
use rtgs_core::limits::{BMI_BYTES_MAX, BMI_SCOPE_BYTES, BMI_TEXT_BYTES_MAX};
use sha2::{Digest, Sha256};

/// The first byte of every scoped key (and of no operator's `bmi`).
pub const SCOPE_MARK: u8 = b'~';

/// Characters of a participant's tag.
const TAG_CHARS: usize = BMI_SCOPE_BYTES - 1;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

const _: () = assert!(BMI_TEXT_BYTES_MAX + BMI_SCOPE_BYTES <= BMI_BYTES_MAX);
const _: () = assert!(TAG_CHARS * 6 <= 64, "the tag comes from one u64 of the digest");

/// One participant's namespace: the prefix of its scoped keys.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    prefix: [u8; BMI_SCOPE_BYTES],
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(std::str::from_utf8(&self.prefix).unwrap_or("?"))
    }
}

impl Scope {
    /// The scope of the participant with key id `key_id`.
    pub fn of(key_id: &str) -> Scope {
        let mut hash = Sha256::new();
        hash.update(b"rtgs bmi scope v1\0");
        hash.update(key_id.as_bytes());
        let digest = hash.finalize();
        let mut word = [0u8; 8];
        word.copy_from_slice(&digest[..8]);
        let mut bits = u64::from_be_bytes(word);
        let mut prefix = [SCOPE_MARK; BMI_SCOPE_BYTES];
        for c in prefix[1..].iter_mut() {
            *c = ALPHABET[(bits >> 58) as usize];
            bits <<= 6;
        }
        Scope { prefix }
    }

    /// The key a participant's `text` (a valid `bmi` of at most [`BMI_TEXT_BYTES_MAX`] bytes,
    /// [`crate::checks::parse_bmi`]) is journaled under.
    pub fn key(&self, text: Bmi) -> Bmi {
        let t = text.as_bytes();
        debug_assert!(t.len() <= BMI_TEXT_BYTES_MAX);
        let mut bytes = [0u8; BMI_BYTES_MAX];
        bytes[..BMI_SCOPE_BYTES].copy_from_slice(&self.prefix);
        let n = BMI_SCOPE_BYTES + t.len().min(BMI_TEXT_BYTES_MAX);
        bytes[BMI_SCOPE_BYTES..n].copy_from_slice(&t[..n - BMI_SCOPE_BYTES]);
        // Printable prefix + printable text, 9 to 43 bytes: always a valid bmi.
        Bmi::new(&bytes[..n]).unwrap_or(Bmi::NONE)
    }

    /// The participant's text of `key`, if `key` is in this scope.
    pub fn text(&self, key: &Bmi) -> Option<Bmi> {
        let b = key.as_bytes();
        if b.len() > BMI_SCOPE_BYTES && b[..BMI_SCOPE_BYTES] == self.prefix {
            Bmi::new(&b[BMI_SCOPE_BYTES..]).ok()
        } else {
            None
        }
    }
}

/// A journaled `bmi` as a participant is shown it (a statement line names other participants'
/// entries too: the creditor sees the debtor's text, as a payment's reference): the text of a
/// scoped key, any other `bmi` (an operator's, the setup's, a plugin's) as it is.
pub fn shown(bmi: &Bmi) -> &str {
    shown_text(bmi.as_str())
}

/// [`shown`] of a journaled `bmi` as text.
pub fn shown_text(bmi: &str) -> &str {
    let b = bmi.as_bytes();
    if b.len() > BMI_SCOPE_BYTES && b[0] == SCOPE_MARK {
        &bmi[BMI_SCOPE_BYTES..]
    } else {
        bmi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bmi(text: &str) -> Bmi {
        Bmi::new(text.as_bytes()).unwrap_or(Bmi::NONE)
    }

    #[test]
    fn two_participants_equal_texts_are_two_keys_and_each_sees_its_text() {
        let (a, b) = (Scope::of("bank-a"), Scope::of("bank-b"));
        assert_ne!(a, b);
        assert_eq!(a, Scope::of("bank-a"), "the same key id, the same scope (every API, every start)");
        let (ka, kb) = (a.key(bmi("T1")), b.key(bmi("T1")));
        assert_ne!(ka, kb);
        assert_eq!(ka.as_bytes().len(), BMI_SCOPE_BYTES + 2);
        assert_eq!(ka.as_bytes()[0], SCOPE_MARK);
        assert_eq!(a.text(&ka), Some(bmi("T1")));
        assert_eq!(a.text(&kb), None, "another participant's key is not in this scope");
        assert_eq!((shown(&ka), shown(&kb), shown(&bmi("SETUP-OPEN-1"))), ("T1", "T1", "SETUP-OPEN-1"));
    }

    #[test]
    fn the_longest_text_fits_and_every_character_survives() {
        let text: String = (0..BMI_TEXT_BYTES_MAX).map(|i| (b'!' + (i as u8 * 7) % 94) as char).collect();
        let s = Scope::of("p");
        let key = s.key(bmi(&text));
        assert_eq!(key.as_bytes().len(), BMI_BYTES_MAX);
        assert_eq!(s.text(&key).map(|t| t.to_string()), Some(text.clone()));
        assert_eq!(shown(&key), text);
        // A text that itself starts with the mark is still the participant's own.
        let tilde = s.key(bmi("~x"));
        assert_eq!(shown(&tilde), "~x");
    }
}
