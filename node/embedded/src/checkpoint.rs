//! A center's durable state in the embedded engine: one checkpoint file per center.
//!
//! `DIR/center-DC1.checkpoint` = `"RTGSCKP2" | body_len u64 | crc32 u32 | body`, body =
//! ledger (with its applied watermark and state hash) | finalizer tallies | the center's own acks
//! that some finalizer may still need (first in full, then one outcome code per seq; a code with
//! [`HASH_FOLLOWS`] set is followed by the full hash: a seq whose plugin step was folded into
//! the state hash) | own-origin outcomes not yet announced as final | a reference to the plugin
//! host's state (`has u8 | seq u64 | state_hash u64`). `"RTGSCKP1"` files (before plugins) are
//! read as having no plugin state.
//!
//! The plugin host's state lives in its own file, `DIR/center-DC1.plugins.<seq>` =
//! `"RTGSPLG1" | len u64 | crc32 u32 | PluginHost::encode`, written (atomically, like the
//! checkpoint) only when a plugin entry changed it since the last one: with no plugin entries
//! flowing, checkpoints stay as small as without plugins (100,000 collection rows are ≈ 38 MB).
//! The file is written before the checkpoint that references it, older ones are deleted only
//! after; a crash in between leaves the previous checkpoint and its file. The state is the same
//! at the referenced seq and at the checkpoint's watermark: no plugin entry came in between.
//! Written to a temporary file, fsync'd, renamed over the old one, directory fsync'd: a crash
//! leaves either the old or the new checkpoint, never a mix. Checked on write and on read.

use rtgs_core::entry::{Bmi, Outcome, Seq};
use rtgs_core::finalizer::Finalizer;
use rtgs_core::hash::chain;
use rtgs_core::ledger::{Applied, Ledger};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"RTGSCKP2";
const MAGIC_V1: &[u8; 8] = b"RTGSCKP1";
const PLUGINS_MAGIC: &[u8; 8] = b"RTGSPLG1";

/// Which plugin state file a checkpoint uses: the one written at `seq`, whose host state hash is
/// `state_hash` (checked after reading it back).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PluginRef {
    pub seq: Seq,
    pub state_hash: u64,
}
/// Set on a retained ack's outcome code when its hash does not follow from the chain alone.
pub const HASH_FOLLOWS: u16 = 0x8000;

/// An own-origin entry that is applied locally and waits for finality to be announced.
pub use rtgs_core::center::Awaiting;

