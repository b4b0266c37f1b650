//! The node's two clocks. The core never reads one: the engine hands it times.
//!
//! * [`Clock`] — the center's time: monotonic microseconds since the node started. The
//!   `Center`'s timers (gap, stall, owner silence) only compare it with itself, so a wall clock
//!   that jumps cannot fire or hold them.
//! * [`wall_us`] — microseconds since the Unix epoch: what the sequencer stamps entries with, and
//!   what latencies (entry timestamp → committed, → final) are measured against.

use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    pub fn start() -> Self {
        Clock { start: Instant::now() }
    }

    /// Microseconds since [`Clock::start`].
    pub fn now_us(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// The moment `us` (on this clock) as a tokio instant; far futures are capped at an hour
    /// (a timer that far is re-armed long before).
    pub fn instant(&self, us: u64) -> tokio::time::Instant {
        let at = self.start + Duration::from_micros(us.min(self.now_us().saturating_add(3_600_000_000)));
        tokio::time::Instant::from_std(at)
    }
}

/// Microseconds since the Unix epoch (0 if the clock is before it).
pub fn wall_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}
