//! Storage as real bytes, so that storage faults are real too.
//!
//! **The journal** is the sequencer's durable record: one [`codec`] frame (`len | crc32 |
//! body`) per batch, written to two copies (the primary and its mirror: the journal file and
//! its replica, the outbox and the topic). A read checks a frame's length and checksum before it
//! parses it and takes the first copy that checks, repairing the other from it: a flipped bit is
//! *detected and refused*, never applied. A sequencer crash in the middle of an append leaves a
//! torn frame at the end of the primary and nothing in the mirror: [`JournalStore::recover`]
//! cuts it (those entries were never durable, never published, never answered), as the
//! embedded journal cuts a torn tail; an unreadable frame anywhere else stops the run.
//!
//! **Checkpoints** of a center (its ledger and plugin host) use the same `len | crc32 | body`
//! framing: body = `ledger_len u32 | ledger | host`. A torn or flipped checkpoint is refused at a
//! restart, and the center falls back to an older one or to replaying the journal from the start.
//!
//! [`Verify::LengthOnly`] reads without comparing checksums (the `Guard::Checksums` self-test):
//! parsing still refuses what does not parse, but a flipped bit that parses is applied.

use rtgs_core::codec::{self, FRAME_HEADER_BYTES};
use rtgs_core::entry::{Entry, Seq};
use rtgs_core::ledger::Ledger;
use rtgs_core::plugin_host::PluginHost;
use rtgs_core::prng::Prng;

/// How reads check what they read.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verify {
    Checksums,
    /// Length only: the checksum is not compared (a self-test without the guard).
    LengthOnly,
}

/// The body of the `len | crc32 | body` frame that is all of `buf`, if it is whole (and, when
/// verifying, its checksum matches).
fn frame_body(buf: &[u8], verify: Verify) -> Option<&[u8]> {
    let total = match verify {
        Verify::Checksums => codec::check(buf).ok()??,
        Verify::LengthOnly => {
            let len = u32::from_le_bytes(buf.get(..4)?.try_into().ok()?) as usize;
            FRAME_HEADER_BYTES.checked_add(len).filter(|t| *t <= buf.len())?
        }
    };
    (total == buf.len()).then(|| &buf[FRAME_HEADER_BYTES..])
}

/// Wraps `body` in a `len | crc32 | body` frame.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// The entries of one journal frame, checked as `verify` says.
pub fn decode_entries(buf: &[u8], verify: Verify) -> Option<Vec<Entry>> {
    let body = frame_body(buf, verify)?;
    // The codec always compares the checksum: a reader that does not is modelled by a frame
    // whose checksum is made to match whatever the body now holds.
    let resealed;
    let buf = match verify {
        Verify::Checksums => buf,
        Verify::LengthOnly => {
            resealed = frame(body);
            &resealed
        }
    };
    let mut out = Vec::new();
    match codec::decode_frame(buf, &mut out) {
        Ok(Some(n)) if n == buf.len() && !out.is_empty() => Some(out),
        _ => None,
    }
}

/// Flips one random bit of `bytes` (if any).
pub fn flip_bit(bytes: &mut [u8], prng: &mut Prng) {
    if bytes.is_empty() {
        return;
    }
    let bit = prng.below(bytes.len() as u64 * 8);
    bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
}

/// The durable journal: frames in two copies (see the module docs).
#[derive(Default)]
pub struct JournalStore {
    copies: [Vec<Vec<u8>>; 2],
    /// First and last seq of every durable frame, as appended (rebuilt from the bytes by
    /// [`JournalStore::recover`]).
    index: Vec<(Seq, Seq)>,
}

impl JournalStore {
    pub fn frames(&self) -> usize {
        self.index.len()
    }

    /// First and last seq of frame `k`.
    pub fn seqs(&self, k: usize) -> (Seq, Seq) {
        self.index[k]
    }

    /// The frame holding `seq`, if it is durable.
    pub fn frame_of(&self, seq: Seq) -> Option<usize> {
        let k = self.index.partition_point(|&(_, last)| last < seq);
        (k < self.index.len() && self.index[k].0 <= seq).then_some(k)
    }

