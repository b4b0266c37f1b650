//! The journal codec on arbitrary bytes: never a panic; raw bytes (mostly refused by length or
//! checksum), and the same bytes framed with a valid header so that the body decoder is reached.
//! Whatever decodes must encode back to a frame that decodes to the same entries (and commands).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtgs_core::codec;

/// `data` as the body of a frame with a correct length and CRC.
fn framed(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 8);
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast_hash(data).to_le_bytes());
    out.extend_from_slice(data);
    out
}

/// CRC-32 (IEEE), as the codec uses (crc32fast), written out to keep this crate's deps small.
fn crc32fast_hash(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

fuzz_target!(|data: &[u8]| {
    let mut entries = Vec::new();
    let _ = codec::decode_frames(data, &mut entries);
    let mut commands = Vec::new();
    let _ = codec::decode_commands_frames(data, &mut commands);

    let frame = framed(data);
    // A journal file's frame: entries or a durable mark, never a panic.
    let mut journal = Vec::new();
    if let Ok(Some((n, _))) = codec::decode_journal_frame(&frame, &mut journal) {
        assert!(n == frame.len(), "a journal frame spans its header's length");
    }
    entries.clear();
    if codec::decode_frames(&frame, &mut entries).is_ok() {
        let mut again = Vec::new();
        codec::encode_frame(&entries, &mut again);
        let mut back = Vec::new();
        assert!(codec::decode_frames(&again, &mut back).is_ok(), "a re-encoded frame must decode");
        assert!(back == entries, "round trip changed the entries");
    }
    commands.clear();
    if codec::decode_commands_frames(&frame, &mut commands).is_ok() {
        let mut again = Vec::new();
        codec::encode_commands_frame(&commands, &mut again);
        let mut back = Vec::new();
        assert!(codec::decode_commands_frames(&again, &mut back).is_ok(), "re-encoded commands must decode");
        assert!(back == commands, "round trip changed the commands");
    }
});
