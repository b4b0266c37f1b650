//! Identifiers and small values: ids, bounded text, payloads and the ledger names a withdrawal
//! uses.

use std::fmt;

use rtgs_core::entry::{AccountId, Currency};

pub use rtgs_chain_sim::types::{ChainId, TokenId, TxHash};

use crate::wire::{DecodeError, Reader, Wire, Writer};

wire_id!(
    /// `withdrawals.id`: the seq of the journal entry that asked for it — unique, the same on
    /// every center, and known to the requester from the entry's final notice.
    WithdrawalId(u64)
);
wire_id!(
    /// An asset a withdrawal pays: one token on one chain, mapped to a ledger currency.
    AssetId(u32)
);
wire_id!(
    /// `withdrawal_vault_id`: a custody vault account that sends withdrawals on one chain.
    VaultId(u64)
);
wire_id!(
    /// `actor_user_id`: who asked (a participant's or an operator's user, as the API knows it).
    ActorId(u64)
);
wire_id!(
    /// The customer's (or settlement) account in the RTGS ledger (`rtgs_core` `AccountId`).
    LedgerAccount(u64)
);

impl LedgerAccount {
    pub fn account_id(self) -> AccountId {
        AccountId(self.0)
    }
}

/// A ledger currency code (ISO 4217 or the ledger's three-letter code for a chain's coin).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CurrencyCode(pub [u8; 3]);

impl CurrencyCode {
    pub fn currency(self) -> Option<Currency> {
        Currency::new(&self.0).ok()
    }
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("???")
    }
}

impl fmt::Debug for CurrencyCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Wire for CurrencyCode {
    const BYTES_MIN: usize = 3;
    fn put(&self, w: &mut Writer<'_>) {
        w.bytes(&self.0);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let c = CurrencyCode(r.array()?);
        c.currency().ok_or(DecodeError::Invalid("currency"))?;
        Ok(c)
    }
}

/// Printable text (UTF-8, no control characters) of at most 65,535 bytes; each field bounds it
/// further when its command is checked (`crate::limits`).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Text(String);

/// Text that cannot be a [`Text`].
#[derive(Copy, Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum TextError {
    #[error("text longer than {0} bytes")]
    TooLong(usize),
    #[error("text with control characters")]
    Control,
    #[error("empty text")]
    Empty,
}

impl Text {
    /// Checked text of at most `max` bytes, not empty.
    pub fn new(s: &str, max: usize) -> Result<Text, TextError> {
        if s.is_empty() {
            return Err(TextError::Empty);
        }
        if s.len() > max.min(u16::MAX as usize) {
            return Err(TextError::TooLong(max));
        }
        if s.chars().any(char::is_control) {
            return Err(TextError::Control);
        }
        Ok(Text(s.to_string()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl Wire for Text {
    const BYTES_MIN: usize = 2;
    fn put(&self, w: &mut Writer<'_>) {
        // `new` bounds the length to u16.
        w.bytes(&(self.0.len() as u16).to_le_bytes());
        w.bytes(self.0.as_bytes());
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let n = u16::from_le_bytes(r.array()?) as usize;
        let s = std::str::from_utf8(r.take(n)?).map_err(|_| DecodeError::Invalid("text"))?;
        Text::new(s, u16::MAX as usize).map_err(|_| DecodeError::Invalid("text"))
    }
}

/// Opaque bytes (signed payloads, signatures) of at most `PAYLOAD_BYTES_MAX`.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Blob(pub Vec<u8>);

impl fmt::Debug for Blob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Blob({} bytes)", self.0.len())
    }
}

impl Wire for Blob {
    const BYTES_MIN: usize = 2;
    fn put(&self, w: &mut Writer<'_>) {
        assert!(self.0.len() <= crate::limits::PAYLOAD_BYTES_MAX, "payload over the limit");
        w.bytes(&(self.0.len() as u16).to_le_bytes());
        w.bytes(&self.0);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let n = u16::from_le_bytes(r.array()?) as usize;
        if n > crate::limits::PAYLOAD_BYTES_MAX {
            return Err(DecodeError::Invalid("payload length"));
        }
        Ok(Blob(r.take(n)?.to_vec()))
    }
}

/// A 32-byte digest (what raw signing signs).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Digest(pub [u8; 32]);

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({:?})", TxHash(self.0))
    }
}

impl Wire for Digest {
    const BYTES_MIN: usize = 32;
    fn put(&self, w: &mut Writer<'_>) {
        w.bytes(&self.0);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Digest(r.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{from_slice, to_vec};

    #[test]
    fn text_is_checked_on_the_way_in_and_back() {
        assert_eq!(Text::new("", 4), Err(TextError::Empty));
        assert_eq!(Text::new("abcde", 4), Err(TextError::TooLong(4)));
        assert_eq!(Text::new("a\nb", 4), Err(TextError::Control));
        let t = Text::new("0xabc", 64).expect("valid");
        assert_eq!(from_slice::<Text>(&to_vec(&t)), Ok(t));
        assert!(from_slice::<Text>(&[2, 0, 0xff, 0xfe]).is_err(), "not UTF-8");
        assert!(from_slice::<Text>(&[1, 0, b'\n']).is_err(), "control character");
        assert!(from_slice::<CurrencyCode>(b"us1").is_err());
        assert!(from_slice::<Blob>(&[0xff, 0xff]).is_err(), "longer than the payload limit");
    }
}
