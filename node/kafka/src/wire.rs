//! The two small message formats of the production engine besides the journal's own frames
//! (those are `rtgs_core::codec`):
//!
//! * **Applied-acks** (`rtgs.applied`): one message per committed batch of one center —
//!   `center u8 | seq_first u64 | count u32 | count × (outcome u16, state_hash u64)` — the seqs of
//!   a committed batch are contiguous, so they are not repeated (10 bytes per ack).
//! * **Notices** (`rtgs.notify`): what the origin center tells participants —
//!   `count u32 | count × (seq u64, status u8, reason u16, bmi_len u8, bmi)`.
//!
//! Both are little-endian and end with a CRC-32 of everything before it; decoding checks the CRC
//! and every length before reading, and returns `None` for anything malformed (a value, never a
//! panic).

use rtgs_core::entry::{Bmi, CenterId, Outcome, Seq};
use rtgs_core::ledger::Applied;

/// Upper bound on acks or notices in one message (a committed batch is at most a few thousand).
pub const ITEMS_PER_MESSAGE_MAX: usize = 1 << 20;

fn seal(mut out: Vec<u8>) -> Vec<u8> {
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The body of `buf` without its CRC, if the CRC matches.
fn unseal(buf: &[u8]) -> Option<&[u8]> {
    let (body, crc) = buf.split_at_checked(buf.len().checked_sub(4)?)?;
    (crc32fast::hash(body).to_le_bytes() == crc).then_some(body)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

/// Encodes one center's acks for the contiguous seqs `acks[0].seq ..`. `None` if they are not
/// contiguous (a caller bug the caller reports).
pub fn encode_acks(center: CenterId, acks: &[Applied]) -> Option<Vec<u8>> {
    let first = acks.first()?.seq;
    if acks.iter().enumerate().any(|(i, a)| a.seq != first + i as u64) || acks.len() > ITEMS_PER_MESSAGE_MAX {
        return None;
    }
    let mut out = Vec::with_capacity(17 + acks.len() * 10);
    out.push(center.0);
    out.extend_from_slice(&first.to_le_bytes());
    out.extend_from_slice(&(acks.len() as u32).to_le_bytes());
    for a in acks {
        out.extend_from_slice(&a.outcome.code().to_le_bytes());
        out.extend_from_slice(&a.state_hash.to_le_bytes());
    }
    Some(seal(out))
}

/// Decodes [`encode_acks`] into `out`; returns the center.
pub fn decode_acks(buf: &[u8], out: &mut Vec<Applied>) -> Option<CenterId> {
    let mut r = Reader(unseal(buf)?);
    let center = CenterId(r.u8()?);
    let first = r.u64()?;
    let count = r.u32()? as usize;
    if count > ITEMS_PER_MESSAGE_MAX || r.0.len() != count * 10 || first == 0 {
        return None;
    }
    let start = out.len();
    for i in 0..count as u64 {
        let outcome = Outcome::from_code(r.u16()?);
        let state_hash = r.u64()?;
        match outcome {
            Some(outcome) => out.push(Applied { seq: first + i, outcome, state_hash }),
            None => {
                out.truncate(start);
                return None;
            }
        }
    }
    Some(center)
}

/// What a participant is told about one payment.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NoticeStatus {
    /// Final and settled (ACCC).
    Settled,
    /// Final and rejected (RJCT) with this outcome's reason.
    Rejected(Outcome),
    /// Refused by the sequencer before journaling: the `bmi` was used for different content
    /// (RJCT DUPL); `seq` is the original's.
    Refused,
    /// Not journaled again: the `bmi` was sequenced before with the same content (a retry of
    /// any age); `seq` is the original's, whose outcome is its final notice's (or the stored
    /// entry's). Not a final status by itself.
    Duplicate,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub seq: Seq,
    pub status: NoticeStatus,
    pub bmi: Bmi,
}

impl Notice {
    /// The ISO 20022 `TxSts`.
    pub fn iso_status(&self) -> &'static str {
        match self.status {
            NoticeStatus::Settled => "ACCC",
            NoticeStatus::Rejected(_) | NoticeStatus::Refused => "RJCT",
            NoticeStatus::Duplicate => "ACSP",
        }
    }
}

