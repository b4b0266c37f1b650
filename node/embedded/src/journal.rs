//! The embedded journal: append-only segment files of CRC-checked frames, optionally mirrored.
//!
//! `DIR/NNNNNNNNNNNNNNNNNNNN.journal` holds the frames whose first seq is at least `N` (the file
//! name is the seq of its first entry, zero-padded so names sort). The writer appends whole frames
//! and calls `fdatasync` once per group of batches.
//!
//! **The durable end.** After a group is `fdatasync`ed, the writer appends a *durable mark*
//! (`rtgs_core::codec::DurableMark`: "every byte before me is durable and holds the seqs up to
//! `seq_last`") and makes it durable with the next `fdatasync` — together with the next group's
//! frames under load, on its own when the writer is idle. A batch is handed to the centers only
//! once a durable mark after it is durable ([`Journal::sync`] and [`Journal::seal`] return how
//! far that is). So every seq anyone may have seen lies before a durable mark, and a sealed
//! segment ends with one.
//!
//! **Torn tail vs corruption.** Opening checks every frame of every segment (length, CRC, the
//! seqs continuing, each mark matching its position and the seqs before it). A bad frame in a
//! sealed segment, or one followed by any valid frame (an entries frame that continues the seqs,
//! or a mark) is **corruption**: the journal refuses to open, naming the file, the byte offset and
//! the seqs concerned, and changes nothing. Only a bad or incomplete frame with nothing valid after
//! it in the last segment is a **torn tail**, and it is cut. Why that is safe: a mark is written
//! only after everything before it is durable, and a durable mark always follows whatever was
//! published; a torn tail has no valid frame after it, so no durable mark either — it lies past
//! the durable end and was never published. (A damaged last mark alone is cut too: the frames it
//! covered are valid and stay.) Bytes that disappear from the *end* of durable data leave nothing
//! behind to tell; [`JournalOpen::seq_floor`] — the highest seq a center's checkpoint says it
//! applied — refuses such a cut, and a mirror repairs it.
//!
//! **Mirror.** With [`JournalOpen::mirror`] every byte is written to a second directory too
//! (e.g. on another disk) and both copies are `fdatasync`ed before anything is published. At open
//! the two are compared frame by frame: a frame that is bad (or missing) in one copy and valid in
//! the other is copied over (counted in [`JournalTail::repaired_frames`], listed in
//! [`JournalTail::repairs`]); both bad at the same frame is refused like corruption without a
//! mirror, unless it is the torn tail of both. A missing mirror directory is filled from the
//! journal (and the other way round: a replaced journal disk is filled from the mirror).
//!
//! **Zeros ahead.** The writer keeps [`JOURNAL_ZERO_AHEAD_BYTES`] of zeros written ahead of its
//! position in the current segment (topped up with each write by at least what it used, a step of
//! 64 KiB or more, so that no sync carries megabytes of them) and writes frames over them: an
//! `fdatasync` then flushes data only — no file size or block allocation to commit in the file
//! system's journal — which made it about twice as fast on this machine's disk (`bench/README.md`,
//! "Zeros ahead") and far less held up by other files' `fsync`s (checkpoints, `bmi` runs). A frame
//! never starts with 8 zero bytes (its length is at least 1), so zeros where a frame would start
//! are *unwritten*: the end of the segment if nothing but zeros follows, damage like any bad frame
//! otherwise. A segment that is closed or sealed by rotation is trimmed to its frames; after a
//! crash the zeros stay and are read as the end.
//!
//! [`inspect`] runs the same checks without writing a byte (`rtgs verify`); [`JournalReader`]
//! replays from any seq; [`EntryReader`] fetches single entries by seq (the `bmi` index's check).

use crate::limits::JOURNAL_ZERO_AHEAD_BYTES;
use rtgs_core::codec::{self, CodecError, DurableMark, FRAME_HEADER_BYTES, MARK_FRAME_BYTES, VERSION_MARK};
use rtgs_core::entry::{Entry, Seq};
use rtgs_core::limits::FRAME_BYTES_MAX;
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The least the writer adds to its zeros ahead at a time (see `Journal::zero_ahead`).
const ZERO_STEP_BYTES: usize = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal I/O on {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(
        "journal corrupt: {path} at byte {offset} ({seqs}): {reason}. Nothing was cut or changed. {advice}"
    )]
    Corrupt { path: PathBuf, offset: u64, seqs: String, reason: String, advice: String },
    #[error("journal seq discontinuity in {path}: expected {expected}, found {found}")]
    Discontinuity { path: PathBuf, expected: Seq, found: Seq },
    #[error("journal has no seq {0} (its oldest segment starts later)")]
    Missing(Seq),
    #[error(
        "journal lost durable entries: its valid frames end at seq {seq_last} ({path}, byte {offset}) but \
         a center's checkpoint applied seq {seq_floor}; nothing was cut. {advice}"
    )]
    BelowFloor { path: PathBuf, offset: u64, seq_last: Seq, seq_floor: Seq, advice: String },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> JournalError + '_ {
    move |source| JournalError::Io { path: path.to_path_buf(), source }
}

/// What an operator can do about a damaged journal without a mirror.
const ADVICE_NO_MIRROR: &str = "Options: restore this file from a backup or another copy of the journal and \
    start again; if a mirror copy exists, start with --journal-mirror DIR and the node repairs the frame from \
    it; `rtgs verify --data-dir DIR` reports what is readable without changing anything. The journal is the \
    record of money: the node never guesses, and never cuts what was durable.";
/// ... and with one whose copy is damaged at the same frame.
const ADVICE_BOTH: &str = "Both copies (journal and mirror) are damaged at this frame: restore the file \
    from a backup or a third copy and start again; `rtgs verify --data-dir DIR --journal-mirror DIR` \
    reports what is readable without changing anything.";

/// How to open a journal.
#[derive(Clone, Debug)]
pub struct JournalOpen {
    /// A second copy of every segment (another disk): written and synced with the first.
    pub mirror: Option<PathBuf>,
    /// A segment is closed and a new one started past this size.
    pub segment_bytes_max: u64,
    /// A center applied this seq: a torn-tail cut may not go below it (the journal would have
    /// lost durable entries).
    pub seq_floor: Seq,
}

