//! The customers' PII of the matching orders submitted through this API (the origin center),
//! kept apart from the journal: the journal is replicated and kept forever, PII must be neither.
//!
//! In memory, by order (the submitting participant's key and the customer), bounded by
//! [`PII_ORDERS_MAX`]; and, when opened on a file, durable: every record is appended to that file
//! and synced before the order is acknowledged, and read back at start. The file lives in the
//! origin center's data directory beside the journal (`rtgs serve`: `<data-dir>/matching-pii.log`),
//! never in it, and is never replicated.
//!
//! **Format.** Records of `length: u32 LE | checksum: u64 LE | body`, the body a JSON object
//! `{order, owner, customer}` and the checksum `rtgs_core::hash::bytes64` of the body. Checked
//! (length, then checksum), then parsed. A record cut short at the end of the file — a write a
//! crash interrupted, never acknowledged — is cut off at start; a bad record anywhere else is
//! corruption and the store does not open. A later record of the same order replaces an earlier
//! one (a participant's retry).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::limits::PII_RECORD_BODY_BYTES_MAX as RECORD_BODY_BYTES_MAX;
pub use crate::limits::{PII_FIELD_CHARS_MAX, PII_ORDERS_MAX};
const RECORD_HEADER_BYTES: usize = 12;
const CHECKSUM_SEED: u64 = 0x5049_495F_5354_4F52; // "PII_STOR"

#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Customer {
    pub name: String,
    pub phone: String,
    pub bank_account: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PiiError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: record at byte {offset} is corrupt ({what})")]
    Corrupt { path: PathBuf, offset: u64, what: &'static str },
    #[error("the PII store is full ({PII_ORDERS_MAX} orders)")]
    Full,
    #[error("the PII store failed earlier and is closed")]
    Poisoned,
    #[error("a PII record of {0} bytes is over the bound")]
    TooLarge(usize),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    order: u64,
    owner: String,
    customer: Customer,
}

struct Inner {
    by_order: BTreeMap<u64, (Arc<str>, Customer)>,
    file: Option<Appender>,
}

/// The file and how much of it holds whole records.
struct Appender {
    path: PathBuf,
    file: File,
    bytes: u64,
    /// A failed append could not be cut off again: nothing more is appended after it.
    broken: bool,
}

/// See the module docs.
pub struct PiiStore(Mutex<Inner>);

impl Default for PiiStore {
    fn default() -> Self {
        PiiStore::in_memory()
    }
}

impl PiiStore {
    /// A store that lives as long as the process (tests, an API without a data directory).
    pub fn in_memory() -> Self {
        PiiStore(Mutex::new(Inner { by_order: BTreeMap::new(), file: None }))
    }

    fn new_file(path: &Path) -> Result<(), PiiError> {
        let io = |source| PiiError::Io { path: path.to_path_buf(), source };
        File::create_new(path).map_err(io)?.sync_all().map_err(io)?;
        // The new name must survive a crash too: sync the directory that holds it.
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        File::open(dir).and_then(|d| d.sync_all()).map_err(io)
    }

    /// The store in `path` (created if absent): every record read back, a torn last record cut off.
    pub fn open(path: &Path) -> Result<Self, PiiError> {
        let io = |source| PiiError::Io { path: path.to_path_buf(), source };
        if !path.exists() {
            PiiStore::new_file(path)?;
        }
        let mut file = OpenOptions::new().read(true).append(true).open(path).map_err(io)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        let (by_order, good) = read_records(path, &bytes)?;
        if good < bytes.len() {
            // A record cut short by a crash: never acknowledged, dropped.
            file.set_len(good as u64).map_err(io)?;
            file.sync_data().map_err(io)?;
        }
        file.seek(SeekFrom::End(0)).map_err(io)?;
        let appender = Appender { path: path.to_path_buf(), file, bytes: good as u64, broken: false };
        Ok(PiiStore(Mutex::new(Inner { by_order, file: Some(appender) })))
    }

