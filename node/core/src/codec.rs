//! Binary codec of journal frames: check first, then parse (mini-redis `Frame::check`).
//!
//! A frame is `len: u32 LE | crc32: u32 LE | body[len]`; the CRC (IEEE, hardware-accelerated by
//! `crc32fast`) covers the body. [`check`] looks only at length and checksum: an incomplete frame
//! is `Ok(None)`, not an error, so a reader can wait for more bytes (or treat it as a torn tail).
//! Only a checked body is parsed, and parsing validates every field, so corrupt or hostile input
//! is an error value and never a panic or an unbounded allocation.
//!
//! Body: `version: u8 = 1 | count: u32 | count × entry`; entry:
//! `seq u64 | epoch u32 | timestamp_us u64 | origin u8 | bmi_len u8 | bmi | tag u8 | payload`.
//! All integers little-endian. One frame is one sequencer batch (one fsync, one Kafka message).
//!
//! Commands (not yet sequenced: what a center puts on the inbound topic) use the same frame with
//! body `version: u8 = 2 | count: u32 | count × (origin u8 | bmi_len u8 | bmi | tag u8 | payload)`;
//! the two decoders refuse each other's frames.
//!
//! The embedded journal's files also hold **durable marks** between entry frames: body
//! `version: u8 = 3 | seq_last u64 | offset u64`, written after a group of frames is `fdatasync`ed:
//! "every byte of this file before `offset` (where this mark starts) is durable and holds the
//! seqs up to `seq_last`". [`decode_journal_frame`] reads both kinds; [`decode_frame`] refuses a
//! mark (it is no sequencer batch).

use crate::entry::*;
use crate::limits::{BMI_BYTES_MAX, CENTER_COUNT_MAX, FRAME_BYTES_MAX, PLUGIN_BODY_BYTES_MAX};

pub const FRAME_HEADER_BYTES: usize = 8;
const VERSION: u8 = 1;
const VERSION_COMMANDS: u8 = 2;
/// A journal file's durable mark.
pub const VERSION_MARK: u8 = 3;
/// Body bytes of a durable mark: version, seq_last, offset.
pub const MARK_BODY_BYTES: usize = 1 + 8 + 8;
/// A whole durable-mark frame.
pub const MARK_FRAME_BYTES: usize = FRAME_HEADER_BYTES + MARK_BODY_BYTES;
/// Smallest encoded command: origin, bmi length, tag (the bmi itself is checked after).
const COMMAND_BYTES_MIN: usize = 1 + 1 + 1;
/// Smallest encoded entry (a `Tick`): used to bound `count` before allocating.
const ENTRY_BYTES_MIN: usize = 8 + 4 + 8 + 1 + 1 + 1;

const TAG_TRANSFER: u8 = 1;
const TAG_OPEN: u8 = 2;
const TAG_FUND: u8 = 3;
const TAG_CLOSE: u8 = 4;
const TAG_TICK: u8 = 5;
const TAG_PLUGIN: u8 = 6;

#[derive(Copy, Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum CodecError {
    #[error("frame length {0} exceeds the limit")]
    TooLarge(usize),
    #[error("frame checksum mismatch")]
    Checksum,
    #[error("unknown frame version {0}")]
    Version(u8),
    #[error("frame body ends inside a field")]
    Truncated,
    #[error("frame body has {0} bytes after its last entry")]
    Trailing(usize),
    #[error("entry count {0} cannot fit the frame")]
    Count(u32),
    #[error("seq 0 is not a valid seq")]
    Seq,
    #[error("origin center {0} out of range")]
    Origin(u8),
    #[error("invalid bmi")]
    Bmi,
    #[error("invalid currency")]
    Currency,
    #[error("unknown payload tag {0}")]
    PayloadTag(u8),
    #[error("unknown plugin {0}")]
    Plugin(u8),
    #[error("plugin body of {0} bytes exceeds the limit")]
    PluginBody(usize),
}