impl JournalOpen {
    pub fn new(segment_bytes_max: u64) -> Self {
        JournalOpen { mirror: None, segment_bytes_max, seq_floor: 0 }
    }
}

/// One frame copied from one copy of the journal into the other at open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    /// The file repaired (or, by [`inspect`], that would be).
    pub path: PathBuf,
    pub offset: u64,
    pub bytes: u64,
    /// What was there instead: a checksum failure, a missing end, ...
    pub found: String,
}

/// Repairs listed one by one in [`JournalTail::repairs`]; the rest are only counted.
const REPAIRS_LISTED_MAX: usize = 64;

/// What opening the journal found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JournalTail {
    /// Last durable seq (0 for an empty journal).
    pub seq_last: Seq,
    pub epoch_last: u32,
    pub timestamp_last_us: u64,
    /// The last seq a durable mark covered: everything up to it may have been published.
    pub seq_durable: Seq,
    /// Where that mark ends in the last segment (0 if the last segment holds no mark).
    pub durable_bytes: u64,
    /// Bytes cut off the last segment past its valid frames (by [`inspect`]: that would be
    /// cut): the torn tail, and after a crash the writer's zeros ahead after it.
    pub truncated_bytes: u64,
    pub segments: usize,
    /// Frames copied from one copy to the other (by [`inspect`]: that would be).
    pub repaired_frames: u64,
    pub repaired_bytes: u64,
    /// The first [`REPAIRS_LISTED_MAX`] of them.
    pub repairs: Vec<Repair>,
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

fn segment_name(seq_first: Seq) -> String {
    format!("{seq_first:020}.journal")
}

fn sync_dir(dir: &Path) -> Result<(), JournalError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir))
}

// ---- reading frames at an offset ----

/// The frame at an offset of one copy.
#[derive(Debug)]
enum Found {
    /// The file ends exactly here.
    End,
    /// Zeros from here to the end of the file: never written (the writer's zeros ahead).
    Unwritten,
    /// The file ends inside a frame.
    Incomplete,
    Bad(String),
    Entries {
        len: u64,
        first: Seq,
        count: u64,
    },
    Mark {
        mark: DurableMark,
    },
}

impl Found {
    fn describe(&self) -> String {
        match self {
            Found::End => "missing (the file ends before it)".into(),
            Found::Unwritten => "missing (never written: zeros to the end of the file)".into(),
            Found::Incomplete => "incomplete (the file ends inside it)".into(),
            Found::Bad(reason) => reason.clone(),
            Found::Entries { .. } | Found::Mark { .. } => "a valid frame".into(),
        }
    }
}

/// Reads the frame at `at` into `buf` (header and body) and classifies it: length, checksum,
/// version and the first seq are checked; the entries themselves are parsed by readers.
fn read_frame(file: &File, file_len: u64, at: u64, buf: &mut Vec<u8>) -> io::Result<Found> {
    if at >= file_len {
        return Ok(Found::End);
    }
    if file_len - at < FRAME_HEADER_BYTES as u64 {
        return Ok(Found::Incomplete);
    }
    let mut header = [0u8; FRAME_HEADER_BYTES];
    file.read_exact_at(&mut header, at)?;
    if header == [0u8; FRAME_HEADER_BYTES] {
        // No frame starts with zeros: the unwritten end, or damage if anything follows.
        return Ok(match written_end(file, at, file_len)? {
            end if end <= at => Found::Unwritten,
            end => {
                Found::Bad(format!("zeros where a frame should start, and bytes written up to byte {end}"))
            }
        });
    }
    let len = u64::from(u32::from_le_bytes([header[0], header[1], header[2], header[3]]));
    if len > (FRAME_BYTES_MAX - FRAME_HEADER_BYTES) as u64 {
        return Ok(Found::Bad(CodecError::TooLarge(len as usize).to_string()));
    }
    let total = FRAME_HEADER_BYTES as u64 + len;
    if file_len - at < total {
        return Ok(Found::Incomplete);
    }
    buf.clear();
    buf.resize(total as usize, 0);
    file.read_exact_at(buf, at)?;
    Ok(classify(buf))
}