    fn lock(&self) -> Result<MutexGuard<'_, Inner>, PiiError> {
        self.0.lock().map_err(|_| PiiError::Poisoned)
    }

    /// The owner (participant key id) and customer of `order`.
    pub fn get(&self, order: u64) -> Result<Option<(Arc<str>, Customer)>, PiiError> {
        Ok(self.lock()?.by_order.get(&order).cloned())
    }

    /// Keeps `customer` for `order`, submitted by `owner`: durable (appended and synced) before
    /// this returns when the store has a file. `Ok(false)`: the order is another owner's.
    pub fn put(&self, order: u64, owner: &Arc<str>, customer: &Customer) -> Result<bool, PiiError> {
        let mut inner = self.lock()?;
        match inner.by_order.get(&order) {
            Some((o, _)) if **o != **owner => return Ok(false),
            None if inner.by_order.len() >= PII_ORDERS_MAX => return Err(PiiError::Full),
            _ => {}
        }
        if let Some(appender) = inner.file.as_mut() {
            let record = Record { order, owner: owner.to_string(), customer: customer.clone() };
            let body = serde_json::to_vec(&record).unwrap_or_default();
            if body.is_empty() || body.len() > RECORD_BODY_BYTES_MAX {
                return Err(PiiError::TooLarge(body.len()));
            }
            let mut frame = Vec::with_capacity(RECORD_HEADER_BYTES + body.len());
            frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
            frame.extend_from_slice(&rtgs_core::hash::bytes64(CHECKSUM_SEED, &body).to_le_bytes());
            frame.extend_from_slice(&body);
            appender.append(&frame)?;
        }
        inner.by_order.insert(order, (Arc::clone(owner), customer.clone()));
        Ok(true)
    }

    pub fn len(&self) -> usize {
        self.lock().map_or(0, |i| i.by_order.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Appender {
    /// Appends `frame` and syncs it. Blocking, under the store's lock: an order's PII is durable
    /// before its order is journaled and acknowledged, and records are appended whole, one at a
    /// time. A failed append is cut off again, so that the next one does not follow a partial
    /// record (which would read back as corruption); if even that fails, the file takes no more.
    fn append(&mut self, frame: &[u8]) -> Result<(), PiiError> {
        if self.broken {
            return Err(PiiError::Poisoned);
        }
        let written = self.file.write_all(frame).and_then(|()| self.file.sync_data());
        match written {
            Ok(()) => {
                self.bytes += frame.len() as u64;
                Ok(())
            }
            Err(source) => {
                if self.file.set_len(self.bytes).and_then(|()| self.file.sync_data()).is_err() {
                    self.broken = true;
                }
                Err(PiiError::Io { path: self.path.clone(), source })
            }
        }
    }
}

type ByOrder = BTreeMap<u64, (Arc<str>, Customer)>;

/// The records of `bytes` and the length of its good prefix (see the module docs).
fn read_records(path: &Path, bytes: &[u8]) -> Result<(ByOrder, usize), PiiError> {
    let mut by_order = BTreeMap::new();
    let mut at = 0;
    while at < bytes.len() {
        let corrupt = |what| PiiError::Corrupt { path: path.to_path_buf(), offset: at as u64, what };
        let rest = &bytes[at..];
        let Some(header) = rest.get(..RECORD_HEADER_BYTES) else { break };
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        if len == 0 || len > RECORD_BODY_BYTES_MAX {
            return Err(corrupt("length"));
        }
        let Some(body) = rest.get(RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + len) else { break };
        let mut sum = [0u8; 8];
        sum.copy_from_slice(&header[4..12]);
        if u64::from_le_bytes(sum) != rtgs_core::hash::bytes64(CHECKSUM_SEED, body) {
            if at + RECORD_HEADER_BYTES + len == bytes.len() {
                break; // the last record, torn inside: a write a crash interrupted
            }
            return Err(corrupt("checksum"));
        }
        let r: Record = serde_json::from_slice(body).map_err(|_| corrupt("body"))?;
        by_order.insert(r.order, (Arc::from(r.owner), r.customer));
        at += RECORD_HEADER_BYTES + len;
    }
    Ok((by_order, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jane() -> Customer {
        Customer { name: "Jane".into(), phone: "+33 6".into(), bank_account: "FR76".into() }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rtgs-pii-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
        d
    }

    #[test]
    fn records_survive_a_reopen_and_a_torn_tail_is_cut_off() {
        let d = dir("reopen");
        let path = d.join("matching-pii.log");
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("A"), Arc::from("B"));
        {
            let s = PiiStore::open(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(s.put(1, &a, &jane()).ok(), Some(true));
            assert_eq!(s.put(2, &a, &Customer { name: "Joe".into(), ..jane() }).ok(), Some(true));
            assert_eq!(s.put(2, &b, &jane()).ok(), Some(false), "another owner's order");
        }
        let whole = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
        // A crash in the middle of a third record.
        let mut torn = whole.clone();
        torn.extend_from_slice(&[40, 0, 0, 0, 1, 2, 3]);
        std::fs::write(&path, &torn).unwrap_or_else(|e| panic!("{e}"));
        let s = PiiStore::open(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.len(), 2);
        assert_eq!(
            s.get(2).ok().flatten().map(|(o, c)| (o.to_string(), c.name)),
            Some(("A".into(), "Joe".into()))
        );
        assert_eq!(
            std::fs::read(&path).map(|b| b.len()).ok(),
            Some(whole.len()),
            "the torn record is cut off"
        );
        assert_eq!(s.put(3, &b, &jane()).ok(), Some(true), "appends after the cut");
        drop(s);
        assert_eq!(PiiStore::open(&path).map(|s| s.len()).ok(), Some(3));
        // A bad record before the end is corruption, not a tear.
        let mut bad = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
        bad[RECORD_HEADER_BYTES + 2] ^= 1;
        std::fs::write(&path, &bad).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(PiiStore::open(&path), Err(PiiError::Corrupt { offset: 0, .. })));
        let _ = std::fs::remove_dir_all(&d);
    }
}
