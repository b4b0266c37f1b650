//! The embedded journal: append-only segment files of CRC-checked frames.
//!
//! `DIR/NNNNNNNNNNNNNNNNNNNN.journal` holds the frames whose first seq is at least `N` (the file
//! name is the seq of its first entry, zero-padded so names sort). The writer appends whole frames
//! and calls `fdatasync` once per group of batches; nothing is published before that returns.
//!
//! On open, the last segment is scanned: the first frame that is incomplete or fails its checksum
//! starts a torn tail (a write the crash interrupted), which is cut off. Any other inconsistency
//! (a seq that does not continue the previous one, a bad frame in a sealed segment) is corruption
//! and refuses to start: the journal is the record of money, so we never guess.

use rtgs_core::codec::{self, CodecError};
use rtgs_core::entry::{Entry, Seq};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal I/O on {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("journal corrupt in {path} at byte {offset}: {reason}")]
    Corrupt { path: PathBuf, offset: u64, reason: String },
    #[error("journal seq discontinuity in {path}: expected {expected}, found {found}")]
    Discontinuity { path: PathBuf, expected: Seq, found: Seq },
    #[error("journal has no seq {0} (its oldest segment starts later)")]
    Missing(Seq),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> JournalError + '_ {
    move |source| JournalError::Io { path: path.to_path_buf(), source }
}

/// What opening the journal found at its end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JournalTail {
    /// Last durable seq (0 for an empty journal).
    pub seq_last: Seq,
    pub epoch_last: u32,
    pub timestamp_last_us: u64,
    /// Bytes of torn tail cut off the last segment.
    pub truncated_bytes: u64,
    pub segments: usize,
}

/// Lists `(first_seq, path)` of the segments in `dir`, oldest first.
pub fn segments(dir: &Path) -> Result<Vec<(Seq, PathBuf)>, JournalError> {
    let mut out = Vec::new();
    for item in fs::read_dir(dir).map_err(io_err(dir))? {
        let item = item.map_err(io_err(dir))?;
        let name = item.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".journal")) else {
            continue;
        };
        if let Ok(seq) = stem.parse::<Seq>() {
            out.push((seq, item.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn segment_path(dir: &Path, seq_first: Seq) -> PathBuf {
    dir.join(format!("{seq_first:020}.journal"))
}

fn sync_dir(dir: &Path) -> Result<(), JournalError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir))
}

/// The writing side. One per journal directory.
pub struct Journal {
    dir: PathBuf,
    file: File,
    path: PathBuf,
    segment_bytes: u64,
    segment_bytes_max: u64,
    seq_last: Seq,
}

impl Journal {
    /// Opens (or creates) the journal in `dir`, cutting off a torn tail.
    pub fn open(dir: &Path, segment_bytes_max: u64) -> Result<(Journal, JournalTail), JournalError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut segs = segments(dir)?;
        if segs.is_empty() {
            let path = segment_path(dir, 1);
            File::create(&path).map_err(io_err(&path))?;
            sync_dir(dir)?;
            segs.push((1, path));
        }
        let mut tail = JournalTail { segments: segs.len(), ..JournalTail::default() };
        let (seq_first, path) = segs[segs.len() - 1].clone();
        let good_len = scan_last_segment(&path, seq_first, &mut tail)?;
        let file = OpenOptions::new().append(true).open(&path).map_err(io_err(&path))?;
        let len = file.metadata().map_err(io_err(&path))?.len();
        if len > good_len {
            tail.truncated_bytes = len - good_len;
            file.set_len(good_len).map_err(io_err(&path))?;
            file.sync_all().map_err(io_err(&path))?;
        }
        if tail.seq_last == 0 {
            tail.seq_last = seq_first - 1;
        }
        let journal = Journal {
            dir: dir.to_path_buf(),
            file,
            path,
            segment_bytes: good_len,
            segment_bytes_max,
            seq_last: tail.seq_last,
        };
        Ok((journal, tail))
    }

    pub fn seq_last(&self) -> Seq {
        self.seq_last
    }

    /// Appends whole frames holding seqs `seq_first..=seq_last` (not yet durable: call `sync`).
    pub fn append(&mut self, frames: &[u8], seq_first: Seq, seq_last: Seq) -> Result<(), JournalError> {
        assert_eq!(seq_first, self.seq_last + 1, "journal append out of order");
        assert!(seq_last >= seq_first);
        if self.segment_bytes >= self.segment_bytes_max {
            self.rotate(seq_first)?;
        }
        self.file.write_all(frames).map_err(io_err(&self.path))?;
        self.segment_bytes += frames.len() as u64;
        self.seq_last = seq_last;
        Ok(())
    }

    /// Makes everything appended so far durable.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        self.file.sync_data().map_err(io_err(&self.path))
    }

    fn rotate(&mut self, seq_first: Seq) -> Result<(), JournalError> {
        self.sync()?;
        let path = segment_path(&self.dir, seq_first);
        self.file = OpenOptions::new().create_new(true).append(true).open(&path).map_err(io_err(&path))?;
        sync_dir(&self.dir)?;
        self.path = path;
        self.segment_bytes = 0;
        Ok(())
    }
}