/// Where the bytes that are not zero end in `from..file_len` (`from` if all are zero), read
/// backwards from the end of the file.
fn written_end(file: &File, from: u64, file_len: u64) -> io::Result<u64> {
    const CHUNK: u64 = 1 << 20;
    let mut buf = vec![0u8; CHUNK as usize];
    let mut end = file_len;
    while end > from {
        let start = end.saturating_sub(CHUNK).max(from);
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact_at(chunk, start)?;
        if let Some(i) = chunk.iter().rposition(|b| *b != 0) {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(from)
}

/// A whole frame's bytes, classified.
fn classify(frame: &[u8]) -> Found {
    match codec::check(frame) {
        Ok(Some(_)) => {}
        Ok(None) => return Found::Incomplete,
        Err(e) => return Found::Bad(e.to_string()),
    }
    let body = &frame[FRAME_HEADER_BYTES..];
    let len = frame.len() as u64;
    match body.first() {
        Some(&VERSION_MARK) => {
            let mut out = Vec::new();
            match codec::decode_journal_frame(frame, &mut out) {
                Ok(Some((_, Some(mark)))) => Found::Mark { mark },
                Ok(_) => Found::Bad("malformed durable mark".into()),
                Err(e) => Found::Bad(format!("malformed durable mark: {e}")),
            }
        }
        Some(1) if body.len() >= 13 => {
            let count = u64::from(u32::from_le_bytes([body[1], body[2], body[3], body[4]]));
            let first = u64::from_le_bytes([
                body[5], body[6], body[7], body[8], body[9], body[10], body[11], body[12],
            ]);
            if count == 0 || first == 0 {
                Found::Bad("a frame of entries without entries".into())
            } else {
                Found::Entries { len, first, count }
            }
        }
        Some(v) => Found::Bad(CodecError::Version(*v).to_string()),
        None => Found::Bad(CodecError::Truncated.to_string()),
    }
}

impl Found {
    fn len(&self) -> Option<u64> {
        match self {
            Found::Entries { len, .. } => Some(*len),
            Found::Mark { .. } => Some(MARK_FRAME_BYTES as u64),
            _ => None,
        }
    }
}

/// How far past a damaged frame a following frame's first seq may be and still count as one
/// (the prefilter that keeps the byte-by-byte search cheap; a real frame holds at most a few
/// thousand entries).
const RESYNC_SEQ_SPAN: u64 = 1 << 32;

/// The first valid frame that starts after `from` and continues the journal after `seq_after`
/// (an entries frame whose first seq follows it, or a mark at its own offset): its offset and
/// first seq (a mark's `seq_last + 1`). Byte by byte, with a cheap prefilter before any CRC.
fn find_valid_after(file: &File, file_len: u64, from: u64, seq_after: Seq) -> io::Result<Option<(u64, Seq)>> {
    const CHUNK: usize = 4 << 20;
    /// Enough of a frame to prefilter it: header, version, count, first seq.
    const PEEK: usize = FRAME_HEADER_BYTES + 13;
    let mut buf = Vec::new();
    let mut frame = Vec::new();
    let mut pos = from + 1;
    while pos + (FRAME_HEADER_BYTES as u64) < file_len {
        let end = (pos + (CHUNK + PEEK) as u64).min(file_len);
        buf.resize((end - pos) as usize, 0);
        file.read_exact_at(&mut buf, pos)?;
        let positions = buf.len().min(CHUNK);
        for i in 0..positions {
            let h = &buf[i..];
            if h.len() <= FRAME_HEADER_BYTES {
                break;
            }
            let at = pos + i as u64;
            let len = u64::from(u32::from_le_bytes([h[0], h[1], h[2], h[3]]));
            if len == 0 || at + FRAME_HEADER_BYTES as u64 + len > file_len {
                continue;
            }
            let candidate = match h[FRAME_HEADER_BYTES] {
                1 if h.len() >= PEEK && len >= 13 => {
                    let b = &h[FRAME_HEADER_BYTES + 5..PEEK];
                    let first = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                    first > seq_after && first - seq_after <= RESYNC_SEQ_SPAN
                }
                v => v == VERSION_MARK && len as usize == MARK_FRAME_BYTES - FRAME_HEADER_BYTES,
            };
            if !candidate {
                continue;
            }
            match read_frame(file, file_len, at, &mut frame)? {
                Found::Entries { first, .. } if first > seq_after => return Ok(Some((at, first))),
                Found::Mark { mark } if mark.offset == at && mark.seq_last >= seq_after => {
                    return Ok(Some((at, mark.seq_last + 1)))
                }
                _ => {}
            }
        }
        pos += positions as u64;
    }
    Ok(None)
}

// ---- reconciling the copies ----

/// One copy of one segment.
struct SegmentCopy {
    path: PathBuf,
    file: File,
    len: u64,
}

/// Where the scan is, across segments.
struct Scan {
    read_only: bool,
    mirrored: bool,
    seq_next: Seq,
    /// The last entries frame (path, offset): its last entry gives the epoch and timestamp.
    last_frame: Option<(PathBuf, u64)>,
    seq_durable: Seq,
    /// The segment and offset where the last durable mark ends.
    durable_end: (Seq, u64),
    repaired_frames: u64,
    repaired_bytes: u64,
    repairs: Vec<Repair>,
    /// Per segment, the copies whose frames needed no repair (for a read-only replay).
    clean: Vec<(Seq, Vec<bool>)>,
}

/// How a segment's scan ended.
enum SegmentEnd {
    /// Every frame valid up to the end of the longest copy.
    Clean(u64),
    /// A torn tail starts at this offset (only possible in the last segment).
    Torn(u64),
}

impl Scan {
    fn corrupt(&self, path: &Path, offset: u64, reason: String, next: Option<(u64, Seq)>) -> JournalError {
        let seqs = match next {
            Some((at, seq)) if seq > self.seq_next => format!(
                "seqs {}..={} unreadable; the next valid frame starts at byte {at}",
                self.seq_next,
                seq - 1
            ),
            Some((at, _)) => format!("at seq {}; a valid frame follows at byte {at}", self.seq_next),
            None => format!("from seq {}", self.seq_next),
        };
        let advice = if self.mirrored { ADVICE_BOTH } else { ADVICE_NO_MIRROR };
        JournalError::Corrupt { path: path.to_path_buf(), offset, seqs, reason, advice: advice.into() }
    }

    fn note_repair(&mut self, path: &Path, offset: u64, bytes: u64, found: String) {
        self.repaired_frames += 1;
        self.repaired_bytes += bytes;
        if self.repairs.len() < REPAIRS_LISTED_MAX {
            self.repairs.push(Repair { path: path.to_path_buf(), offset, bytes, found });
        }
    }

    /// Checks (and, unless read-only, repairs) one segment in every copy.
    fn segment(
        &mut self,
        seq_first: Seq,
        copies: &[SegmentCopy],
        last: bool,
    ) -> Result<SegmentEnd, JournalError> {
        if seq_first != self.seq_next {
            return Err(JournalError::Discontinuity {
                path: copies[0].path.clone(),
                expected: self.seq_next,
                found: seq_first,
            });
        }
        let mut clean = vec![true; copies.len()];
        let mut lens: Vec<u64> = copies.iter().map(|c| c.len).collect();
        let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); copies.len()];
        let mut at = 0u64;
        loop {
            let mut found = Vec::with_capacity(copies.len());
            for (i, c) in copies.iter().enumerate() {
                found.push(read_frame(&c.file, lens[i], at, &mut bufs[i]).map_err(io_err(&c.path))?);
            }
            let Some(good) = found.iter().position(|f| f.len().is_some()) else {
                if found.iter().all(|f| matches!(f, Found::End | Found::Unwritten)) {
                    self.clean.push((seq_first, clean));
                    return Ok(SegmentEnd::Clean(at));
                }
                self.damaged(seq_first, copies, &found, at, last)?;
                // A torn tail is no repair: each copy is good up to it (readers stop there).
                self.clean.push((seq_first, clean));
                return Ok(SegmentEnd::Torn(at));
            };
            let len = found[good].len().unwrap_or(0);
            for (i, f) in found.iter().enumerate() {
                if f.len().is_some() && bufs[i] != bufs[good] {
                    return Err(self.corrupt(
                        &copies[i].path,
                        at,
                        format!(
                            "the copies differ ({} and {} hold different valid frames)",
                            copies[good].path.display(),
                            copies[i].path.display()
                        ),
                        None,
                    ));
                }
            }
            self.accept(seq_first, &copies[good].path, at, &found[good])?;
            for (i, f) in found.iter().enumerate() {
                if f.len().is_none() {
                    clean[i] = false;
                    if !self.read_only {
                        copies[i].file.write_all_at(&bufs[good], at).map_err(io_err(&copies[i].path))?;
                        lens[i] = lens[i].max(at + len);
                    }
                    self.note_repair(&copies[i].path, at, len, f.describe());
                }
            }
            at += len;
        }
    }

    /// A valid frame at `at`: it must continue the seqs, a mark must match.
    fn accept(&mut self, segment: Seq, path: &Path, at: u64, found: &Found) -> Result<(), JournalError> {
        match found {
            Found::Entries { first, count, .. } => {
                if *first != self.seq_next {
                    return Err(JournalError::Discontinuity {
                        path: path.to_path_buf(),
                        expected: self.seq_next,
                        found: *first,
                    });
                }
                self.seq_next += count;
                self.last_frame = Some((path.to_path_buf(), at));
            }
            Found::Mark { mark } => {
                if mark.offset != at || mark.seq_last + 1 != self.seq_next {
                    return Err(self.corrupt(
                        path,
                        at,
                        format!(
                            "a durable mark for byte {} and seq {} where byte {at} follows seq {}",
                            mark.offset,
                            mark.seq_last,
                            self.seq_next - 1
                        ),
                        None,
                    ));
                }
                self.seq_durable = mark.seq_last;
                self.durable_end = (segment, at + MARK_FRAME_BYTES as u64);
            }
            Found::End | Found::Unwritten | Found::Incomplete | Found::Bad(_) => {}
        }
        Ok(())
    }

    /// No copy holds a valid frame at `at`: a torn tail, or corruption.
    fn damaged(
        &self,
        seq_first: Seq,
        copies: &[SegmentCopy],
        found: &[Found],
        at: u64,
        last: bool,
    ) -> Result<(), JournalError> {
        let worst = found.iter().position(|f| !matches!(f, Found::End | Found::Unwritten)).unwrap_or(0);
        let reason = found[worst].describe();
        let mut next = None;
        for c in copies {
            if let Some(n) =
                find_valid_after(&c.file, c.len, at, self.seq_next - 1).map_err(io_err(&c.path))?
            {
                next = Some(next.map_or(n, |m: (u64, Seq)| if n.0 < m.0 { n } else { m }));
            }
        }
        if !last {
            return Err(self.corrupt(
                &copies[worst].path,
                at,
                format!("{reason} in a sealed segment (from seq {seq_first})"),
                next,
            ));
        }
        if next.is_some() {
            return Err(self.corrupt(
                &copies[worst].path,
                at,
                format!("{reason}, and valid frames follow"),
                next,
            ));
        }
        Ok(())
    }
}