    /// Appends one batch to both copies: durable.
    pub fn append(&mut self, entries: &[Entry]) {
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else { return };
        let mut bytes = Vec::new();
        codec::encode_frame(entries, &mut bytes);
        self.index.push((first.seq, last.seq));
        self.copies[1].push(bytes.clone());
        self.copies[0].push(bytes);
    }

    /// An append cut short by a crash: a prefix of the frame in the primary, nothing in the
    /// mirror, nothing durable.
    pub fn append_torn(&mut self, entries: &[Entry], prng: &mut Prng) {
        let mut bytes = Vec::new();
        codec::encode_frame(entries, &mut bytes);
        bytes.truncate(prng.below(bytes.len() as u64) as usize);
        self.copies[0].push(bytes);
    }

    /// Reads frame `k`: the first copy that reads back, a copy refused before it repaired from
    /// it. `refused` counts the copies refused on the way.
    pub fn read(
        &mut self,
        k: usize,
        verify: Verify,
        refused: &mut u64,
    ) -> Result<(Vec<u8>, Vec<Entry>), String> {
        let mut bad = Vec::new();
        for c in 0..self.copies.len() {
            let Some(bytes) = self.copies[c].get(k) else {
                bad.push(c);
                continue;
            };
            let Some(entries) = decode_entries(bytes, verify) else {
                *refused += 1;
                bad.push(c);
                continue;
            };
            let bytes = bytes.clone();
            for b in bad {
                let copy = &mut self.copies[b];
                if copy.len() == k {
                    copy.push(bytes.clone());
                } else if let Some(slot) = copy.get_mut(k) {
                    *slot = bytes.clone();
                }
            }
            return Ok((bytes, entries));
        }
        Err(format!("journal frame {k} is unreadable in both copies"))
    }

    /// Flips a bit of a random durable frame in one copy, if the other copy of that frame is
    /// good (a good copy always exists: the model's premise). True if it flipped one.
    pub fn flip_at_rest(&mut self, prng: &mut Prng) -> bool {
        if self.index.is_empty() {
            return false;
        }
        let k = prng.below(self.index.len() as u64) as usize;
        let c = prng.below(2) as usize;
        let other_good =
            self.copies[1 - c].get(k).is_some_and(|b| decode_entries(b, Verify::Checksums).is_some());
        match self.copies[c].get_mut(k) {
            Some(bytes) if other_good => {
                flip_bit(bytes, prng);
                true
            }
            _ => false,
        }
    }