pub struct CenterCheckpoint {
    pub ledger: Ledger,
    pub finalizer: Finalizer,
    pub ack_log: Vec<Applied>,
    pub awaiting: Vec<Awaiting>,
    /// The plugin host's checkpoint (`PluginHost::encode`, read from its own file), if the
    /// center runs plugins, with the reference the checkpoint holds.
    pub plugins: Option<(PluginRef, Vec<u8>)>,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("checkpoint I/O on {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("checkpoint {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: &'static str },
}

pub fn path_for(dir: &Path, center: rtgs_core::entry::CenterId) -> PathBuf {
    dir.join(format!("center-{center}.checkpoint"))
}

/// Encodes the ledger and finalizer part (on the center's thread: a few hundred KB at most).
pub fn encode_state(ledger: &Ledger, finalizer: &Finalizer) -> Vec<u8> {
    let mut state = Vec::with_capacity(64 + ledger.accounts().len() * 24);
    ledger.encode(&mut state);
    finalizer.encode(&mut state);
    state
}

/// Encodes a whole checkpoint from its parts (on the checkpointer's thread).
///
/// The retained acks are contiguous seqs and each state hash follows from the previous one and
/// the outcome (`hash::chain`), so they are stored as the first ack in full and then one outcome
/// code per seq: 2 bytes per ack instead of 18, which keeps checkpoint writes from competing
/// with the journal's fsyncs. Reading them back re-derives every hash and checks that the chain
/// ends at the ledger's own state hash.
pub fn encode<'a>(
    state: &[u8],
    ack_log: impl IntoIterator<Item = &'a Applied>,
    awaiting: &[Awaiting],
    plugins: Option<PluginRef>,
) -> Vec<u8> {
    let mut body = Vec::with_capacity(state.len() + 64);
    body.extend_from_slice(state);
    let mut acks = ack_log.into_iter();
    match acks.next() {
        None => body.extend_from_slice(&0u64.to_le_bytes()),
        Some(first) => {
            let count_at = body.len();
            body.extend_from_slice(&0u64.to_le_bytes());
            body.extend_from_slice(&first.seq.to_le_bytes());
            body.extend_from_slice(&first.state_hash.to_le_bytes());
            body.extend_from_slice(&first.outcome.code().to_le_bytes());
            let mut count = 1u64;
            let mut seq = first.seq;
            let mut prev = first.state_hash;
            for a in acks {
                assert_eq!(a.seq, seq + 1, "retained acks must be contiguous");
                seq = a.seq;
                let code = a.outcome.code();
                assert!(code < HASH_FOLLOWS, "outcome codes are small");
                if a.state_hash == chain(prev, a.seq, code) {
                    body.extend_from_slice(&code.to_le_bytes());
                } else {
                    body.extend_from_slice(&(code | HASH_FOLLOWS).to_le_bytes());
                    body.extend_from_slice(&a.state_hash.to_le_bytes());
                }
                prev = a.state_hash;
                count += 1;
            }
            body[count_at..count_at + 8].copy_from_slice(&count.to_le_bytes());
        }
    }
    body.extend_from_slice(&(awaiting.len() as u64).to_le_bytes());
    for w in awaiting {
        body.extend_from_slice(&w.seq.to_le_bytes());
        let b = w.bmi.as_bytes();
        body.push(b.len() as u8);
        body.extend_from_slice(b);
        body.extend_from_slice(&w.outcome.code().to_le_bytes());
    }
    match plugins {
        None => body.push(0),
        Some(p) => {
            body.push(1);
            body.extend_from_slice(&p.seq.to_le_bytes());
            body.extend_from_slice(&p.state_hash.to_le_bytes());
        }
    }
    frame(MAGIC, &body)
}

fn frame(magic: &[u8; 8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 20);
    out.extend_from_slice(magic);
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// The plugin state file of the checkpoint at `checkpoint_path` written at `seq`.
pub fn plugins_path(checkpoint_path: &Path, seq: Seq) -> PathBuf {
    checkpoint_path.with_extension(format!("plugins.{seq:020}"))
}

/// Writes a plugin state file (atomically, like a checkpoint).
pub fn write_plugins(checkpoint_path: &Path, at: PluginRef, host: &[u8]) -> Result<(), CheckpointError> {
    write(&plugins_path(checkpoint_path, at.seq), &frame(PLUGINS_MAGIC, host))
}

/// Deletes the plugin state files of this checkpoint older than `keep_from` (after a checkpoint
/// referencing a newer one is durable).
pub fn remove_plugins_before(checkpoint_path: &Path, keep_from: Seq) -> Result<(), CheckpointError> {
    let io = |source| CheckpointError::Io { path: checkpoint_path.to_path_buf(), source };
    let (Some(dir), Some(stem)) = (checkpoint_path.parent(), checkpoint_path.file_stem()) else {
        return Ok(());
    };
    let prefix = format!("{}.plugins.", stem.to_string_lossy());
    for e in fs::read_dir(dir).map_err(io)? {
        let name = e.map_err(io)?.file_name().to_string_lossy().into_owned();
        let seq = name.strip_prefix(&prefix).and_then(|s| s.parse::<Seq>().ok());
        if seq.is_some_and(|s| s < keep_from) {
            fs::remove_file(dir.join(&name)).map_err(io)?;
        }
    }
    Ok(())
}

fn read_plugins(checkpoint_path: &Path, at: PluginRef) -> Result<Vec<u8>, CheckpointError> {
    let path = plugins_path(checkpoint_path, at.seq);
    let corrupt = |reason| CheckpointError::Corrupt { path: path.clone(), reason };
    let bytes = fs::read(&path).map_err(|source| CheckpointError::Io { path: path.clone(), source })?;
    if bytes.len() < 20 || &bytes[..8] != PLUGINS_MAGIC {
        return Err(corrupt("bad magic"));
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().map_err(|_| corrupt("header"))?) as usize;
    let crc = u32::from_le_bytes(bytes[16..20].try_into().map_err(|_| corrupt("header"))?);
    let body = bytes.get(20..).filter(|b| b.len() == len).ok_or_else(|| corrupt("length mismatch"))?;
    if crc32fast::hash(body) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    Ok(body.to_vec())
}

/// Atomically replaces the checkpoint at `path` with `bytes`.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    let io = |source| CheckpointError::Io { path: path.to_path_buf(), source };
    let tmp = path.with_extension("checkpoint.tmp");
    let mut f = File::create(&tmp).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    fs::rename(&tmp, path).map_err(io)?;
    if let Some(dir) = path.parent() {
        File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
    }
    Ok(())
}

/// Reads a checkpoint; `Ok(None)` if there is none yet.
pub fn read(path: &Path) -> Result<Option<CenterCheckpoint>, CheckpointError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(CheckpointError::Io { path: path.to_path_buf(), source }),
    };
    let (mut ckpt, plugins) =
        decode(&bytes).map_err(|reason| CheckpointError::Corrupt { path: path.to_path_buf(), reason })?;
    if let Some(at) = plugins {
        ckpt.plugins = Some((at, read_plugins(path, at)?));
    }
    Ok(Some(ckpt))
}