/// Opens one copy of a segment; `None` if that copy lacks it.
fn open_copy(path: &Path, write: bool) -> Result<Option<SegmentCopy>, JournalError> {
    let file = if write { OpenOptions::new().read(true).write(true).open(path) } else { File::open(path) };
    match file {
        Ok(file) => {
            let len = file.metadata().map_err(io_err(path))?.len();
            Ok(Some(SegmentCopy { path: path.to_path_buf(), file, len }))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(JournalError::Io { path: path.to_path_buf(), source }),
    }
}

/// The result of checking every segment of every copy.
struct Checked {
    scan: Scan,
    /// Segments in order, with their first seq.
    names: Vec<Seq>,
    /// Where the last segment's valid frames end, and whether a torn tail follows.
    end: SegmentEnd,
}

/// Checks all copies (`dirs[0]` the journal, `dirs[1]` the mirror); writes repairs unless
/// `read_only`. Creates the segments a copy lacks (empty) first when writing.
fn check_copies(dirs: &[PathBuf], read_only: bool) -> Result<Checked, JournalError> {
    let mut names: BTreeMap<Seq, ()> = BTreeMap::new();
    for d in dirs {
        if d.is_dir() {
            for (seq, _) in segments(d)? {
                names.insert(seq, ());
            }
        }
    }
    let names: Vec<Seq> = names.into_keys().collect();
    let mut scan = Scan {
        read_only,
        mirrored: dirs.len() > 1,
        seq_next: names.first().copied().unwrap_or(1),
        last_frame: None,
        seq_durable: 0,
        durable_end: (0, 0),
        repaired_frames: 0,
        repaired_bytes: 0,
        repairs: Vec::new(),
        clean: Vec::new(),
    };
    let mut end = SegmentEnd::Clean(0);
    for (k, &seq_first) in names.iter().enumerate() {
        let mut copies = Vec::new();
        for d in dirs {
            let path = d.join(segment_name(seq_first));
            let copy = match open_copy(&path, !read_only)? {
                Some(c) => c,
                None if read_only => {
                    // Stands for the missing file: reads as empty.
                    let file = File::open(d).or_else(|_| File::open("/dev/null")).map_err(io_err(&path))?;
                    SegmentCopy { path, file, len: 0 }
                }
                None => {
                    let file = OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create_new(true)
                        .open(&path)
                        .map_err(io_err(&path))?;
                    sync_dir(d)?;
                    SegmentCopy { path, file, len: 0 }
                }
            };
            copies.push(copy);
        }
        end = scan.segment(seq_first, &copies, k + 1 == names.len())?;
    }
    Ok(Checked { scan, names, end })
}

/// Epoch and timestamp of the last entry of the frame at `(path, offset)`.
fn last_entry_of(path: &Path, offset: u64) -> Result<Option<Entry>, JournalError> {
    let file = File::open(path).map_err(io_err(path))?;
    let len = file.metadata().map_err(io_err(path))?.len();
    let mut buf = Vec::new();
    read_frame(&file, len, offset, &mut buf).map_err(io_err(path))?;
    let mut entries = Vec::new();
    codec::decode_frame(&buf, &mut entries).map_err(|e| JournalError::Corrupt {
        path: path.to_path_buf(),
        offset,
        seqs: "the last frame".into(),
        reason: e.to_string(),
        advice: ADVICE_NO_MIRROR.into(),
    })?;
    Ok(entries.pop())
}

fn tail_of(checked: &Checked, truncated_bytes: u64) -> Result<JournalTail, JournalError> {
    let s = &checked.scan;
    let last = match &s.last_frame {
        Some((path, offset)) => last_entry_of(path, *offset)?,
        None => None,
    };
    Ok(JournalTail {
        seq_last: s.seq_next - 1,
        epoch_last: last.as_ref().map_or(0, |e| e.epoch),
        timestamp_last_us: last.as_ref().map_or(0, |e| e.timestamp_us),
        // A journal written before durable marks existed: everything valid counts as durable.
        seq_durable: if s.seq_durable == 0 { s.seq_next - 1 } else { s.seq_durable.min(s.seq_next - 1) },
        durable_bytes: match checked.names.last() {
            Some(last) if *last == s.durable_end.0 => s.durable_end.1,
            _ => 0,
        },
        truncated_bytes,
        segments: checked.names.len(),
        repaired_frames: s.repaired_frames,
        repaired_bytes: s.repaired_bytes,
        repairs: s.repairs.clone(),
    })
}

/// What [`inspect`] found: what opening would report, and which file of each segment a
/// read-only replay can use (`None` if a segment needs frames of both copies).
#[derive(Clone, Debug)]
pub struct Inspection {
    pub tail: JournalTail,
    pub replay: Option<Vec<(Seq, PathBuf)>>,
}

/// Runs every check [`Journal::open`] runs, reading only: nothing is created, repaired or cut
/// (`rtgs verify`). Corruption is the same error opening would give.
pub fn inspect(dir: &Path, mirror: Option<&Path>) -> Result<Inspection, JournalError> {
    let mut dirs = vec![dir.to_path_buf()];
    dirs.extend(mirror.map(Path::to_path_buf));
    let checked = check_copies(&dirs, true)?;
    let torn = match checked.end {
        SegmentEnd::Torn(at) => dirs
            .iter()
            .filter_map(|d| fs::metadata(d.join(segment_name(*checked.names.last()?))).ok())
            .map(|m| m.len().saturating_sub(at))
            .next()
            .unwrap_or(0),
        SegmentEnd::Clean(_) => 0,
    };
    let tail = tail_of(&checked, torn)?;
    let replay = checked
        .scan
        .clean
        .iter()
        .map(|(seq, clean)| clean.iter().position(|c| *c).map(|i| (*seq, dirs[i].join(segment_name(*seq)))))
        .collect();
    Ok(Inspection { tail, replay })
}

// ---- writing ----

/// The writing side. One per journal directory (and its mirror).
pub struct Journal {
    /// The journal directory, then the mirror's.
    dirs: Vec<PathBuf>,
    /// The current segment in each copy.
    files: Vec<(File, PathBuf)>,
    /// Where the next frame goes in the current segment (its frames end here).
    segment_bytes: u64,
    /// How far every copy of the current segment exists: zeros from `segment_bytes` to here.
    prepared: u64,
    segment_bytes_max: u64,
    /// Appended (not necessarily durable).
    seq_last: Seq,
    /// Made durable by the last `fdatasync`.
    seq_synced: Seq,
    /// Covered by the last mark appended.
    seq_mark_appended: Seq,
    /// Covered by a durable mark: may be published.
    seq_marked: Seq,
    /// How long each `sync` took.
    sync_times: SyncTimes,
}

/// How long the journal's `fdatasync`s took: one sample per [`Journal::sync`] call (a group's, a
/// mark's, a rotation's; with a mirror, both copies' syncs together), in microseconds. The first
/// thing to look at when the latency is worse than the disk should allow: one sync that takes
/// 10 ms holds up every batch behind it (`bench/disk-check.sh` tells whether it is the disk).
#[derive(Clone, Debug)]
pub struct SyncTimes {
    histogram: hdrhistogram::Histogram<u64>,
    /// Every sync's time added up, µs (exact, unlike the histogram's buckets).
    total_us: u64,
}

/// The longest sync the histogram tells apart (longer ones count as this long).
const SYNC_TIME_MAX_US: u64 = 60_000_000;

impl Default for SyncTimes {
    fn default() -> Self {
        // Bounds 1..=60 s at 2 significant digits: `new_with_bounds` refuses only low < 1,
        // high < 2 * low or more than 5 digits.
        let histogram = match hdrhistogram::Histogram::new_with_bounds(1, SYNC_TIME_MAX_US, 2) {
            Ok(h) => h,
            Err(_) => unreachable!("valid histogram bounds"),
        };
        SyncTimes { histogram, total_us: 0 }
    }
}

impl SyncTimes {
    fn record(&mut self, us: u64) {
        self.histogram.saturating_record(us.clamp(1, SYNC_TIME_MAX_US));
        self.total_us = self.total_us.saturating_add(us);
    }

    /// All syncs' time added up, µs.
    pub fn total_us(&self) -> u64 {
        self.total_us
    }

    /// Syncs recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The duration at quantile `q` (0..=1), µs; 0 with no sync recorded.
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.histogram.is_empty() {
            0
        } else {
            self.histogram.value_at_quantile(q)
        }
    }

    /// The longest sync, µs (0 with none).
    pub fn max_us(&self) -> u64 {
        if self.histogram.is_empty() {
            0
        } else {
            self.histogram.max()
        }
    }

    /// Syncs that took longer than `limit_us`.
    pub fn over_us(&self, limit_us: u64) -> u64 {
        if limit_us >= SYNC_TIME_MAX_US {
            return 0;
        }
        self.histogram.count_between(self.histogram.highest_equivalent(limit_us) + 1, SYNC_TIME_MAX_US)
    }
}

