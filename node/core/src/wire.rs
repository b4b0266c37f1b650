//! The compact binary codec of the plugins' commands, effects and checkpoints (every plugin
//! crate uses this one; `wire_struct!` and `code_enum!` derive it for structs and enums).
//!
//! Little-endian fixed-width integers, `u8` tags for enums, `u32` counts for lists. Decoding
//! checks every tag and bounds every count by the bytes left before allocating, so hostile input
//! is a [`DecodeError`] value, never a panic or an unbounded allocation. Maps must arrive in
//! strictly increasing key order, which keeps `encode(decode(x)) == x` (the state hash depends
//! on it).
//!
//! Encoding writes into a [`Sink`]: a `Vec<u8>` for checkpoints, or a [`HashSink`] that folds
//! the same bytes into a 64-bit hash without materialising them (the state hash).

use std::collections::{BTreeMap, BTreeSet};

use crate::hash::mix64;

/// Why bytes did not decode.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("input ends inside a field")]
    Truncated,
    #[error("{0} bytes after the last field")]
    Trailing(usize),
    #[error("unknown op code {0}")]
    UnknownOp(u16),
    #[error("invalid value for {0}")]
    Invalid(&'static str),
    #[error("unknown checkpoint version {0}")]
    Version(u8),
}

/// Where encoded bytes go.
pub trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Folds a byte stream into 64 bits, word by word, with the core's mixer.
pub struct HashSink {
    h: u64,
    word: [u8; 8],
    filled: usize,
    total: u64,
}

impl HashSink {
    pub fn new(seed: u64) -> Self {
        HashSink { h: mix64(seed), word: [0; 8], filled: 0, total: 0 }
    }

    pub fn finish(mut self) -> u64 {
        if self.filled > 0 {
            self.word[self.filled..].fill(0);
            self.fold();
        }
        mix64(self.h ^ self.total)
    }

    fn fold(&mut self) {
        self.h = mix64(self.h ^ u64::from_le_bytes(self.word)).wrapping_add(0x9E37_79B9_7F4A_7C15);
        self.filled = 0;
    }
}

impl Sink for HashSink {
    fn put(&mut self, bytes: &[u8]) {
        self.total = self.total.wrapping_add(bytes.len() as u64);
        for b in bytes {
            self.word[self.filled] = *b;
            self.filled += 1;
            if self.filled == 8 {
                self.fold();
            }
        }
    }
}

/// Writes values into a sink.
pub struct Writer<'a> {
    sink: &'a mut dyn Sink,
}

impl<'a> Writer<'a> {
    pub fn new(sink: &'a mut dyn Sink) -> Self {
        Writer { sink }
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.sink.put(b);
    }
    /// A list length. Our own collections never reach 2^32 items: that would be a bug.
    pub fn count(&mut self, n: usize) {
        assert!(u32::try_from(n).is_ok(), "collection too large to encode: {n}");
        self.sink.put(&(n as u32).to_le_bytes());
    }
}

/// Reads values from a byte slice.
pub struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, at: 0 }
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.at.checked_add(n).ok_or(DecodeError::Truncated)?;
        let s = self.buf.get(self.at..end).ok_or(DecodeError::Truncated)?;
        self.at = end;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    /// A list length, bounded by what the remaining bytes could hold.
    pub fn count(&mut self, item_bytes_min: usize) -> Result<usize, DecodeError> {
        let n = u32::from_le_bytes(self.array::<4>()?) as usize;
        if n.saturating_mul(item_bytes_min.max(1)) > self.remaining() {
            return Err(DecodeError::Truncated);
        }
        Ok(n)
    }

    /// The whole input must be consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

/// A value with a binary encoding.
pub trait Wire: Sized {
    /// Smallest encoding in bytes: bounds list counts before allocating.
    const BYTES_MIN: usize;
    fn put(&self, w: &mut Writer<'_>);
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError>;
}

macro_rules! wire_int {
    ($($t:ty),*) => {$(
        impl Wire for $t {
            const BYTES_MIN: usize = std::mem::size_of::<$t>();
            fn put(&self, w: &mut Writer<'_>) {
                w.bytes(&self.to_le_bytes());
            }
            fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok(<$t>::from_le_bytes(r.array()?))
            }
        }
    )*};
}
wire_int!(u8, u16, u32, u64, u128);

impl Wire for bool {
    const BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer<'_>) {
        w.bytes(&[u8::from(*self)]);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.array::<1>()?[0] {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Invalid("bool")),
        }
    }
}

