//! Cutting journal entries and commands into messages the broker takes: at most a count and at
//! most [`PAYLOAD_BYTES_MAX`] per frame. Sizes are computed, not trial-encoded: the codec's
//! layout (`rtgs_core::codec` docs) in a few additions, pinned to the real encoder by the tests
//! below, so a change of the codec fails here first.

use crate::limits::{FRAME_OVERHEAD_BYTES, PAYLOAD_BYTES_MAX};
use rtgs_core::entry::{Command, Entry, Payload};
use std::ops::Range;

/// Encoded size of a payload: tag, then its fields.
fn payload_bytes(p: &Payload) -> usize {
    1 + match p {
        Payload::Transfer(_) => 8 + 8 + 8 + 3,
        Payload::AccountOpen { .. } => 8 + 3,
        Payload::AccountFund { .. } => 8 + 8,
        Payload::AccountClose { .. } => 8,
        Payload::Tick => 0,
        Payload::Plugin(c) => 1 + 2 + 4 + c.body.len(),
    }
}

/// Encoded size of a journal entry.
pub fn entry_bytes(e: &Entry) -> usize {
    8 + 4 + 8 + 1 + 1 + e.bmi.as_bytes().len() + payload_bytes(&e.payload)
}

/// Encoded size of a command.
pub fn command_bytes(c: &Command) -> usize {
    1 + 1 + c.bmi.as_bytes().len() + payload_bytes(&c.payload)
}

/// The bytes of `items` (by `bytes`) if they are at most `max`; `None` as soon as they exceed it.
pub fn bytes_within<T>(items: &[T], max: usize, bytes: impl Fn(&T) -> usize) -> Option<usize> {
    let mut size = 0usize;
    for item in items {
        size += bytes(item);
        if size > max {
            return None;
        }
    }
    Some(size)
}

/// Consecutive ranges of `items`, each at most `count_max` items whose frame (overhead included)
/// stays within [`PAYLOAD_BYTES_MAX`]. An item never exceeds that alone (`limits` asserts it for
/// the largest entry and command), so every range holds at least one.
pub fn cut<T>(items: &[T], count_max: usize, bytes: impl Fn(&T) -> usize) -> Vec<Range<usize>> {
    cut_within(items, count_max, PAYLOAD_BYTES_MAX, bytes)
}

/// [`cut`] with frames of at most `frame_max` bytes (overhead included). An item larger than
/// that alone still gets a range of its own: the caller checks what it encodes.
pub fn cut_within<T>(
    items: &[T],
    count_max: usize,
    frame_max: usize,
    bytes: impl Fn(&T) -> usize,
) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = 0;
    let mut size = FRAME_OVERHEAD_BYTES;
    for (i, item) in items.iter().enumerate() {
        let b = bytes(item);
        if i > start && (i - start == count_max || size + b > frame_max) {
            ranges.push(start..i);
            start = i;
            size = FRAME_OVERHEAD_BYTES;
        }
        size += b;
    }
    if start < items.len() {
        ranges.push(start..items.len());
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{COMMAND_BYTES_MAX, ENTRY_BYTES_MAX};
    use rtgs_core::codec;
    use rtgs_core::entry::{AccountId, Bmi, CenterId, Currency, PluginCommand, PluginKind, Transfer};

    fn payloads(body: usize) -> Vec<Payload> {
        let eur = Currency::new(b"EUR").unwrap_or_else(|e| panic!("{e}"));
        vec![
            Payload::Transfer(Transfer {
                debtor: AccountId(1),
                creditor: AccountId(2),
                amount_minor: 3,
                currency: eur,
            }),
            Payload::AccountOpen { account: AccountId(1), currency: eur },
            Payload::AccountFund { account: AccountId(1), amount_minor: 9 },
            Payload::AccountClose { account: AccountId(1) },
            Payload::Tick,
            Payload::Plugin(PluginCommand { plugin: PluginKind::Collection, op: 7, body: vec![1; body] }),
        ]
    }

    fn bmi(len: usize) -> Bmi {
        Bmi::new("B".repeat(len).as_bytes()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn sizes_are_the_encoders() {
        let max_body = rtgs_core::limits::PLUGIN_BODY_BYTES_MAX;
        for (body, bmi_len) in [(0, 1), (17, 12), (max_body, rtgs_core::limits::BMI_BYTES_MAX)] {
            for payload in payloads(body) {
                let entry = Entry {
                    seq: 5,
                    epoch: 2,
                    timestamp_us: 9,
                    origin: CenterId(1),
                    bmi: bmi(bmi_len),
                    payload,
                };
                let mut frame = Vec::new();
                codec::encode_frame([&entry], &mut frame);
                assert_eq!(frame.len(), FRAME_OVERHEAD_BYTES + entry_bytes(&entry), "{entry:?}");
                assert!(entry_bytes(&entry) <= ENTRY_BYTES_MAX);
                let command = Command { origin: CenterId(1), bmi: entry.bmi, payload: entry.payload.clone() };
                let mut frame = Vec::new();
                codec::encode_commands_frame([&command], &mut frame);
                assert_eq!(frame.len(), FRAME_OVERHEAD_BYTES + command_bytes(&command), "{command:?}");
                assert!(command_bytes(&command) <= COMMAND_BYTES_MAX);
            }
        }
    }

    #[test]
    fn frames_stay_under_the_message_bound_and_the_count() {
        // 40 plugin commands of 60 KiB: 2.4 MB, so at least three frames; then 10 small ones.
        let mut commands: Vec<Command> = (0..40)
            .map(|i| Command {
                origin: CenterId(2),
                bmi: Bmi::numbered("C", i).unwrap_or_else(|e| panic!("{e}")),
                payload: payloads(60 << 10).swap_remove(5),
            })
            .collect();
        commands.extend((0..10).map(|i| Command {
            origin: CenterId(2),
            bmi: Bmi::numbered("S", i).unwrap_or_else(|e| panic!("{e}")),
            payload: Payload::Tick,
        }));
        let ranges = cut(&commands, 4, command_bytes);
        assert_eq!(ranges.first().map(|r| r.start), Some(0));
        assert_eq!(ranges.last().map(|r| r.end), Some(commands.len()));
        assert!(ranges.windows(2).all(|w| w[0].end == w[1].start), "contiguous: {ranges:?}");
        for r in &ranges {
            let mut frame = Vec::new();
            codec::encode_commands_frame(&commands[r.clone()], &mut frame);
            assert!(frame.len() <= PAYLOAD_BYTES_MAX && !r.is_empty() && r.len() <= 4, "{r:?}");
        }
        // Only the count cuts small ones; only the bytes cut the large ones (17 of 60 KiB fit).
        let small = cut(&commands[40..], 4, command_bytes);
        assert_eq!(small, vec![0..4, 4..8, 8..10]);
        let fit = (PAYLOAD_BYTES_MAX - FRAME_OVERHEAD_BYTES) / command_bytes(&commands[0]);
        assert_eq!(fit, 17);
        let large = cut(&commands[..40], 100, command_bytes);
        assert_eq!(large.iter().map(|r| r.len()).collect::<Vec<_>>(), vec![fit, fit, 40 - 2 * fit]);
        assert!(cut::<Command>(&[], 4, command_bytes).is_empty());
    }
}