impl Journal {
    /// Opens (or creates) the journal in `dir` without a mirror, cutting off a torn tail.
    pub fn open(dir: &Path, segment_bytes_max: u64) -> Result<(Journal, JournalTail), JournalError> {
        Self::open_with(dir, &JournalOpen::new(segment_bytes_max))
    }

    /// Opens (or creates) the journal: checks every frame, repairs one copy from the other,
    /// cuts a torn tail (never below `seq_floor`), refuses corruption; then makes everything
    /// kept durable and marks it.
    pub fn open_with(dir: &Path, options: &JournalOpen) -> Result<(Journal, JournalTail), JournalError> {
        let mut dirs = vec![dir.to_path_buf()];
        dirs.extend(options.mirror.clone());
        for d in &dirs {
            fs::create_dir_all(d).map_err(io_err(d))?;
        }
        let mut checked = check_copies(&dirs, false)?;
        if checked.names.is_empty() {
            for d in &dirs {
                let path = d.join(segment_name(1));
                File::create(&path).map_err(io_err(&path))?;
                sync_dir(d)?;
            }
            checked.names.push(1);
        }
        let seq_first = *checked.names.last().unwrap_or(&1);
        let (end, torn) = match checked.end {
            SegmentEnd::Clean(at) => (at, false),
            SegmentEnd::Torn(at) => (at, true),
        };
        let seq_last = checked.scan.seq_next - 1;
        let mut truncated_bytes = 0;
        if torn {
            let path = dirs[0].join(segment_name(seq_first));
            if seq_last < options.seq_floor {
                return Err(JournalError::BelowFloor {
                    path,
                    offset: end,
                    seq_last,
                    seq_floor: options.seq_floor,
                    advice: if dirs.len() > 1 { ADVICE_BOTH } else { ADVICE_NO_MIRROR }.into(),
                });
            }
            for d in &dirs {
                let path = d.join(segment_name(seq_first));
                let f = OpenOptions::new().read(true).write(true).open(&path).map_err(io_err(&path))?;
                let len = f.metadata().map_err(io_err(&path))?.len();
                if len > end {
                    truncated_bytes = truncated_bytes.max(len - end);
                    f.set_len(end).map_err(io_err(&path))?;
                    f.sync_all().map_err(io_err(&path))?;
                }
            }
        }
        let tail = tail_of(&checked, truncated_bytes)?;
        let mut files = Vec::new();
        // Past `end` every copy holds zeros (checked) or nothing (cut).
        let mut prepared = u64::MAX;
        for d in &dirs {
            let path = d.join(segment_name(seq_first));
            let f = OpenOptions::new().write(true).open(&path).map_err(io_err(&path))?;
            prepared = prepared.min(f.metadata().map_err(io_err(&path))?.len().max(end));
            files.push((f, path));
        }
        let mut journal = Journal {
            dirs,
            files,
            segment_bytes: end,
            prepared,
            segment_bytes_max: options.segment_bytes_max,
            seq_last,
            // Whatever is on disk now is made durable by the seal below (repairs included).
            seq_synced: seq_last,
            seq_mark_appended: checked.scan.seq_durable,
            seq_marked: checked.scan.seq_durable,
            sync_times: SyncTimes::default(),
        };
        journal.seal()?;
        Ok((journal, tail))
    }