impl<T: Wire> Wire for Option<T> {
    const BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer<'_>) {
        match self {
            None => w.bytes(&[0]),
            Some(v) => {
                w.bytes(&[1]);
                v.put(w);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.array::<1>()?[0] {
            0 => Ok(None),
            1 => Ok(Some(T::get(r)?)),
            _ => Err(DecodeError::Invalid("option tag")),
        }
    }
}

impl<T: Wire> Wire for Box<T> {
    const BYTES_MIN: usize = T::BYTES_MIN;
    fn put(&self, w: &mut Writer<'_>) {
        T::put(self, w);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        T::get(r).map(Box::new)
    }
}

impl<A: Wire, B: Wire> Wire for (A, B) {
    const BYTES_MIN: usize = A::BYTES_MIN + B::BYTES_MIN;
    fn put(&self, w: &mut Writer<'_>) {
        self.0.put(w);
        self.1.put(w);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok((A::get(r)?, B::get(r)?))
    }
}

impl<T: Wire> Wire for Vec<T> {
    const BYTES_MIN: usize = 4;
    fn put(&self, w: &mut Writer<'_>) {
        w.count(self.len());
        for v in self {
            v.put(w);
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let n = r.count(T::BYTES_MIN)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(T::get(r)?);
        }
        Ok(v)
    }
}

impl<K: Wire + Ord, V: Wire> Wire for BTreeMap<K, V> {
    const BYTES_MIN: usize = 4;
    fn put(&self, w: &mut Writer<'_>) {
        w.count(self.len());
        for (k, v) in self {
            k.put(w);
            v.put(w);
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let n = r.count(K::BYTES_MIN + V::BYTES_MIN)?;
        let mut m = BTreeMap::new();
        for _ in 0..n {
            let k = K::get(r)?;
            if m.last_key_value().is_some_and(|(last, _)| *last >= k) {
                return Err(DecodeError::Invalid("map key order"));
            }
            let v = V::get(r)?;
            m.insert(k, v);
        }
        Ok(m)
    }
}

impl<K: Wire + Ord> Wire for BTreeSet<K> {
    const BYTES_MIN: usize = 4;
    fn put(&self, w: &mut Writer<'_>) {
        w.count(self.len());
        for k in self {
            k.put(w);
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let n = r.count(K::BYTES_MIN)?;
        let mut s = BTreeSet::new();
        for _ in 0..n {
            let k = K::get(r)?;
            if s.last().is_some_and(|last| *last >= k) {
                return Err(DecodeError::Invalid("set order"));
            }
            s.insert(k);
        }
        Ok(s)
    }
}

/// Encodes one value into a fresh buffer.
pub fn to_vec<T: Wire>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    v.put(&mut Writer::new(&mut out));
    out
}

/// Decodes one value that must span the whole buffer.
pub fn from_slice<T: Wire>(buf: &[u8]) -> Result<T, DecodeError> {
    let mut r = Reader::new(buf);
    let v = T::get(&mut r)?;
    r.finish()?;
    Ok(v)
}

// ---- plugin checkpoints: a version byte, then the state ----

/// Writes a plugin checkpoint (the version byte, then the state) into any sink.
pub fn write_checkpoint<T: Wire>(version: u8, state: &T, sink: &mut dyn Sink) {
    let mut w = Writer::new(sink);
    w.bytes(&[version]);
    state.put(&mut w);
}

/// Reads a plugin checkpoint written by [`write_checkpoint`] with this version (another version
/// is refused, as is a byte left over).
pub fn read_checkpoint<T: Wire>(version: u8, buf: &[u8]) -> Result<T, DecodeError> {
    let mut r = Reader::new(buf);
    let found = r.array::<1>()?[0];
    if found != version {
        return Err(DecodeError::Version(found));
    }
    let state = T::get(&mut r)?;
    r.finish()?;
    Ok(state)
}

/// The state hash of a plugin: its checkpoint's bytes folded under `seed`, never materialised.
pub fn hash_checkpoint<T: Wire>(seed: u64, version: u8, state: &T) -> u64 {
    let mut sink = HashSink::new(seed);
    write_checkpoint(version, state, &mut sink);
    sink.finish()
}

/// Why a plugin checkpoint was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error("checkpoint does not decode: {0}")]
    Decode(#[from] DecodeError),
    #[error("checkpoint is inconsistent: {0}")]
    Inconsistent(&'static str),
}

/// `Err(what)` unless `ok`: one line per rule of a plugin's consistency check.
pub fn check(ok: bool, what: &'static str) -> Result<(), &'static str> {
    if ok {
        Ok(())
    } else {
        Err(what)
    }
}

/// A struct whose encoding is its fields in order.
#[macro_export]
macro_rules! wire_struct {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        pub struct $name { $($(#[$fm])* pub $field: $ty),* }

        impl $crate::wire::Wire for $name {
            const BYTES_MIN: usize = 0 $(+ <$ty as $crate::wire::Wire>::BYTES_MIN)*;
            fn put(&self, w: &mut $crate::wire::Writer<'_>) {
                $($crate::wire::Wire::put(&self.$field, w);)*
            }
            fn get(r: &mut $crate::wire::Reader<'_>) -> Result<Self, $crate::wire::DecodeError> {
                Ok($name { $($field: <$ty as $crate::wire::Wire>::get(r)?),* })
            }
        }
    };
}

/// A newtype id over an integer, encoded as the integer.
#[macro_export]
macro_rules! wire_id {
    ($(#[$m:meta])* $name:ident($t:ty)) => {
        $(#[$m])*
        #[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
        pub struct $name(pub $t);

        impl $crate::wire::Wire for $name {
            const BYTES_MIN: usize = std::mem::size_of::<$t>();
            fn put(&self, w: &mut $crate::wire::Writer<'_>) {
                $crate::wire::Wire::put(&self.0, w);
            }
            fn get(r: &mut $crate::wire::Reader<'_>) -> Result<Self, $crate::wire::DecodeError> {
                Ok($name(<$t as $crate::wire::Wire>::get(r)?))
            }
        }
    };
}

/// A field-less enum encoded as its `u8` code.
#[macro_export]
macro_rules! code_enum {
    ($(#[$m:meta])* pub enum $name:ident { $($(#[$vm:meta])* $var:ident = $code:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        #[repr(u8)]
        pub enum $name { $($(#[$vm])* $var = $code),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$var),+];
            pub fn code(self) -> u8 {
                self as u8
            }
            pub fn from_code(code: u8) -> Option<Self> {
                match code {
                    $($code => Some($name::$var),)+
                    _ => None,
                }
            }
        }

        impl $crate::wire::Wire for $name {
            const BYTES_MIN: usize = 1;
            fn put(&self, w: &mut $crate::wire::Writer<'_>) {
                w.bytes(&[self.code()]);
            }
            fn get(r: &mut $crate::wire::Reader<'_>) -> Result<Self, $crate::wire::DecodeError> {
                let c = r.array::<1>()?[0];
                Self::from_code(c).ok_or($crate::wire::DecodeError::Invalid(stringify!($name)))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_sink_matches_for_equal_streams_and_differs_otherwise() {
        let h = |parts: &[&[u8]]| {
            let mut s = HashSink::new(1);
            for p in parts {
                s.put(p);
            }
            s.finish()
        };
        // Chunking does not matter, content and length do.
        assert_eq!(h(&[b"abcdefghij"]), h(&[b"abc", b"defghij"]));
        assert_ne!(h(&[b"abcdefghij"]), h(&[b"abcdefghik"]));
        assert_ne!(h(&[b"abc"]), h(&[b"abc\0"]));
    }

    #[test]
    fn counts_are_bounded_by_remaining_bytes() {
        let mut buf = Vec::new();
        (u32::MAX).put(&mut Writer::new(&mut buf));
        assert_eq!(from_slice::<Vec<u64>>(&buf), Err(DecodeError::Truncated));
    }

    #[test]
    fn maps_must_be_in_order_and_round_trip() {
        let m: BTreeMap<u32, u64> = [(1, 10), (2, 20)].into_iter().collect();
        let bytes = to_vec(&m);
        assert_eq!(from_slice::<BTreeMap<u32, u64>>(&bytes), Ok(m));
        let mut bad = Vec::new();
        let mut w = Writer::new(&mut bad);
        w.count(2);
        for (k, v) in [(2u32, 1u64), (1, 1)] {
            k.put(&mut w);
            v.put(&mut w);
        }
        assert_eq!(from_slice::<BTreeMap<u32, u64>>(&bad), Err(DecodeError::Invalid("map key order")));
    }

    #[test]
    fn bad_tags_and_trailing_bytes_are_errors() {
        assert_eq!(from_slice::<bool>(&[2]), Err(DecodeError::Invalid("bool")));
        assert_eq!(from_slice::<Option<u8>>(&[7, 0]), Err(DecodeError::Invalid("option tag")));
        assert_eq!(from_slice::<u8>(&[1, 2]), Err(DecodeError::Trailing(1)));
        assert_eq!(from_slice::<u64>(&[1, 2]), Err(DecodeError::Truncated));
    }
}