pub fn encode_notices(notices: &[Notice]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + notices.len() * 48);
    out.extend_from_slice(&(notices.len() as u32).to_le_bytes());
    for n in notices {
        out.extend_from_slice(&n.seq.to_le_bytes());
        let (status, reason) = match n.status {
            NoticeStatus::Settled => (0u8, 0u16),
            NoticeStatus::Rejected(o) => (1, o.code()),
            NoticeStatus::Refused => (2, 0),
            NoticeStatus::Duplicate => (3, 0),
        };
        out.push(status);
        out.extend_from_slice(&reason.to_le_bytes());
        let bmi = n.bmi.as_bytes();
        out.push(bmi.len() as u8);
        out.extend_from_slice(bmi);
    }
    seal(out)
}

pub fn decode_notices(buf: &[u8], out: &mut Vec<Notice>) -> Option<()> {
    let mut r = Reader(unseal(buf)?);
    let count = r.u32()? as usize;
    if count > ITEMS_PER_MESSAGE_MAX {
        return None;
    }
    let start = out.len();
    let one = |r: &mut Reader<'_>| -> Option<Notice> {
        let seq = r.u64()?;
        let (status, reason) = (r.u8()?, r.u16()?);
        let len = usize::from(r.u8()?);
        let bmi = Bmi::new(r.take(len)?).ok()?;
        let status = match status {
            0 => NoticeStatus::Settled,
            1 => match Outcome::from_code(reason)? {
                o @ Outcome::Rejected(_) => NoticeStatus::Rejected(o),
                Outcome::Accepted => return None,
            },
            2 => NoticeStatus::Refused,
            3 => NoticeStatus::Duplicate,
            _ => return None,
        };
        Some(Notice { seq, status, bmi })
    };
    for _ in 0..count {
        match one(&mut r) {
            Some(n) => out.push(n),
            None => {
                out.truncate(start);
                return None;
            }
        }
    }
    if !r.0.is_empty() {
        out.truncate(start);
        return None;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgs_core::entry::RejectReason;

    fn acks(first: Seq, n: u64) -> Vec<Applied> {
        (0..n)
            .map(|i| Applied {
                seq: first + i,
                outcome: if i % 3 == 0 {
                    Outcome::Rejected(RejectReason::InsufficientFunds)
                } else {
                    Outcome::Accepted
                },
                state_hash: (first + i).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            })
            .collect()
    }

    #[test]
    fn acks_round_trip_and_reject_damage() {
        let a = acks(41, 100);
        let buf = encode_acks(CenterId(2), &a).unwrap_or_else(|| unreachable!());
        let mut out = Vec::new();
        assert_eq!(decode_acks(&buf, &mut out), Some(CenterId(2)));
        assert_eq!(out, a);
        for at in [0, 5, 17, buf.len() - 1] {
            let mut bad = buf.clone();
            bad[at] ^= 0x40;
            let mut out = Vec::new();
            assert_eq!(decode_acks(&bad, &mut out), None, "flip at {at} not detected");
            assert!(out.is_empty());
        }
        assert_eq!(decode_acks(&buf[..buf.len() - 3], &mut Vec::new()), None);
        assert_eq!(decode_acks(&[], &mut Vec::new()), None);
    }

    #[test]
    fn non_contiguous_acks_are_refused() {
        let mut a = acks(1, 3);
        a[2].seq = 9;
        assert_eq!(encode_acks(CenterId(1), &a), None);
        assert_eq!(encode_acks(CenterId(1), &[]), None);
    }

    #[test]
    fn notices_round_trip_and_reject_damage() {
        let bmi = |s: &str| Bmi::new(s.as_bytes()).unwrap_or_else(|_| unreachable!());
        let n = vec![
            Notice { seq: 7, status: NoticeStatus::Settled, bmi: bmi("A1") },
            Notice {
                seq: 8,
                status: NoticeStatus::Rejected(Outcome::Rejected(RejectReason::UnknownAccount)),
                bmi: bmi("B-2"),
            },
            Notice { seq: 3, status: NoticeStatus::Refused, bmi: bmi("C") },
            Notice { seq: 2, status: NoticeStatus::Duplicate, bmi: bmi("D") },
        ];
        let buf = encode_notices(&n);
        let mut out = Vec::new();
        assert_eq!(decode_notices(&buf, &mut out), Some(()));
        assert_eq!(out, n);
        assert_eq!(out[1].iso_status(), "RJCT");
        let mut bad = buf.clone();
        bad[4] ^= 1;
        assert_eq!(decode_notices(&bad, &mut Vec::new()), None);
    }
}