/// Validates the last segment; returns the length of its valid prefix and fills `tail`.
fn scan_last_segment(path: &Path, seq_first: Seq, tail: &mut JournalTail) -> Result<u64, JournalError> {
    let mut bytes = Vec::new();
    File::open(path).and_then(|mut f| f.read_to_end(&mut bytes)).map_err(io_err(path))?;
    let mut at = 0usize;
    let mut expected = seq_first;
    let mut entries = Vec::new();
    loop {
        entries.clear();
        match codec::decode_frame(&bytes[at..], &mut entries) {
            Ok(Some(n)) => {
                check_continuity(path, &entries, &mut expected)?;
                if let Some(last) = entries.last() {
                    tail.seq_last = last.seq;
                    tail.epoch_last = last.epoch;
                    tail.timestamp_last_us = last.timestamp_us;
                }
                at += n;
            }
            // Incomplete or torn: everything from here was never acknowledged as durable.
            Ok(None) | Err(CodecError::Checksum) | Err(CodecError::TooLarge(_)) => return Ok(at as u64),
            Err(e) => {
                return Err(JournalError::Corrupt {
                    path: path.to_path_buf(),
                    offset: at as u64,
                    reason: e.to_string(),
                })
            }
        }
    }
}

fn check_continuity(path: &Path, entries: &[Entry], expected: &mut Seq) -> Result<(), JournalError> {
    for e in entries {
        if e.seq != *expected {
            return Err(JournalError::Discontinuity {
                path: path.to_path_buf(),
                expected: *expected,
                found: e.seq,
            });
        }
        *expected += 1;
    }
    Ok(())
}

/// Reads entries back in seq order from a given seq (restart replay, gap pulls, the sequencer's
/// dedupe rebuild). Reads only what was durable when it was opened... and anything after, as long
/// as it is whole.
pub struct JournalReader {
    segments: Vec<(Seq, PathBuf)>,
    next_segment: usize,
    file: Option<(File, PathBuf)>,
    buf: Vec<u8>,
    at: usize,
    seq_next: Seq,
    eof: bool,
}

const READ_CHUNK_BYTES: usize = 4 << 20;

impl JournalReader {
    pub fn open(dir: &Path, seq_from: Seq) -> Result<JournalReader, JournalError> {
        let segments = segments(dir)?;
        // The newest segment starting at or before seq_from.
        let start = segments.iter().rposition(|(s, _)| *s <= seq_from.max(1));
        let Some(start) = start else {
            return match segments.first() {
                Some(_) => Err(JournalError::Missing(seq_from)),
                None => Ok(JournalReader::empty(seq_from)),
            };
        };
        Ok(JournalReader {
            segments,
            next_segment: start,
            file: None,
            buf: Vec::new(),
            at: 0,
            seq_next: seq_from.max(1),
            eof: false,
        })
    }

    fn empty(seq_from: Seq) -> Self {
        JournalReader {
            segments: Vec::new(),
            next_segment: 0,
            file: None,
            buf: Vec::new(),
            at: 0,
            seq_next: seq_from,
            eof: true,
        }
    }

