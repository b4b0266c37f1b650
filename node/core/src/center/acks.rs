//! The center's book of the ack stream: which messages may still hold an ack of a seq that is
//! not final (the resume position), the acks dropped beyond the tally window and when to read
//! them again, and finality standing still (see the center's module docs).

use crate::entry::Seq;
use std::collections::VecDeque;

pub(super) struct AckBook {
    /// `(position, highest seq)` of the messages read that may still hold an unfinal seq's ack,
    /// in stream order.
    open: VecDeque<(u64, Seq)>,
    /// The position after the last message read.
    next: u64,
    /// The first message with acks dropped beyond the window, and the lowest such seq.
    dropped: Option<(u64, Seq)>,
    /// `(oldest unfinal seq, since when)`: how long finality has stood still.
    stall: (Seq, u64),
    /// Where reading had got to when finality standing still last read the stream again.
    stall_rewound_at: Option<u64>,
}

impl AckBook {
    pub fn new(next: u64, now_us: u64, seq_unfinal_first: Seq) -> Self {
        AckBook {
            open: VecDeque::new(),
            next,
            dropped: None,
            stall: (seq_unfinal_first, now_us),
            stall_rewound_at: None,
        }
    }

    /// A message read at `position` whose acks go up to `seq_max`. Positions normally go
    /// forward; one read again out of order (a broker that delivers a message twice, a seek
    /// racing a prefetch) still takes its place in order, so the resume position never skips it.
    pub fn read(&mut self, position: u64, seq_max: Seq) {
        match self.open.back() {
            Some(&(p, _)) if p >= position => {
                let at = self.open.partition_point(|&(p, _)| p < position);
                match self.open.get_mut(at) {
                    Some(slot) if slot.0 == position => slot.1 = slot.1.max(seq_max),
                    _ => self.open.insert(at, (position, seq_max)),
                }
            }
            _ => self.open.push_back((position, seq_max)),
        }
        self.next = self.next.max(position + 1);
    }

    /// Acks of the message at `position` from `seq` on were dropped beyond the window.
    pub fn dropped(&mut self, position: u64, seq: Seq) {
        let (p, s) = self.dropped.unwrap_or((position, seq));
        self.dropped = Some((p.min(position), s.min(seq)));
    }

    /// Finality is at `seq_unfinal_first`: messages wholly below it are closed.
    pub fn finality_at(&mut self, seq_unfinal_first: Seq, now_us: u64) {
        while self.open.front().is_some_and(|&(_, max)| max < seq_unfinal_first) {
            self.open.pop_front();
        }
        if self.stall.0 != seq_unfinal_first {
            self.stall = (seq_unfinal_first, now_us);
        }
    }

    /// Where a restart (or a rewind) reads the stream again from.
    pub fn resume_position(&self) -> u64 {
        self.open.front().map_or(self.next, |&(p, _)| p)
    }

    /// The position to read again from, once finality is within half a window of the lowest
    /// dropped ack.
    pub fn rewind_due(&self, seq_unfinal_first: Seq, window_seqs: usize) -> Option<u64> {
        let (position, seq) = self.dropped?;
        (seq_unfinal_first + (window_seqs / 2) as u64 > seq).then_some(position)
    }

    /// Forgets what was read from `position` on: the driver reads the stream again from there
    /// (acks read twice count once: the finalizer answers `Duplicate`).
    pub fn rewind(&mut self, position: u64) {
        while self.open.back().is_some_and(|&(p, _)| p >= position) {
            self.open.pop_back();
        }
        self.next = self.next.min(position);
        self.dropped = None;
    }

    /// Finality has stood at `seq_unfinal_first` for `after_us`: true once per such period.
    pub fn stalled(&mut self, seq_unfinal_first: Seq, now_us: u64, after_us: u64) -> bool {
        if self.stall.0 != seq_unfinal_first {
            self.stall = (seq_unfinal_first, now_us);
            return false;
        }
        if now_us < self.stall.1.saturating_add(after_us) {
            return false;
        }
        self.stall.1 = now_us;
        true
    }

    pub fn stalled_since(&self) -> u64 {
        self.stall.1
    }

    /// Finality stood still: where to read the stream again from — unless the last such
    /// re-read has not yet got back to where it began. Otherwise a stream that takes longer to
    /// read again than the stall timer is never read to its end, where the acks published again
    /// are: finality would stand still for good (found by the simulator).
    pub fn stall_rewind(&mut self) -> Option<u64> {
        if self.stall_rewound_at.is_some_and(|at| self.next < at) {
            return None;
        }
        self.stall_rewound_at = Some(self.next);
        Some(self.resume_position())
    }
}

#[cfg(test)]
mod tests {
    use super::AckBook;

    #[test]
    fn a_message_read_out_of_order_keeps_its_place() {
        let mut book = AckBook::new(0, 0, 1);
        book.read(3, 10);
        book.read(5, 12);
        book.read(1, 9); // read again, out of order
        book.read(5, 12); // twice
        assert_eq!(book.resume_position(), 1);
        assert_eq!(book.open.iter().map(|&(p, _)| p).collect::<Vec<_>>(), vec![1, 3, 5]);
        book.finality_at(10, 0);
        assert_eq!(book.resume_position(), 3, "messages wholly final close in order");
        assert_eq!(book.next, 6);
    }
}
