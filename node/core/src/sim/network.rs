//! Messages in flight between the simulated processes.
//!
//! The network delivers in random order (reordering for free); the world decides per delivery
//! whether to drop, delay or duplicate it. A message carries the time before which it cannot be
//! delivered (delays, back-pressure).

use crate::entry::{CenterId, Entry};
use crate::ledger::Applied;
use crate::prng::Prng;

#[derive(Clone, Debug)]
pub(super) enum Message {
    /// A journal entry for the center at index `to` (published, replayed or pulled).
    Journal { to: usize, entry: Entry },
    /// `from`'s applied-ack for the finalizer of the center at index `to`.
    Ack { from: CenterId, to: usize, ack: Applied },
}

struct InFlight {
    due_us: u64,
    duplicate: bool,
    message: Message,
}

/// What [`Network::take`] found.
pub(super) enum Take {
    Empty,
    /// Nothing is due yet; the earliest message is due at `due_us`.
    NotDue {
        due_us: u64,
    },
    Message {
        message: Message,
        /// A copy made by a duplication fault.
        duplicate: bool,
    },
}

#[derive(Default)]
pub(super) struct Network {
    in_flight: Vec<InFlight>,
}

impl Network {
    pub fn send(&mut self, due_us: u64, message: Message) {
        self.in_flight.push(InFlight { due_us, duplicate: false, message });
    }

    pub fn send_duplicate(&mut self, due_us: u64, message: Message) {
        self.in_flight.push(InFlight { due_us, duplicate: true, message });
    }

    pub fn len(&self) -> usize {
        self.in_flight.len()
    }

    /// Removes a random message that is due at `now_us`.
    pub fn take(&mut self, prng: &mut Prng, now_us: u64) -> Take {
        let n = self.in_flight.len();
        if n == 0 {
            return Take::Empty;
        }
        let start = prng.below(n as u64) as usize;
        let mut due_min = u64::MAX;
        for k in 0..n {
            let i = (start + k) % n;
            let due_us = self.in_flight[i].due_us;
            if due_us <= now_us {
                let f = self.in_flight.swap_remove(i);
                return Take::Message { message: f.message, duplicate: f.duplicate };
            }
            due_min = due_min.min(due_us);
        }
        Take::NotDue { due_us: due_min }
    }
}
