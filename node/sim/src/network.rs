//! Journal messages in flight to the centers: published frames, catch-up reads and pulls.
//!
//! The network delivers in random order (reordering for free); the world decides per delivery
//! whether to drop, delay, duplicate or corrupt it. A message carries the time before which it
//! cannot be delivered, and the frame's index in the journal — the message's offset, which is
//! not in its bytes, so a corrupt frame can be read again from the durable journal.

use rtgs_core::prng::Prng;

#[derive(Clone, Debug)]
pub struct Message {
    /// The center at this index.
    pub to: usize,
    /// The frame's index in the durable journal.
    pub frame: usize,
    pub bytes: Vec<u8>,
}

struct InFlight {
    due_us: u64,
    duplicate: bool,
    message: Message,
}

/// What [`Network::take`] found.
pub enum Take {
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
pub struct Network {
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