/// Length and checksum only: `Ok(Some(total_len))` for a whole valid frame at the start of `buf`,
/// `Ok(None)` when `buf` holds only part of one.
pub fn check(buf: &[u8]) -> Result<Option<usize>, CodecError> {
    if buf.len() < FRAME_HEADER_BYTES {
        return Ok(None);
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if len > FRAME_BYTES_MAX - FRAME_HEADER_BYTES {
        return Err(CodecError::TooLarge(len));
    }
    let total = FRAME_HEADER_BYTES + len;
    if buf.len() < total {
        return Ok(None);
    }
    let crc = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if crc32fast::hash(&buf[FRAME_HEADER_BYTES..total]) != crc {
        return Err(CodecError::Checksum);
    }
    Ok(Some(total))
}

/// Appends one frame holding `entries` to `out`.
pub fn encode_frame<'a>(entries: impl IntoIterator<Item = &'a Entry>, out: &mut Vec<u8>) {
    encode_items(VERSION, entries, out, encode_entry);
}

/// The framing both kinds of frame share: header, version, count, then the items, with length
/// and CRC filled in at the end.
fn encode_items<T>(
    version: u8,
    items: impl IntoIterator<Item = T>,
    out: &mut Vec<u8>,
    mut item: impl FnMut(T, &mut Vec<u8>),
) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_BYTES]);
    out.push(version);
    let count_at = out.len();
    out.extend_from_slice(&[0; 4]);
    let mut count: u32 = 0;
    for i in items {
        item(i, out);
        count += 1;
    }
    out[count_at..count_at + 4].copy_from_slice(&count.to_le_bytes());
    let body_len = out.len() - start - FRAME_HEADER_BYTES;
    assert!(body_len + FRAME_HEADER_BYTES <= FRAME_BYTES_MAX, "frame over FRAME_BYTES_MAX");
    let crc = crc32fast::hash(&out[start + FRAME_HEADER_BYTES..]);
    out[start..start + 4].copy_from_slice(&(body_len as u32).to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

fn encode_entry(e: &Entry, out: &mut Vec<u8>) {
    out.extend_from_slice(&e.seq.to_le_bytes());
    out.extend_from_slice(&e.epoch.to_le_bytes());
    out.extend_from_slice(&e.timestamp_us.to_le_bytes());
    out.push(e.origin.0);
    let bmi = e.bmi.as_bytes();
    out.push(bmi.len() as u8);
    out.extend_from_slice(bmi);
    encode_payload(&e.payload, out);
}

/// Appends the payload's encoding (tag + fields).
pub fn encode_payload(p: &Payload, out: &mut Vec<u8>) {
    match p {
        Payload::Transfer(t) => {
            out.push(TAG_TRANSFER);
            out.extend_from_slice(&t.debtor.0.to_le_bytes());
            out.extend_from_slice(&t.creditor.0.to_le_bytes());
            out.extend_from_slice(&t.amount_minor.to_le_bytes());
            out.extend_from_slice(&t.currency.as_bytes());
        }
        Payload::AccountOpen { account, currency } => {
            out.push(TAG_OPEN);
            out.extend_from_slice(&account.0.to_le_bytes());
            out.extend_from_slice(&currency.as_bytes());
        }
        Payload::AccountFund { account, amount_minor } => {
            out.push(TAG_FUND);
            out.extend_from_slice(&account.0.to_le_bytes());
            out.extend_from_slice(&amount_minor.to_le_bytes());
        }
        Payload::AccountClose { account } => {
            out.push(TAG_CLOSE);
            out.extend_from_slice(&account.0.to_le_bytes());
        }
        Payload::Tick => out.push(TAG_TICK),
        Payload::Plugin(c) => {
            out.push(TAG_PLUGIN);
            out.push(c.plugin as u8);
            out.extend_from_slice(&c.op.to_le_bytes());
            out.extend_from_slice(&(c.body.len() as u32).to_le_bytes());
            out.extend_from_slice(&c.body);
        }
    }
}

/// A journal file's durable mark: every byte of the file before `offset` (where the mark itself
/// starts) was durable before the mark was written, and those bytes hold seqs up to `seq_last`.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct DurableMark {
    pub seq_last: Seq,
    pub offset: u64,
}

