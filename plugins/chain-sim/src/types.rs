//! Ids every chain plugin uses: chains, tokens, transaction hashes and simulated addresses.

use std::fmt;

use crate::wire::{DecodeError, Reader, Wire, Writer};

/// An account address on a simulated chain (wallets, relayers, vaults, treasuries and
/// destinations share one space of integers; a real chain's address is the adapter's business).
pub type Address = u64;

wire_id!(
    /// `blockchain_networks.id`.
    ChainId(u32)
);
wire_id!(
    /// `currencies.id`: a token (or the native coin) on a chain.
    TokenId(u32)
);

/// A transaction hash (keccak-256 on a real EVM chain, a txid on Bitcoin, a signature on Solana).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TxHash(pub [u8; 32]);

impl TxHash {
    /// A hash derived from `body` alone (the simulators' "signing": the same content, the same
    /// hash, so the same effect executed twice sends the same transaction).
    pub fn of(seed: u64, body: &[u8]) -> TxHash {
        let mut h = [0u8; 32];
        for (i, chunk) in h.chunks_mut(8).enumerate() {
            chunk.copy_from_slice(&rtgs_core::hash::bytes64(seed + i as u64, body).to_le_bytes());
        }
        TxHash(h)
    }

    /// Lowercase hex, `0x`-prefixed (the API's spelling).
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(66);
        s.push_str("0x");
        for b in &self.0 {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }

    /// Parses [`TxHash::to_hex`]'s spelling (with or without `0x`); `None` for anything else.
    pub fn from_hex(text: &str) -> Option<TxHash> {
        let t = text.strip_prefix("0x").unwrap_or(text);
        if t.len() != 64 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut h = [0u8; 32];
        for (i, b) in h.iter_mut().enumerate() {
            *b = u8::from_str_radix(t.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(TxHash(h))
    }
}

impl fmt::Debug for TxHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("0x")?;
        for b in &self.0[..6] {
            write!(f, "{b:02x}")?;
        }
        f.write_str("…")
    }
}

impl Wire for TxHash {
    const BYTES_MIN: usize = 32;
    fn put(&self, w: &mut Writer<'_>) {
        w.bytes(&self.0);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(TxHash(r.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_print_and_parse_back() {
        let h = TxHash::of(1, b"abc");
        assert_eq!(TxHash::from_hex(&h.to_hex()), Some(h));
        assert_eq!(TxHash::from_hex(&h.to_hex()[2..]), Some(h));
        assert_eq!(TxHash::from_hex("0x12"), None);
        assert_eq!(TxHash::from_hex(&"g".repeat(64)), None);
        assert_ne!(TxHash::of(1, b"abc"), TxHash::of(1, b"abd"));
    }
}