    /// Appends the entries of the next frame(s) (at least one entry unless the journal ends) to
    /// `out`, skipping those below the starting seq. Returns false at the end of the journal.
    pub fn next_batch(&mut self, out: &mut Vec<Entry>) -> Result<bool, JournalError> {
        let before = out.len();
        while out.len() == before {
            if !self.next_frame(out)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn next_frame(&mut self, out: &mut Vec<Entry>) -> Result<bool, JournalError> {
        loop {
            if self.eof {
                return Ok(false);
            }
            let mut frame = Vec::new();
            let decoded = codec::decode_frame(&self.buf[self.at..], &mut frame);
            match decoded {
                Ok(Some(n)) => {
                    self.at += n;
                    let path = self.file.as_ref().map(|(_, p)| p.clone()).unwrap_or_default();
                    for e in frame {
                        if e.seq < self.seq_next {
                            continue;
                        }
                        if e.seq != self.seq_next {
                            return Err(JournalError::Discontinuity {
                                path,
                                expected: self.seq_next,
                                found: e.seq,
                            });
                        }
                        self.seq_next += 1;
                        out.push(e);
                    }
                    return Ok(true);
                }
                Ok(None) => self.fill()?,
                Err(e) => {
                    let path = self.file.as_ref().map(|(_, p)| p.clone()).unwrap_or_default();
                    return Err(JournalError::Corrupt { path, offset: 0, reason: e.to_string() });
                }
            }
        }
    }

    /// Reads more of the current segment, or moves to the next one.
    fn fill(&mut self) -> Result<(), JournalError> {
        self.buf.drain(..self.at);
        self.at = 0;
        if let Some((file, path)) = self.file.as_mut() {
            let start = self.buf.len();
            self.buf.resize(start + READ_CHUNK_BYTES, 0);
            let n = file.read(&mut self.buf[start..]).map_err(io_err(path))?;
            self.buf.truncate(start + n);
            if n > 0 {
                return Ok(());
            }
            // End of this segment: a partial frame left over is the writer's unsynced tail.
            self.file = None;
            self.buf.clear();
        }
        match self.segments.get(self.next_segment) {
            Some((_, path)) => {
                let f = File::open(path).map_err(io_err(path))?;
                self.file = Some((f, path.clone()));
                self.next_segment += 1;
            }
            None => self.eof = true,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgs_core::entry::CenterId;

    fn tick(seq: Seq) -> Entry {
        Entry::tick(seq, 3, seq * 10, CenterId(1))
    }

    fn frame(seqs: std::ops::RangeInclusive<Seq>) -> Vec<u8> {
        let entries: Vec<Entry> = seqs.map(tick).collect();
        let mut buf = Vec::new();
        codec::encode_frame(&entries, &mut buf);
        buf
    }

    fn read_all(dir: &Path, from: Seq) -> Vec<Seq> {
        let mut r = JournalReader::open(dir, from).unwrap_or_else(|e| panic!("{e}"));
        let mut out = Vec::new();
        while r.next_batch(&mut out).unwrap_or_else(|e| panic!("{e}")) {}
        out.iter().map(|e| e.seq).collect()
    }

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rtgs-journal-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn append_rotate_reopen_and_read_from_any_seq() {
        let dir = tempdir("rotate");
        let (mut j, tail) = Journal::open(&dir, 100).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(tail.seq_last, 0);
        for k in 0..10u64 {
            j.append(&frame(k * 3 + 1..=k * 3 + 3), k * 3 + 1, k * 3 + 3).unwrap_or_else(|e| panic!("{e}"));
            j.sync().unwrap_or_else(|e| panic!("{e}"));
        }
        drop(j);
        assert!(segments(&dir).map(|s| s.len()).unwrap_or(0) > 1, "rotated");
        let (j, tail) = Journal::open(&dir, 100).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (tail.seq_last, tail.epoch_last, tail.timestamp_last_us, tail.truncated_bytes),
            (30, 3, 300, 0)
        );
        assert_eq!(j.seq_last(), 30);
        assert_eq!(read_all(&dir, 1), (1..=30).collect::<Vec<_>>());
        assert_eq!(read_all(&dir, 17), (17..=30).collect::<Vec<_>>());
        assert_eq!(read_all(&dir, 31), Vec::<Seq>::new());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn torn_tail_is_cut_and_appends_continue() {
        let dir = tempdir("torn");
        let (mut j, _) = Journal::open(&dir, 1 << 20).unwrap_or_else(|e| panic!("{e}"));
        j.append(&frame(1..=5), 1, 5).unwrap_or_else(|e| panic!("{e}"));
        let second = frame(6..=9);
        // A crash mid-write: only part of the second frame reached the disk.
        j.append(&second[..second.len() - 3], 6, 9).unwrap_or_else(|e| panic!("{e}"));
        j.sync().unwrap_or_else(|e| panic!("{e}"));
        drop(j);
        let (mut j, tail) = Journal::open(&dir, 1 << 20).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(tail.seq_last, 5);
        assert_eq!(tail.truncated_bytes, second.len() as u64 - 3);
        j.append(&frame(6..=7), 6, 7).unwrap_or_else(|e| panic!("{e}"));
        j.sync().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_all(&dir, 1), (1..=7).collect::<Vec<_>>());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn corrupt_tail_checksum_is_cut_but_discontinuity_refuses_to_start() {
        let dir = tempdir("corrupt");
        let (mut j, _) = Journal::open(&dir, 1 << 20).unwrap_or_else(|e| panic!("{e}"));
        j.append(&frame(1..=2), 1, 2).unwrap_or_else(|e| panic!("{e}"));
        let mut bad = frame(3..=4);
        let n = bad.len();
        bad[n - 1] ^= 0xff;
        j.append(&bad, 3, 4).unwrap_or_else(|e| panic!("{e}"));
        drop(j);
        let (_, tail) = Journal::open(&dir, 1 << 20).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(tail.seq_last, 2);
        // Now write a frame that skips seqs straight into the file.
        let path = segments(&dir).unwrap_or_default().pop().map(|(_, p)| p).unwrap_or_default();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap_or_else(|e| panic!("{e}"));
        f.write_all(&frame(5..=5)).unwrap_or_else(|e| panic!("{e}"));
        drop(f);
        assert!(matches!(
            Journal::open(&dir, 1 << 20),
            Err(JournalError::Discontinuity { expected: 3, found: 5, .. })
        ));
        let _ = fs::remove_dir_all(&dir);
    }
}