/// Appends a durable-mark frame to `out`.
pub fn encode_mark(mark: DurableMark, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&(MARK_BODY_BYTES as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.push(VERSION_MARK);
    out.extend_from_slice(&mark.seq_last.to_le_bytes());
    out.extend_from_slice(&mark.offset.to_le_bytes());
    let crc = crc32fast::hash(&out[start + FRAME_HEADER_BYTES..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Checks and parses the journal-file frame at the start of `buf`: a frame of entries (appended
/// to `out`, as [`decode_frame`] does) or a durable mark (returned). `Ok(None)`: only part of a
/// frame.
pub fn decode_journal_frame(
    buf: &[u8],
    out: &mut Vec<Entry>,
) -> Result<Option<(usize, Option<DurableMark>)>, CodecError> {
    let Some(total) = check(buf)? else { return Ok(None) };
    if buf.get(FRAME_HEADER_BYTES) != Some(&VERSION_MARK) {
        return Ok(decode_frame(buf, out)?.map(|n| (n, None)));
    }
    let mut r = Reader { buf: &buf[FRAME_HEADER_BYTES + 1..total] };
    let mark = DurableMark { seq_last: r.u64()?, offset: r.u64()? };
    if !r.buf.is_empty() {
        return Err(CodecError::Trailing(r.buf.len()));
    }
    Ok(Some((total, Some(mark))))
}

/// Appends one frame holding `commands` to `out`.
pub fn encode_commands_frame<'a>(commands: impl IntoIterator<Item = &'a Command>, out: &mut Vec<u8>) {
    encode_items(VERSION_COMMANDS, commands, out, |c, out| {
        out.push(c.origin.0);
        let bmi = c.bmi.as_bytes();
        out.push(bmi.len() as u8);
        out.extend_from_slice(bmi);
        encode_payload(&c.payload, out);
    });
}

/// Checks and parses the commands frame at the start of `buf` into `out` (like [`decode_frame`]).
pub fn decode_commands_frame(buf: &[u8], out: &mut Vec<Command>) -> Result<Option<usize>, CodecError> {
    decode_items(buf, out, VERSION_COMMANDS, COMMAND_BYTES_MIN, parse_command)
}

fn parse_command(r: &mut Reader<'_>) -> Result<Command, CodecError> {
    let origin = parse_origin(r)?;
    let bmi_len = usize::from(r.u8()?);
    if bmi_len > BMI_BYTES_MAX {
        return Err(CodecError::Bmi);
    }
    // Commands always carry a bmi: only the sequencer makes entries without one.
    let bmi = Bmi::new(r.take(bmi_len)?).map_err(|_| CodecError::Bmi)?;
    Ok(Command { origin, bmi, payload: parse_payload(r)? })
}

fn parse_origin(r: &mut Reader<'_>) -> Result<CenterId, CodecError> {
    let origin = r.u8()?;
    if origin == 0 || usize::from(origin) > CENTER_COUNT_MAX {
        return Err(CodecError::Origin(origin));
    }
    Ok(CenterId(origin))
}

/// Checks and parses the frame at the start of `buf`, appending its entries to `out`.
/// Returns the frame's length, or `None` if `buf` holds only part of a frame.
/// On error `out` is left as it was.
pub fn decode_frame(buf: &[u8], out: &mut Vec<Entry>) -> Result<Option<usize>, CodecError> {
    decode_items(buf, out, VERSION, ENTRY_BYTES_MIN, parse_entry)
}

/// Checks the frame at the start of `buf` (length, checksum) and parses its entries only as far
/// as the one at `seq`: one entry of a large frame without building all of them.
pub fn decode_frame_entry(buf: &[u8], seq: Seq) -> Result<Option<Entry>, CodecError> {
    let Some(total) = check(buf)? else { return Err(CodecError::Truncated) };
    let mut r = Reader { buf: &buf[FRAME_HEADER_BYTES..total] };
    let found = r.u8()?;
    if found != VERSION {
        return Err(CodecError::Version(found));
    }
    let count = r.u32()?;
    for _ in 0..count {
        let e = parse_entry(&mut r)?;
        if e.seq == seq {
            return Ok(Some(e));
        }
    }
    Ok(None)
}

/// Parses a buffer that holds whole entry frames only (a Kafka message, an outbox row) into
/// `out`. A partial last frame is [`CodecError::Truncated`]; on error `out` is left as it was.
pub fn decode_frames(buf: &[u8], out: &mut Vec<Entry>) -> Result<(), CodecError> {
    decode_all(buf, out, decode_frame)
}

/// [`decode_frames`] for commands frames (an inbound message).
pub fn decode_commands_frames(buf: &[u8], out: &mut Vec<Command>) -> Result<(), CodecError> {
    decode_all(buf, out, decode_commands_frame)
}

/// One frame's parser: [`decode_frame`] or [`decode_commands_frame`].
type FrameParser<T> = fn(&[u8], &mut Vec<T>) -> Result<Option<usize>, CodecError>;

fn decode_all<T>(buf: &[u8], out: &mut Vec<T>, frame: FrameParser<T>) -> Result<(), CodecError> {
    let before = out.len();
    let mut at = 0;
    while at < buf.len() {
        match frame(&buf[at..], out) {
            Ok(Some(n)) => at += n,
            Ok(None) => {
                out.truncate(before);
                return Err(CodecError::Truncated);
            }
            Err(e) => {
                out.truncate(before);
                return Err(e);
            }
        }
    }
    Ok(())
}

/// The parsing both kinds of frame share: check, version, a count bounded by the body's size
/// (no allocation a hostile count could blow up), the items, nothing trailing; on error `out` is
/// left as it was.
fn decode_items<T>(
    buf: &[u8],
    out: &mut Vec<T>,
    version: u8,
    item_bytes_min: usize,
    mut item: impl FnMut(&mut Reader<'_>) -> Result<T, CodecError>,
) -> Result<Option<usize>, CodecError> {
    let Some(total) = check(buf)? else { return Ok(None) };
    let before = out.len();
    let mut parse = |out: &mut Vec<T>| -> Result<(), CodecError> {
        let mut r = Reader { buf: &buf[FRAME_HEADER_BYTES..total] };
        let found = r.u8()?;
        if found != version {
            return Err(CodecError::Version(found));
        }
        let count = r.u32()?;
        if (count as usize).saturating_mul(item_bytes_min) > r.buf.len() {
            return Err(CodecError::Count(count));
        }
        out.reserve(count as usize);
        for _ in 0..count {
            out.push(item(&mut r)?);
        }
        if !r.buf.is_empty() {
            return Err(CodecError::Trailing(r.buf.len()));
        }
        Ok(())
    };
    let result = parse(out);
    if result.is_err() {
        out.truncate(before);
    }
    result.map(|()| Some(total))
}

fn parse_entry(r: &mut Reader<'_>) -> Result<Entry, CodecError> {
    let seq = r.u64()?;
    if seq == 0 {
        return Err(CodecError::Seq);
    }
    let epoch = r.u32()?;
    let timestamp_us = r.u64()?;
    let origin = parse_origin(r)?;
    let bmi_len = usize::from(r.u8()?);
    if bmi_len > BMI_BYTES_MAX {
        return Err(CodecError::Bmi);
    }
    let bmi_bytes = r.take(bmi_len)?;
    let payload = parse_payload(r)?;
    let bmi = match (&payload, bmi_len) {
        (Payload::Tick, 0) => Bmi::NONE,
        (_, 0) => return Err(CodecError::Bmi),
        _ => Bmi::new(bmi_bytes).map_err(|_| CodecError::Bmi)?,
    };
    Ok(Entry { seq, epoch, timestamp_us, origin, bmi, payload })
}

fn parse_payload(r: &mut Reader<'_>) -> Result<Payload, CodecError> {
    let tag = r.u8()?;
    Ok(match tag {
        TAG_TRANSFER => Payload::Transfer(Transfer {
            debtor: AccountId(r.u64()?),
            creditor: AccountId(r.u64()?),
            amount_minor: r.u64()?,
            currency: r.currency()?,
        }),
        TAG_OPEN => Payload::AccountOpen { account: AccountId(r.u64()?), currency: r.currency()? },
        TAG_FUND => Payload::AccountFund { account: AccountId(r.u64()?), amount_minor: r.u64()? },
        TAG_CLOSE => Payload::AccountClose { account: AccountId(r.u64()?) },
        TAG_TICK => Payload::Tick,
        TAG_PLUGIN => {
            let kind = r.u8()?;
            let plugin = PluginKind::from_u8(kind).ok_or(CodecError::Plugin(kind))?;
            let op = r.u16()?;
            let len = r.u32()? as usize;
            if len > PLUGIN_BODY_BYTES_MAX {
                return Err(CodecError::PluginBody(len));
            }
            Payload::Plugin(PluginCommand { plugin, op, body: r.take(len)?.to_vec() })
        }
        other => return Err(CodecError::PayloadTag(other)),
    })
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if self.buf.len() < n {
            return Err(CodecError::Truncated);
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, CodecError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, CodecError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, CodecError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn currency(&mut self) -> Result<Currency, CodecError> {
        Currency::new(&self.array::<3>()?).map_err(|_| CodecError::Currency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn durable_marks_round_trip_and_are_no_batch() {
        let mut buf = Vec::new();
        let mark = DurableMark { seq_last: 77, offset: 4_096 };
        encode_mark(mark, &mut buf);
        assert_eq!(buf.len(), MARK_FRAME_BYTES);
        let mut out = Vec::new();
        assert_eq!(decode_journal_frame(&buf, &mut out), Ok(Some((MARK_FRAME_BYTES, Some(mark)))));
        assert!(out.is_empty());
        assert_eq!(decode_frame(&buf, &mut out), Err(CodecError::Version(VERSION_MARK)));
        let tick = Entry::tick(5, 1, 9, CenterId(1));
        let mut frame = Vec::new();
        encode_frame([&tick], &mut frame);
        assert_eq!(decode_journal_frame(&frame, &mut out), Ok(Some((frame.len(), None))));
        assert_eq!(out, vec![tick]);
        let ticks: Vec<Entry> = (5..9).map(|s| Entry::tick(s, 1, 9, CenterId(1))).collect();
        let mut four = Vec::new();
        encode_frame(&ticks, &mut four);
        assert_eq!(decode_frame_entry(&four, 7), Ok(Some(ticks[2].clone())));
        assert_eq!(decode_frame_entry(&four, 9), Ok(None));
        let mut bad = buf.clone();
        bad[10] ^= 1;
        assert_eq!(decode_journal_frame(&bad, &mut out), Err(CodecError::Checksum));
        assert_eq!(decode_journal_frame(&buf[..MARK_FRAME_BYTES - 1], &mut out), Ok(None));
    }

    fn arb_payload() -> impl Strategy<Value = Payload> {
        let cur = prop_oneof![Just(*b"EUR"), Just(*b"KRW"), Just(*b"USD")]
            .prop_map(|c| Currency::new(&c).unwrap_or_else(|_| unreachable!()));
        prop_oneof![
            (any::<u64>(), any::<u64>(), any::<u64>(), cur.clone()).prop_map(|(d, c, a, cur)| {
                Payload::Transfer(Transfer {
                    debtor: AccountId(d),
                    creditor: AccountId(c),
                    amount_minor: a,
                    currency: cur,
                })
            }),
            (any::<u64>(), cur)
                .prop_map(|(a, currency)| Payload::AccountOpen { account: AccountId(a), currency }),
            (any::<u64>(), any::<u64>())
                .prop_map(|(a, m)| Payload::AccountFund { account: AccountId(a), amount_minor: m }),
            any::<u64>().prop_map(|a| Payload::AccountClose { account: AccountId(a) }),
            Just(Payload::Tick),
            (any::<u16>(), proptest::collection::vec(any::<u8>(), 0..64)).prop_map(|(op, body)| {
                Payload::Plugin(PluginCommand { plugin: PluginKind::Matching, op, body })
            }),
        ]
    }

    fn arb_entry() -> impl Strategy<Value = Entry> {
        (1..u64::MAX, any::<u32>(), any::<u64>(), 1u8..=8, "[A-Za-z0-9-]{1,35}", arb_payload()).prop_map(
            |(seq, epoch, ts, origin, bmi, payload)| {
                let bmi = if payload == Payload::Tick {
                    Bmi::NONE
                } else {
                    Bmi::new(bmi.as_bytes()).unwrap_or_else(|_| unreachable!())
                };
                Entry { seq, epoch, timestamp_us: ts, origin: CenterId(origin), bmi, payload }
            },
        )
    }

    proptest! {
        #[test]
        fn round_trip(entries in proptest::collection::vec(arb_entry(), 0..20)) {
            let mut buf = Vec::new();
            encode_frame(&entries, &mut buf);
            let mut out = Vec::new();
            prop_assert_eq!(decode_frame(&buf, &mut out), Ok(Some(buf.len())));
            prop_assert_eq!(out, entries);
        }

        #[test]
        fn every_prefix_is_incomplete_not_an_error(entries in proptest::collection::vec(arb_entry(), 1..5)) {
            let mut buf = Vec::new();
            encode_frame(&entries, &mut buf);
            for cut in 0..buf.len() {
                prop_assert_eq!(check(&buf[..cut]), Ok(None));
            }
        }

        #[test]
        fn any_flipped_bit_is_caught(entries in proptest::collection::vec(arb_entry(), 1..5), bit in any::<usize>()) {
            let mut buf = Vec::new();
            encode_frame(&entries, &mut buf);
            let bit = bit % (buf.len() * 8);
            buf[bit / 8] ^= 1 << (bit % 8);
            let mut out = Vec::new();
            // A flipped length bit may make the frame look incomplete; anything else must fail.
            match decode_frame(&buf, &mut out) {
                Ok(None) => prop_assert!(bit < 32),
                Ok(Some(_)) => prop_assert!(false, "corruption accepted"),
                Err(_) => {}
            }
            prop_assert!(out.is_empty());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut out = Vec::new();
            let _ = decode_frame(&bytes, &mut out);
        }

        #[test]
        fn checksummed_garbage_body_is_an_error_value(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut buf = Vec::new();
            buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
            buf.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
            buf.extend_from_slice(&body);
            let mut out = Vec::new();
            let _ = decode_frame(&buf, &mut out);
        }
    }

    proptest! {
        #[test]
        fn commands_round_trip_and_are_not_entries(entries in proptest::collection::vec(arb_entry(), 0..20)) {
            let commands: Vec<Command> = entries
                .into_iter()
                .filter(|e| !e.bmi.is_none())
                .map(|e| Command { origin: e.origin, bmi: e.bmi, payload: e.payload })
                .collect();
            let mut buf = Vec::new();
            encode_commands_frame(&commands, &mut buf);
            let mut out = Vec::new();
            prop_assert_eq!(decode_commands_frame(&buf, &mut out), Ok(Some(buf.len())));
            prop_assert_eq!(out, commands);
            prop_assert_eq!(decode_frame(&buf, &mut Vec::new()), Err(CodecError::Version(VERSION_COMMANDS)));
        }

        #[test]
        fn arbitrary_command_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut buf = Vec::new();
            buf.extend_from_slice(&(body.len() as u32 + 1).to_le_bytes());
            let mut full = vec![VERSION_COMMANDS];
            full.extend_from_slice(&body);
            buf.extend_from_slice(&crc32fast::hash(&full).to_le_bytes());
            buf.extend_from_slice(&full);
            let mut out = Vec::new();
            if decode_commands_frame(&buf, &mut out).is_err() {
                prop_assert!(out.is_empty());
            }
        }
    }

    #[test]
    fn several_frames_decode_whole_and_a_partial_one_is_refused() {
        let entries: Vec<Entry> = (1..=6).map(|seq| Entry::tick(seq, 1, seq, CenterId(1))).collect();
        let mut buf = Vec::new();
        encode_frame(&entries[..2], &mut buf);
        encode_frame(&entries[2..], &mut buf);
        let mut out = vec![Entry::tick(99, 1, 0, CenterId(1))];
        assert_eq!(decode_frames(&buf, &mut out), Ok(()));
        assert_eq!(&out[1..], &entries[..]);
        let mut out = Vec::new();
        assert_eq!(decode_frames(&buf[..buf.len() - 1], &mut out), Err(CodecError::Truncated));
        assert!(out.is_empty(), "nothing of a refused buffer is kept");
        assert_eq!(decode_frames(&[], &mut out), Ok(()));
    }

    #[test]
    fn oversized_length_is_rejected_before_reading() {
        let buf = [0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0];
        assert_eq!(check(&buf), Err(CodecError::TooLarge(0x7fff_ffff)));
    }

    #[test]
    fn huge_count_is_rejected_without_allocating() {
        let body = [VERSION, 0xff, 0xff, 0xff, 0xff];
        let mut buf = Vec::new();
        buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
        buf.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        buf.extend_from_slice(&body);
        assert_eq!(decode_frame(&buf, &mut Vec::new()), Err(CodecError::Count(u32::MAX)));
    }

    #[test]
    fn transfer_without_bmi_is_rejected() {
        let e = Entry {
            seq: 1,
            epoch: 1,
            timestamp_us: 1,
            origin: CenterId(1),
            bmi: Bmi::NONE,
            payload: Payload::AccountClose { account: AccountId(1) },
        };
        let mut buf = Vec::new();
        encode_frame([&e], &mut buf);
        assert_eq!(decode_frame(&buf, &mut Vec::new()), Err(CodecError::Bmi));
    }
}