    pub fn seq_last(&self) -> Seq {
        self.seq_last
    }

    /// How long this journal's syncs took since it was opened (the open's own seal included).
    pub fn sync_times(&self) -> &SyncTimes {
        &self.sync_times
    }

    /// The last seq a durable mark covers: what may be published.
    pub fn seq_marked(&self) -> Seq {
        self.seq_marked
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), JournalError> {
        let at = self.segment_bytes;
        for (f, path) in &self.files {
            f.write_all_at(bytes, at).map_err(io_err(path))?;
        }
        self.segment_bytes += bytes.len() as u64;
        self.zero_ahead(bytes.len() as u64)
    }

    /// Keeps up to [`JOURNAL_ZERO_AHEAD_BYTES`] of zeros written past the frames (and within the
    /// segment's size), topped up a step at a time: once a step of them is used, the next write
    /// adds `max(n, ZERO_STEP_BYTES)` (`n`: its own size). So the file's size changes with one
    /// sync in many (each change is a commit in ext4's journal), and no sync carries more than
    /// a step of zeros beside the frames: a 2 MiB top-up at once made its sync take 1.0–4.9 ms
    /// here against a p99 of 0.2 ms for the others.
    fn zero_ahead(&mut self, n: u64) -> Result<(), JournalError> {
        let step = ZERO_STEP_BYTES as u64;
        let from = self.prepared.max(self.segment_bytes);
        let target = self.segment_bytes + JOURNAL_ZERO_AHEAD_BYTES;
        let want = target.min(self.segment_bytes_max);
        // Full, or less than a step used (near the segment's size: its last stretch at once).
        if from >= want || (want == target && from + step > target) {
            return Ok(());
        }
        let until = want.min(from + n.max(step));
        // Written from one static stretch as often as it takes: no buffer to allocate and fault in.
        static ZEROS: [u8; ZERO_STEP_BYTES] = [0; ZERO_STEP_BYTES];
        let mut at = from;
        while at < until {
            let k = (until - at).min(ZEROS.len() as u64);
            for (f, path) in &self.files {
                f.write_all_at(&ZEROS[..k as usize], at).map_err(io_err(path))?;
            }
            at += k;
        }
        self.prepared = until;
        Ok(())
    }

    /// Cuts the zeros past the frames of the current segment (not synced: zeros or nothing,
    /// both read as the end).
    fn trim(&mut self) -> Result<(), JournalError> {
        if self.prepared > self.segment_bytes {
            for (f, path) in &self.files {
                f.set_len(self.segment_bytes).map_err(io_err(path))?;
            }
            self.prepared = self.segment_bytes;
        }
        Ok(())
    }