    /// After a sequencer crash: reads every frame (repairing copies), cuts a torn tail, rebuilds
    /// the index; returns every durable entry in order.
    pub fn recover(&mut self, verify: Verify, refused: &mut u64) -> Result<Vec<Entry>, String> {
        let frames = self.copies[0].len().max(self.copies[1].len());
        let mut entries = Vec::new();
        self.index.clear();
        for k in 0..frames {
            match self.read(k, verify, refused) {
                Ok((_, es)) => {
                    let (first, last) = (es[0].seq, es[es.len() - 1].seq);
                    self.index.push((first, last));
                    entries.extend(es);
                }
                Err(_) if k + 1 == frames => {
                    // A torn tail: never durable, never published.
                    for copy in &mut self.copies {
                        copy.truncate(k);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(entries)
    }
}

/// A checkpoint of a center's ledger and plugin host, framed and checksummed.
pub fn encode_checkpoint(ledger: &Ledger, host: &PluginHost) -> Vec<u8> {
    let mut body = vec![0; 4];
    ledger.encode(&mut body);
    let ledger_len = (body.len() - 4) as u32;
    body[..4].copy_from_slice(&ledger_len.to_le_bytes());
    host.encode(&mut body);
    frame(&body)
}

/// Reads a checkpoint back into a ledger and `host` (a fresh host of the center's plugins).
pub fn decode_checkpoint(
    buf: &[u8],
    verify: Verify,
    mut host: PluginHost,
) -> Result<(Ledger, PluginHost), String> {
    let body = frame_body(buf, verify).ok_or("torn, or its checksum does not match")?;
    let ledger_len = body.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let ledger_bytes = ledger_len.and_then(|n| body.get(4..4 + n)).ok_or("ledger length out of range")?;
    let (ledger, used) = Ledger::decode(ledger_bytes).map_err(|e| e.to_string())?;
    if used != ledger_bytes.len() {
        return Err("the ledger does not fill its part".into());
    }
    let host_bytes = &body[4 + ledger_bytes.len()..];
    let used = host.restore(host_bytes).map_err(|e| e.to_string())?;
    if used != host_bytes.len() {
        return Err("the plugin state does not fill its part".into());
    }
    Ok((ledger, host))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgs_core::entry::CenterId;

    fn ticks(from: Seq, n: u64) -> Vec<Entry> {
        (from..from + n).map(|seq| Entry::tick(seq, 1, seq * 10, CenterId(1))).collect()
    }

    fn store_of(batches: u64) -> JournalStore {
        let mut s = JournalStore::default();
        for b in 0..batches {
            s.append(&ticks(1 + 3 * b, 3));
        }
        s
    }

    #[test]
    fn a_flipped_frame_is_refused_and_read_from_the_good_copy_which_repairs_it() {
        let mut s = store_of(4);
        let mut prng = Prng::new(1);
        flip_bit(&mut s.copies[0][2], &mut prng);
        let mut refused = 0;
        let (_, entries) = s.read(2, Verify::Checksums, &mut refused).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(refused, 1);
        assert_eq!(entries, ticks(7, 3));
        assert_eq!(s.copies[0][2], s.copies[1][2], "the primary was repaired");
        s.read(2, Verify::Checksums, &mut refused).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(refused, 1, "nothing to refuse any more");
    }

    #[test]
    fn without_checksums_a_flipped_bit_that_parses_is_read_as_good() {
        let mut s = store_of(1);
        // The low bit of the first entry's timestamp (header 8, version 1, count 4, seq 8, epoch 4).
        s.copies[0][0][FRAME_HEADER_BYTES + 1 + 4 + 8 + 4] ^= 1;
        let mut refused = 0;
        let (_, entries) = s.read(0, Verify::LengthOnly, &mut refused).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(refused, 0);
        assert_eq!(entries[0].timestamp_us, 11, "the flipped timestamp was taken");
        let (_, entries) = s.read(0, Verify::Checksums, &mut refused).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((refused, entries[0].timestamp_us), (1, 10));
    }

    #[test]
    fn recovery_cuts_a_torn_tail_and_keeps_the_rest() {
        let mut s = store_of(3);
        let mut prng = Prng::new(2);
        s.append_torn(&ticks(10, 5), &mut prng);
        assert_eq!(s.frames(), 3, "a torn append is not durable");
        let mut refused = 0;
        let entries = s.recover(Verify::Checksums, &mut refused).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(entries, ticks(1, 9));
        assert_eq!((s.frames(), s.copies[0].len(), s.copies[1].len()), (3, 3, 3));
        s.append(&ticks(10, 1));
        assert_eq!(s.frame_of(10), Some(3));
        assert_eq!(s.frame_of(11), None);
    }

    #[test]
    fn recovery_refuses_a_frame_bad_in_both_copies_before_the_tail() {
        let mut s = store_of(3);
        for c in 0..2 {
            s.copies[c][1][FRAME_HEADER_BYTES + 3] ^= 4;
        }
        let mut refused = 0;
        assert!(s.recover(Verify::Checksums, &mut refused).is_err());
    }

    #[test]
    fn a_checkpoint_reads_back_and_a_torn_or_flipped_one_is_refused() {
        let mut ledger = Ledger::new();
        for e in ticks(1, 3) {
            ledger.apply(&e);
        }
        let host = || PluginHost::empty(CenterId(1));
        let bytes = encode_checkpoint(&ledger, &host());
        let (back, _) =
            decode_checkpoint(&bytes, Verify::Checksums, host()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, ledger);
        let torn = &bytes[..bytes.len() - 1];
        assert!(decode_checkpoint(torn, Verify::Checksums, host()).is_err());
        let mut flipped = bytes.clone();
        // A bit of the state hash: only the checksum can tell.
        flipped[FRAME_HEADER_BYTES + 4 + 8] ^= 1;
        assert!(decode_checkpoint(&flipped, Verify::Checksums, host()).is_err());
        let (wrong, _) =
            decode_checkpoint(&flipped, Verify::LengthOnly, host()).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(wrong.state_hash(), ledger.state_hash(), "without the checksum it is applied");
    }
}