fn decode(bytes: &[u8]) -> Result<(CenterCheckpoint, Option<PluginRef>), &'static str> {
    if bytes.len() < 20 || (&bytes[..8] != MAGIC && &bytes[..8] != MAGIC_V1) {
        return Err("bad magic");
    }
    let v1 = &bytes[..8] == MAGIC_V1;
    let len = u64::from_le_bytes(bytes[8..16].try_into().map_err(|_| "header")?) as usize;
    let crc = u32::from_le_bytes(bytes[16..20].try_into().map_err(|_| "header")?);
    let body = bytes.get(20..).filter(|b| b.len() == len).ok_or("length mismatch")?;
    if crc32fast::hash(body) != crc {
        return Err("checksum mismatch");
    }
    let (ledger, used) = Ledger::decode(body).map_err(|_| "ledger")?;
    let rest = &body[used..];
    let (finalizer, used) = Finalizer::decode(rest).ok_or("finalizer")?;
    let mut r = &rest[used..];
    let mut take = |n: usize| -> Result<&[u8], &'static str> {
        if r.len() < n {
            return Err("truncated");
        }
        let (h, t) = r.split_at(n);
        r = t;
        Ok(h)
    };
    let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
    let u16_of = |b: &[u8]| u16::from_le_bytes(b.try_into().unwrap_or([0; 2]));
    let n = u64_of(take(8)?);
    let mut ack_log = Vec::new();
    if n > 0 {
        let seq = u64_of(take(8)?);
        let state_hash = u64_of(take(8)?);
        let outcome = Outcome::from_code(u16_of(take(2)?)).ok_or("ack outcome")?;
        if seq == 0 || n > ledger.seq_applied() || seq + n - 1 != ledger.seq_applied() {
            return Err("retained acks do not end at the applied watermark");
        }
        ack_log.reserve(n as usize);
        ack_log.push(Applied { seq, outcome, state_hash });
        for i in 1..n {
            let code = u16_of(take(2)?);
            let outcome = Outcome::from_code(code & !HASH_FOLLOWS).ok_or("ack outcome")?;
            let prev = ack_log[ack_log.len() - 1].state_hash;
            let state_hash = if code & HASH_FOLLOWS != 0 {
                u64_of(take(8)?)
            } else {
                chain(prev, seq + i, outcome.code())
            };
            ack_log.push(Applied { seq: seq + i, outcome, state_hash });
        }
        if ack_log[ack_log.len() - 1].state_hash != ledger.state_hash() {
            return Err("retained acks do not chain to the ledger's state hash");
        }
    }
    let n = u64_of(take(8)?);
    let mut awaiting = Vec::new();
    for _ in 0..n {
        let seq = u64_of(take(8)?);
        let len = usize::from(take(1)?[0]);
        let bmi = Bmi::new(take(len)?).map_err(|_| "awaiting bmi")?;
        let outcome = Outcome::from_code(u16_of(take(2)?)).ok_or("awaiting outcome")?;
        awaiting.push(Awaiting { seq, bmi, outcome, submitted_at_us: 0 });
    }
    let plugins = match if v1 { 0 } else { take(1)?[0] } {
        0 => None,
        1 => Some(PluginRef { seq: u64_of(take(8)?), state_hash: u64_of(take(8)?) }),
        _ => return Err("plugin state marker"),
    };
    if plugins.is_some_and(|p| p.seq > ledger.seq_applied()) {
        return Err("plugin state is ahead of the ledger");
    }
    if !r.is_empty() {
        return Err("trailing bytes");
    }
    Ok((CenterCheckpoint { ledger, finalizer, ack_log, awaiting, plugins: None }, plugins))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgs_core::entry::{AccountId, CenterId, Currency, Entry, Payload};

    #[test]
    fn round_trip_and_corruption_detected() {
        let mut ledger = Ledger::new();
        let eur = Currency::new(b"EUR").unwrap_or_else(|_| unreachable!());
        let e = |seq, payload| Entry {
            seq,
            epoch: 1,
            timestamp_us: seq,
            origin: CenterId(1),
            bmi: Bmi::numbered("C", seq).unwrap_or_else(|_| unreachable!()),
            payload,
        };
        let a1 = ledger.apply(&e(1, Payload::AccountOpen { account: AccountId(7), currency: eur }));
        let a2 = ledger.apply(&e(2, Payload::AccountFund { account: AccountId(7), amount_minor: 99 }));
        let mut finalizer = Finalizer::with_window(3, 16, 1);
        let mut out = Vec::new();
        finalizer.handle_ack(CenterId(1), a1, &mut out);
        let awaiting = vec![Awaiting {
            seq: 2,
            bmi: Bmi::numbered("C", 2).unwrap_or_else(|_| unreachable!()),
            outcome: a2.outcome,
            submitted_at_us: 5,
        }];
        let mut a3 = ledger.apply(&e(3, Payload::Tick));
        a3.state_hash = ledger.fold(0xABCD);
        let at = PluginRef { seq: 2, state_hash: 77 };
        let bytes = encode(&encode_state(&ledger, &finalizer), &[a1, a2, a3], &awaiting, Some(at));
        let dir = std::env::temp_dir().join(format!("rtgs-ckpt-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let path = path_for(&dir, CenterId(2));
        assert!(matches!(read(&path), Ok(None)));
        write_plugins(&path, PluginRef { seq: 1, state_hash: 1 }, b"old").unwrap_or_else(|e| panic!("{e}"));
        write_plugins(&path, at, b"host").unwrap_or_else(|e| panic!("{e}"));
        write(&path, &bytes).unwrap_or_else(|e| panic!("{e}"));
        remove_plugins_before(&path, at.seq).unwrap_or_else(|e| panic!("{e}"));
        assert!(!plugins_path(&path, 1).exists(), "the older plugin file is gone");
        let back = read(&path).unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("missing"));
        assert_eq!(back.ledger, ledger);
        assert_eq!(back.ack_log, vec![a1, a2, a3], "a folded hash is stored in full");
        assert_eq!(back.plugins, Some((at, b"host".to_vec())), "read from its own file");
        assert_eq!(back.awaiting[0].seq, 2);
        assert_eq!(back.awaiting[0].submitted_at_us, 0, "submit times do not survive a restart");
        assert_eq!(back.finalizer.status(1), rtgs_core::finalizer::SeqStatus::Pending { acks: 1 });
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n / 2] ^= 1;
        write(&path, &bad).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(read(&path), Err(CheckpointError::Corrupt { .. })));
        write(&path, &bytes).unwrap_or_else(|e| panic!("{e}"));
        let mut plugins = fs::read(plugins_path(&path, at.seq)).unwrap_or_else(|e| panic!("{e}"));
        let last = plugins.len() - 1;
        plugins[last] ^= 1;
        fs::write(plugins_path(&path, at.seq), &plugins).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(read(&path), Err(CheckpointError::Corrupt { .. })), "a bad plugin file is refused");
        let _ = fs::remove_dir_all(&dir);
    }
}