    /// Appends a mark covering everything synced, if that is everything appended and not yet
    /// covered (durable with the next `fdatasync`).
    fn append_mark_if_due(&mut self) -> Result<(), JournalError> {
        if self.seq_synced == self.seq_last && self.seq_synced > self.seq_mark_appended {
            let mut mark = Vec::with_capacity(MARK_FRAME_BYTES);
            codec::encode_mark(
                DurableMark { seq_last: self.seq_synced, offset: self.segment_bytes },
                &mut mark,
            );
            self.write(&mark)?;
            self.seq_mark_appended = self.seq_synced;
        }
        Ok(())
    }

    /// Appends whole frames holding seqs `seq_first..=seq_last` (not yet durable: call `sync`).
    /// The first append after a sync starts with the durable mark of what that sync covered.
    pub fn append(&mut self, frames: &[u8], seq_first: Seq, seq_last: Seq) -> Result<(), JournalError> {
        assert_eq!(seq_first, self.seq_last + 1, "journal append out of order");
        assert!(seq_last >= seq_first);
        if self.segment_bytes >= self.segment_bytes_max {
            self.rotate(seq_first)?;
        }
        self.append_mark_if_due()?;
        self.write(frames)?;
        self.seq_last = seq_last;
        Ok(())
    }

    /// Makes everything appended so far durable (in every copy). Returns the last seq a durable
    /// mark now covers — the mark appended since the previous sync: batches up to it may be
    /// published; the ones just synced wait for the next mark.
    pub fn sync(&mut self) -> Result<Seq, JournalError> {
        let started = std::time::Instant::now();
        for (f, path) in &self.files {
            f.sync_data().map_err(io_err(path))?;
        }
        self.sync_times.record(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
        self.seq_synced = self.seq_last;
        self.seq_marked = self.seq_mark_appended;
        Ok(self.seq_marked)
    }

    /// Makes everything appended durable and covered by a durable mark (two `fdatasync`s at
    /// most): the writer calls it when nothing else is waiting. Returns `seq_last`.
    pub fn seal(&mut self) -> Result<Seq, JournalError> {
        if self.seq_synced < self.seq_last {
            self.sync()?;
        }
        if self.seq_marked < self.seq_synced {
            self.append_mark_if_due()?;
            self.sync()?;
        }
        Ok(self.seq_marked)
    }

    fn rotate(&mut self, seq_first: Seq) -> Result<(), JournalError> {
        // A sealed segment ends with a durable mark over all of it.
        self.seal()?;
        self.trim()?;
        let mut files = Vec::new();
        for d in &self.dirs {
            let path = d.join(segment_name(seq_first));
            let f = OpenOptions::new().create_new(true).write(true).open(&path).map_err(io_err(&path))?;
            sync_dir(d)?;
            files.push((f, path));
        }
        self.files = files;
        self.segment_bytes = 0;
        self.prepared = 0;
        Ok(())
    }
}

impl Drop for Journal {
    /// A closed journal ends with its frames, as if it had been appended to without zeros ahead.
    fn drop(&mut self) {
        let _ = self.trim();
    }
}

// ---- reading ----

/// Reads entries back in seq order from a given seq (restart replay, gap pulls, audits). Skips
/// durable marks. Reads what is whole; a partial frame at the end of the last segment is the
/// writer's unsynced tail and ends the reading, as do zeros where a frame would start (the
/// writer's zeros ahead) in any segment.
pub struct JournalReader {
    segments: Vec<(Seq, PathBuf)>,
    next_segment: usize,
    file: Option<(File, PathBuf)>,
    buf: Vec<u8>,
    at: usize,
    /// File offset of `buf[0]`.
    buf_offset: u64,
    seq_next: Seq,
    /// Stop after this seq (an audit of a journal whose torn tail is still on disk).
    seq_until: Seq,
    eof: bool,
}

const READ_CHUNK_BYTES: usize = 4 << 20;

impl JournalReader {
    pub fn open(dir: &Path, seq_from: Seq) -> Result<JournalReader, JournalError> {
        Self::open_segments(segments(dir)?, seq_from, Seq::MAX)
    }

    /// Reads these segment files (e.g. some from a mirror) from `seq_from` through `seq_until`.
    pub fn open_segments(
        segments: Vec<(Seq, PathBuf)>,
        seq_from: Seq,
        seq_until: Seq,
    ) -> Result<JournalReader, JournalError> {
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
            buf_offset: 0,
            seq_next: seq_from.max(1),
            seq_until,
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
            buf_offset: 0,
            seq_next: seq_from,
            seq_until: Seq::MAX,
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

    fn path(&self) -> PathBuf {
        self.file.as_ref().map(|(_, p)| p.clone()).unwrap_or_default()
    }

    fn next_frame(&mut self, out: &mut Vec<Entry>) -> Result<bool, JournalError> {
        loop {
            if self.eof || self.seq_next > self.seq_until {
                return Ok(false);
            }
            if self.buf.get(self.at..self.at + FRAME_HEADER_BYTES) == Some(&[0u8; FRAME_HEADER_BYTES]) {
                // The writer's zeros ahead: this segment's frames end here.
                self.file = None;
                self.buf.clear();
                self.at = 0;
                self.fill()?;
                continue;
            }
            let mut frame = Vec::new();
            match codec::decode_journal_frame(&self.buf[self.at..], &mut frame) {
                Ok(Some((n, mark))) => {
                    self.at += n;
                    if mark.is_some() {
                        continue;
                    }
                    for e in frame {
                        if e.seq < self.seq_next || e.seq > self.seq_until {
                            continue;
                        }
                        if e.seq != self.seq_next {
                            return Err(JournalError::Discontinuity {
                                path: self.path(),
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
                Err(e) => match self.frame_in_progress()? {
                    InProgress::Yes => {
                        // The writer's frame, not yet whole (over its zeros ahead): the end, for now.
                        self.file = None;
                        self.buf.clear();
                        self.at = 0;
                        self.fill()?;
                    }
                    InProgress::Finished => {}
                    InProgress::No => {
                        return Err(JournalError::Corrupt {
                            path: self.path(),
                            offset: self.buf_offset + self.at as u64,
                            seqs: format!("at seq {}", self.seq_next),
                            reason: e.to_string(),
                            advice: ADVICE_NO_MIRROR.into(),
                        })
                    }
                },
            }
        }
    }

    /// Whether the bad frame at `at` is one the writer is still writing over its zeros ahead
    /// (a tailing reader meets it; damage does not look like it): nothing is written after the
    /// frame's end, and reading it again still finds it bad. (Checked in that order: a frame
    /// finished in between reads whole the second time, and is read as such.)
    fn frame_in_progress(&mut self) -> Result<InProgress, JournalError> {
        let Some((file, path)) = self.file.as_ref() else {
            return Ok(InProgress::No);
        };
        let rest = &self.buf[self.at..];
        let Some(len) = rest.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])) else {
            return Ok(InProgress::No);
        };
        let total = FRAME_HEADER_BYTES + len as usize;
        let at = self.buf_offset + self.at as u64;
        let end = at + total as u64;
        let file_len = file.metadata().map_err(io_err(path))?.len();
        if rest.len() < total
            || end > file_len
            || written_end(file, end, file_len).map_err(io_err(path))? > end
        {
            return Ok(InProgress::No);
        }
        let mut again = vec![0u8; total];
        file.read_exact_at(&mut again, at).map_err(io_err(path))?;
        if codec::check(&again).is_ok() {
            // Finished meanwhile: the whole frame, as it is now.
            self.buf[self.at..self.at + total].copy_from_slice(&again);
            return Ok(InProgress::Finished);
        }
        Ok(InProgress::Yes)
    }

    /// Reads more of the current segment, or moves to the next one.
    fn fill(&mut self) -> Result<(), JournalError> {
        self.buf.drain(..self.at);
        self.buf_offset += self.at as u64;
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
                self.buf_offset = 0;
                self.next_segment += 1;
            }
            None => self.eof = true,
        }
        Ok(())
    }
}

/// What a bad frame met by a [`JournalReader`] is.
enum InProgress {
    /// The writer's, not yet whole.
    Yes,
    /// Whole by now (read again into the buffer).
    Finished,
    /// Damage.
    No,
}

/// Fetches single entries by seq (the `bmi` index confirming an old `bmi`): finds the frame by
/// hopping from frame header to frame header, remembering every frame it passed (a few
/// thousand per segment, 24 bytes each), then checks that frame and parses it only as far as the
/// entry. For rare look-ups, not for replay.
pub struct EntryReader {
    dir: PathBuf,
    segments: Vec<SegmentFrames>,
}

/// What an [`EntryReader`] learnt of one segment.
struct SegmentFrames {
    seq_first: Seq,
    path: PathBuf,
    file: File,
    /// `(first seq, entries, offset)` of each entries frame passed so far, in order.
    frames: Vec<(Seq, u64, u64)>,
    /// Where the hop stopped (the next frame header, or the end of what was written).
    hopped_to: u64,
}

impl SegmentFrames {
    /// Hops on until the frame holding `seq` is known (or the segment's written end).
    fn hop_to(&mut self, seq: Seq) -> Result<(), JournalError> {
        let len = self.file.metadata().map_err(io_err(&self.path))?.len();
        let mut head = [0u8; FRAME_HEADER_BYTES + 13];
        while self.frames.last().is_none_or(|&(first, count, _)| first + count <= seq)
            && self.hopped_to + head.len() as u64 <= len
        {
            let at = self.hopped_to;
            self.file.read_exact_at(&mut head, at).map_err(io_err(&self.path))?;
            let body_len = u64::from(u32::from_le_bytes([head[0], head[1], head[2], head[3]]));
            if body_len == 0 {
                // The writer's zeros ahead: written up to here (so far).
                break;
            }
            if head[FRAME_HEADER_BYTES] == 1 {
                let c = &head[FRAME_HEADER_BYTES + 1..FRAME_HEADER_BYTES + 5];
                let f = &head[FRAME_HEADER_BYTES + 5..];
                let count = u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                let first = u64::from_le_bytes([f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]]);
                self.frames.push((first, count, at));
            }
            self.hopped_to = at + FRAME_HEADER_BYTES as u64 + body_len;
        }
        Ok(())
    }
}

impl EntryReader {
    pub fn new(dir: &Path) -> EntryReader {
        EntryReader { dir: dir.to_path_buf(), segments: Vec::new() }
    }

    /// The entry at `seq`, if the journal holds it.
    pub fn read(&mut self, seq: Seq) -> Result<Option<Entry>, JournalError> {
        if self.segments.last().is_none_or(|s| s.seq_first <= seq) {
            // A segment may have been added since.
            for (seq_first, path) in segments(&self.dir)? {
                if self.segments.iter().all(|s| s.seq_first != seq_first) {
                    let file = File::open(&path).map_err(io_err(&path))?;
                    self.segments.push(SegmentFrames {
                        seq_first,
                        path,
                        file,
                        frames: Vec::new(),
                        hopped_to: 0,
                    });
                }
            }
            self.segments.sort_by_key(|s| s.seq_first);
        }
        let Some(seg) = self.segments.iter_mut().rev().find(|s| s.seq_first <= seq) else {
            return Ok(None);
        };
        seg.hop_to(seq)?;
        let k = seg.frames.partition_point(|&(first, _, _)| first <= seq);
        let Some(&(first, count, at)) = k.checked_sub(1).and_then(|k| seg.frames.get(k)) else {
            return Ok(None);
        };
        if seq >= first + count {
            return Ok(None);
        }
        let len = seg.file.metadata().map_err(io_err(&seg.path))?.len();
        let mut frame = Vec::new();
        let found = read_frame(&seg.file, len, at, &mut frame).map_err(io_err(&seg.path))?;
        let entry = match found {
            Found::Entries { .. } => codec::decode_frame_entry(&frame, seq).map_err(|e| e.to_string()),
            other => Err(other.describe()),
        };
        entry.map_err(|reason| JournalError::Corrupt {
            path: seg.path.clone(),
            offset: at,
            seqs: format!("seqs {first}..{}", first + count),
            reason,
            advice: ADVICE_NO_MIRROR.into(),
        })
    }
}

#[cfg(test)]
mod tests;
