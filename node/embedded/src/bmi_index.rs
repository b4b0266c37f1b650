//! The embedded engine's index of every `bmi` ever sequenced: the driver side of the core
//! sequencer's dedupe (`rtgs_core::sequencer`: the sequencer decides, the driver remembers).
//!
//! The sequencer thread calls [`BmiIndex::resolve`] for a batch before it is sequenced and
//! [`BmiIndex::record`] with what was sequenced. Inside, newest first:
//!
//! * **Lookup key**: SipHash-1-3 of the `bmi` under a random key kept in `bmi-index/KEY`, so no
//!   outsider can make `bmi`s collide or hit the filter on purpose. Keys only find candidates:
//!   equality is always decided on the `bmi` bytes, and the content is compared by the core.
//! * **Filter** over every key ever recorded: split-block Bloom filters, one cache line per
//!   look-up, each generation twice the size of the one before (the first at 16 bits per key,
//!   false positives ≈ 10⁻³; later ones at 10, ≈ 10⁻²), each knowing the seqs of its keys. A
//!   negative — nearly every new `bmi` — ends the look-up: no map, no disk; a positive searches
//!   only the runs of the seqs of the generations that said yes.
//! * **Recent**: two generations of [`BmiIndexConfig::recent_entries`] entries held exactly in
//!   memory (`bmi` bytes, seq, content): retries of recent payments need no I/O, and entries the
//!   journal writer has not appended yet are only here.
//! * **Runs**: when the current generation is full, the previous one becomes a sorted run of
//!   `(key, seq)` pairs (16 bytes), written by a background thread to
//!   `bmi-index/run-FROM-THROUGH.bmi` (header with a CRC of the records) and merged with its
//!   neighbours by another, [`BmiIndexConfig::merge_fanout`] runs of one tier into one of the
//!   next, to keep the runs few. In memory per run: the first key of every 4 KiB block. A key found in a run is
//!   checked against the journal: the entry at that seq is read back ([`EntryReader`])
//!   and must carry the same `bmi`; its payload is the content the retry is compared with.
//!
//! Everything here is derived from the journal: a run that is missing, torn or written under
//! another key is deleted and rebuilt from the journal at open, and the journal after the last
//! run is replayed into the recent generations. Opening reads every run once (CRC, fences,
//! filter): ≈ 16 bytes per `bmi` ever sequenced.

use crate::journal::{EntryReader, JournalError, JournalReader};
use crate::limits::{
    BMI_FILTER_BITS_FIRST, BMI_FILTER_BITS_LATER, BMI_FILTER_KEYS_FIRST, BMI_MERGE_FANOUT,
    BMI_RECENT_ENTRIES, BMI_RUN_BLOCK_RECORDS,
};
use crossbeam_channel::{bounded, Receiver, Sender};
use rtgs_core::entry::{Bmi, Command, Entry, Seq};
use rtgs_core::hash::siphash13;
use rtgs_core::hint::prefetch;
use rtgs_core::sequencer::{Known, Lookup};
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

#[derive(Debug, thiserror::Error)]
pub enum BmiIndexError {
    #[error("bmi index I/O on {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("bmi index: {0}")]
    Broken(String),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> BmiIndexError + '_ {
    move |source| BmiIndexError::Io { path: path.to_path_buf(), source }
}

/// Sizes of the index (defaults in `limits`; tests shrink them to reach the disk quickly).
#[derive(Clone, Copy, Debug)]
pub struct BmiIndexConfig {
    /// `bmi`s per recent generation; two generations are kept exactly in memory.
    pub recent_entries: usize,
    /// Keys the first filter generation holds (16 bits each); each later one holds twice as many.
    pub filter_keys_first: usize,
    /// Runs of one tier merged into one run of the next tier.
    pub merge_fanout: usize,
}

impl Default for BmiIndexConfig {
    fn default() -> Self {
        BmiIndexConfig {
            recent_entries: BMI_RECENT_ENTRIES,
            filter_keys_first: BMI_FILTER_KEYS_FIRST,
            merge_fanout: BMI_MERGE_FANOUT,
        }
    }
}

/// What the index did (figures only; nothing reads them back to decide).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BmiIndexStats {
    pub lookups: u64,
    /// Lookups the filter did not rule out.
    pub filter_positives: u64,
    pub recent_hits: u64,
    /// Found in a run (and confirmed by the journal).
    pub old_hits: u64,
    /// Entries read back from the journal to confirm a run's candidate.
    pub journal_reads: u64,
    pub run_block_reads: u64,
    pub runs: u64,
    pub run_entries: u64,
    pub merges: u64,
    pub filter_generations: u64,
    pub filter_bytes: u64,
    /// Runs found damaged, stale or under another key at open (deleted, rebuilt from the journal).
    pub runs_discarded: u64,
    /// Journal entries replayed into the recent generations at open.
    pub replayed_at_open: u64,
}

// ---- tables probed at random ----

/// Types whose all-zero bytes are a valid value (the "empty" one of a table).
///
/// # Safety
/// Implementors must be plain data for which every byte being zero is a valid value.
unsafe trait Zeroable: Copy {}
// SAFETY: an integer is valid all-zero.
unsafe impl Zeroable for u64 {}

/// A zeroed array (2 MiB-aligned when that large), probed at random.
///
/// Huge pages only for a table made while the index opens ([`Table::resident`]): every probe of
/// a 4 KiB-paged table of tens of MiB misses the TLB (the filter's prefetch was ≈ 5 % of all
/// samples of the 10 M demo, waiting for page walks), and 2 MiB pages take that away — but the
/// first write into each 2 MiB page zeroes all of it in one fault (up to ≈ 10 ms on a VM,
/// measured as the sequencer's longest stalls at 100,000/s when every table was huge). So a
/// resident table is advised huge and touched page by page at open, before any batch; a table
/// made later (a later filter generation, a recent generation's when no spare is left) stays
/// on 4 KiB pages faulted one at a time. The binary keeps huge pages off everywhere else
/// ([`huge_pages_where_advised`]).
struct Table<T: Zeroable> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
}

const HUGE_PAGE_BYTES: usize = 2 << 20;
const PAGE_BYTES: usize = 4096;

/// Lets this process use transparent huge pages only where it advises them (`MADV_HUGEPAGE`:
/// the `bmi` index's resident tables), none elsewhere: `prctl(PR_SET_THP_DISABLE, 1,
/// PR_THP_DISABLE_EXCEPT_ADVISED)`, Linux ≥ 6.18. The binary calls it first thing, after its
/// allocator turned huge pages off for the whole process (mimalloc's `no_thp`). `false` where
/// the kernel refuses (older kernels): everything stays on 4 KiB pages, as before — slower
/// look-ups, nothing else.
pub fn huge_pages_where_advised() -> bool {
    const PR_THP_DISABLE_EXCEPT_ADVISED: libc::c_ulong = 1 << 1;
    // SAFETY: a prctl that changes only this process's page policy; no memory is passed.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1 as libc::c_ulong, PR_THP_DISABLE_EXCEPT_ADVISED, 0, 0) == 0
    }
}

impl<T: Zeroable> Table<T> {
    fn zeroed(len: usize) -> Table<T> {
        let len = len.max(1);
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size (len ≥ 1, T is no ZST).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(ptr) = std::ptr::NonNull::new(raw.cast::<T>()) else {
            std::alloc::handle_alloc_error(layout);
        };
        Table { ptr, len }
    }

    /// A zeroed table for the index's whole life, made while it opens: advised huge (when 2 MiB
    /// or more) and every page touched now, so no look-up ever waits for a fault of it.
    fn resident(len: usize) -> Table<T> {
        let table = Self::zeroed(len);
        let bytes = Self::layout(table.len).size();
        let base = table.ptr.as_ptr().cast::<u8>();
        if bytes >= HUGE_PAGE_BYTES {
            // SAFETY: advice on memory this table owns (2 MiB-aligned, `bytes` long); a refusal
            // leaves it on 4 KiB pages.
            let _ = unsafe { libc::madvise(base.cast(), bytes, libc::MADV_HUGEPAGE) };
        }
        for offset in (0..bytes).step_by(PAGE_BYTES) {
            // SAFETY: inside the allocation; writing a zero byte keeps every value zero (valid,
            // `Zeroable`). Volatile: the write must fault the page in now.
            unsafe { base.add(offset).write_volatile(0) };
        }
        table
    }

    fn layout(len: usize) -> std::alloc::Layout {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).unwrap_or(usize::MAX / 2);
        let align = if bytes >= HUGE_PAGE_BYTES { HUGE_PAGE_BYTES } else { std::mem::align_of::<T>() };
        match std::alloc::Layout::from_size_align(bytes.max(1), align) {
            Ok(l) => l,
            Err(_) => panic!("a bmi index table of {len} entries cannot be allocated"),
        }
    }
}

impl<T: Zeroable> std::ops::Deref for Table<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised (zeroed, then written) values for our lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> std::ops::DerefMut for Table<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> Drop for Table<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this very layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), Self::layout(self.len)) }
    }
}

// SAFETY: a `Table` owns its memory like a `Vec` does.
unsafe impl<T: Zeroable + Send> Send for Table<T> {}
// SAFETY: shared access is read-only, like a `Vec`'s.
unsafe impl<T: Zeroable + Sync> Sync for Table<T> {}

// ---- the filter ----

/// One filter generation: a split-block Bloom filter (as Parquet's): blocks of eight 64-bit
/// words, one cache line; a key sets one bit in every word of one block. One line per look-up
/// or insert (a cuckoo filter of 16-bit tags, tried first, lies 8× less often but reads two
/// lines: the second line cost more than the extra false positives). It also knows the seqs of
/// the `bmi`s in it, so that a positive searches only the runs that hold those seqs.
struct BloomGeneration {
    words: Table<u64>,
    blocks: usize,
    count: usize,
    capacity: usize,
    /// Every key in it belongs to an entry of these seqs (empty: `from > through`).
    seq_from: Seq,
    seq_through: Seq,
}

impl BloomGeneration {
    fn new(capacity: usize, bits_per_key: usize, resident: bool) -> Self {
        let blocks = (capacity * bits_per_key / 512).max(1);
        BloomGeneration {
            words: if resident { Table::resident(blocks * 8) } else { Table::zeroed(blocks * 8) },
            blocks,
            count: 0,
            capacity,
            seq_from: Seq::MAX,
            seq_through: 0,
        }
    }

    /// The block (from the key's high bits) and the bit in each of its words (from a mix of it).
    fn place(&self, key: u64) -> (usize, u64) {
        let block = ((u128::from(key) * self.blocks as u128) >> 64) as usize;
        (block * 8, rtgs_core::hash::mix64(key))
    }

    fn contains(&self, key: u64) -> bool {
        let (base, h) = self.place(key);
        let block = &self.words[base..base + 8];
        block.iter().enumerate().all(|(w, word)| word & (1 << ((h >> (6 * w)) & 63)) != 0)
    }

    fn insert(&mut self, key: u64) {
        let (base, h) = self.place(key);
        for (w, word) in self.words[base..base + 8].iter_mut().enumerate() {
            *word |= 1 << ((h >> (6 * w)) & 63);
        }
        self.count += 1;
    }

    fn prefetch(&self, key: u64) {
        prefetch(self.words.as_ptr().wrapping_add(self.place(key).0));
    }
}

/// The filter: generations, each holding twice the keys of the one before; inserts go to the
/// newest, a look-up asks every one. The first generation has the most bits per key (it is all
/// a young ledger has, and its false positives cost the hot path); later ones have fewer, and
/// their false positives search only the runs of their seqs (152 MiB at 100 M `bmi`s).
struct Filter {
    generations: Vec<BloomGeneration>,
    /// Whether a new generation is made [`Table::resident`]: while the index opens, not after.
    opening: bool,
}

impl Filter {
    fn new(keys_first: usize) -> Self {
        let first = BloomGeneration::new(keys_first.max(64), BMI_FILTER_BITS_FIRST, true);
        Filter { generations: vec![first], opening: true }
    }

    fn contains(&self, key: u64) -> bool {
        self.generations.iter().any(|g| g.contains(key))
    }

    /// The seq ranges of the generations that may hold `key`.
    fn matching(&self, key: u64, out: &mut Vec<(Seq, Seq)>) {
        out.clear();
        out.extend(self.generations.iter().filter(|g| g.contains(key)).map(|g| (g.seq_from, g.seq_through)));
    }

    fn prefetch(&self, key: u64) {
        for g in &self.generations {
            g.prefetch(key);
        }
    }

    /// The newest generation (inserts go there; the number only grows).
    fn newest(&self) -> usize {
        self.generations.len() - 1
    }

    fn insert(&mut self, key: u64) {
        if let Some(full) = self.generations.last().filter(|g| g.count >= g.capacity).map(|g| g.capacity) {
            self.generations.push(BloomGeneration::new(full * 2, BMI_FILTER_BITS_LATER, self.opening));
        }
        if let Some(g) = self.generations.last_mut() {
            g.insert(key);
        }
    }

    /// Keys inserted since generation `since` was the newest belong to entries of seqs
    /// `from..=through`: every generation from `since` on may hold some of them.
    fn cover(&mut self, since: usize, from: Seq, through: Seq) {
        for g in self.generations.iter_mut().skip(since) {
            g.seq_from = g.seq_from.min(from);
            g.seq_through = g.seq_through.max(through);
        }
    }

    fn bytes(&self) -> u64 {
        self.generations.iter().map(|g| g.words.len() as u64 * 8).sum()
    }
}

// ---- recent generations ----

/// How many commands ahead the look-ups prefetch (`rtgs_core::hint::prefetch`): look-ups of a
/// batch are issued a few commands ahead, so their cache and TLB misses overlap instead of
/// queueing one by one.
const PREFETCH_AHEAD: usize = 16;

/// An index slot: the key's high 32 bits (the slot's place comes from its low bits) and the
/// position + 1 (never 0: 0 is an empty slot) of its entry or record.
fn slot(key: u64, position: usize) -> u64 {
    // Wrapped, a position would name another entry: stop rather than answer a retry wrongly.
    assert!(position < u32::MAX as usize, "a bmi generation holds fewer than 2^32 entries");
    key & SLOT_KEY_BITS | (position as u64 + 1)
}

const SLOT_KEY_BITS: u64 = !0 << 32;

/// The position a slot names if its key half is `key`'s, else `None`; `Err` for an empty slot.
fn slot_position(slot: u64, key: u64) -> Result<Option<usize>, ()> {
    if slot == 0 {
        return Err(());
    }
    Ok(((slot ^ key) & SLOT_KEY_BITS == 0).then(|| (slot as u32) as usize - 1))
}

#[derive(Copy, Clone, Debug)]
struct Recent {
    bmi: Bmi,
    known: Known,
}

/// One generation of recent `bmi`s, exact: the entries in the order recorded, and an
/// open-addressing index of [`slot`]s (the key's high half and the entry's position + 1; 0:
/// empty; 8 bytes a slot, a quarter empty at the generation's size: 2 MiB) — small enough to stay
/// in cache, and it can be prefetched. A slot whose half matches is confirmed by the entry's own
/// key and `bmi` bytes; two `bmi`s that share a key sit in two slots.
struct Generation {
    index: Table<u64>,
    mask: usize,
    entries: Vec<(u64, Recent)>,
    /// The key and seq of each entry, beside it: the frozen generation's records, moved out at
    /// the rotation rather than gathered from ≈ 20 MiB of entries (≈ 2.6 ms of the sequencer's
    /// time at every rotation, measured) or from the index by the writer.
    records: Vec<(u64, Seq)>,
    seq_from: Seq,
    seq_through: Seq,
}

impl Generation {
    fn new(seq_from: Seq, entries_max: usize) -> Self {
        Self::reusing(seq_from, entries_max, Vec::new(), None)
    }

    /// A generation whose entries go into `buffer` (emptied; a frozen generation's, so that
    /// ≈ 20 MiB are not freed and allocated again at every rotation: a freed buffer lingers in
    /// the allocator, and the peak RSS with it).
    fn reusing(
        seq_from: Seq,
        entries_max: usize,
        mut buffer: Vec<(u64, Recent)>,
        spare: Option<Spare>,
    ) -> Self {
        let slots = Self::slots(entries_max);
        buffer.clear();
        buffer.reserve(entries_max);
        let (index, mut records) = match spare {
            Some((mut t, records)) if t.len() == slots => {
                t.fill(0);
                (t, records)
            }
            Some((_, records)) => (Table::zeroed(slots), records),
            None => (Table::zeroed(slots), Vec::new()),
        };
        records.clear();
        records.reserve(entries_max);
        Generation { index, mask: slots - 1, entries: buffer, records, seq_from, seq_through: seq_from - 1 }
    }

    /// Index slots for `entries_max` entries (a quarter empty, a power of two).
    fn slots(entries_max: usize) -> usize {
        (entries_max + entries_max / 3).next_power_of_two().max(2)
    }

    /// A [`Table::resident`] index for a generation of `entries_max` entries, made at open.
    fn resident_spare(entries_max: usize) -> Spare {
        (Table::resident(Self::slots(entries_max)), Vec::new())
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn prefetch(&self, key: u64) {
        prefetch(self.index.as_ptr().wrapping_add(key as usize & self.mask));
    }

    fn get(&self, key: u64, bmi: &Bmi) -> Option<Known> {
        let mut i = key as usize & self.mask;
        loop {
            match slot_position(self.index[i], key) {
                Err(()) => return None,
                Ok(Some(at)) => {
                    let (k, r) = &self.entries[at];
                    if *k == key && r.bmi == *bmi {
                        return Some(r.known);
                    }
                }
                Ok(None) => {}
            }
            i = (i + 1) & self.mask;
        }
    }

    fn insert(&mut self, key: u64, recent: Recent) {
        if (self.entries.len() + 1) * 8 > self.index.len() * 7 {
            // Grown past its size while the journal writer caught up (rare): a bigger index.
            self.grow();
        }
        let mut i = key as usize & self.mask;
        loop {
            match slot_position(self.index[i], key) {
                Err(()) => break,
                Ok(Some(at)) => {
                    let (k, r) = &self.entries[at];
                    if *k == key && r.bmi == recent.bmi {
                        // The first entry of a bmi is the one retries are answered with.
                        return;
                    }
                }
                Ok(None) => {}
            }
            i = (i + 1) & self.mask;
        }
        self.index[i] = slot(key, self.entries.len());
        self.entries.push((key, recent));
        self.records.push((key, recent.known.seq));
        self.seq_through = recent.known.seq;
    }

    fn grow(&mut self) {
        let slots = self.index.len() * 2;
        self.index = Table::zeroed(slots);
        self.mask = slots - 1;
        for (n, (key, _)) in self.entries.iter().enumerate() {
            let mut i = *key as usize & self.mask;
            while self.index[i] != 0 {
                i = (i + 1) & self.mask;
            }
            self.index[i] = slot(*key, n);
        }
    }

    /// The generation on its way to disk: its index and only the `(key, seq)` records (its
    /// entries are in the journal by now: a candidate is checked there), a fraction of the memory.
    fn freeze(self) -> (Frozen, Vec<(u64, Recent)>) {
        let frozen = Frozen {
            index: self.index,
            mask: self.mask,
            records: self.records,
            seq_from: self.seq_from,
            seq_through: self.seq_through,
        };
        (frozen, self.entries)
    }
}

/// A frozen generation's index and records vector, kept for the next generation.
type Spare = (Table<u64>, Vec<(u64, Seq)>);

/// Spare generation indexes kept: the first two rotations after open need one each before the
/// writer has given one back (measured: three indexes in all serve a 10 M demo).
const SPARES: usize = 2;

/// A generation handed to the writer: searched here (candidates by key, checked against the
/// journal like a run's) until its run is in the run set.
struct Frozen {
    index: Table<u64>,
    mask: usize,
    /// `(key, seq)` of each entry, in the order recorded.
    records: Vec<(u64, Seq)>,
    seq_from: Seq,
    seq_through: Seq,
}

impl Frozen {
    fn candidates(&self, key: u64, out: &mut Vec<Seq>) {
        let mut i = key as usize & self.mask;
        loop {
            match slot_position(self.index[i], key) {
                Err(()) => return,
                Ok(Some(at)) if self.records[at].0 == key => out.push(self.records[at].1),
                Ok(_) => {}
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Its `(key, seq)` records, sorted, into `out` (on the writer's thread).
    fn records_into(&self, out: &mut Vec<(u64, Seq)>) {
        sort_records(&self.records, out);
    }
}

/// Sorts `records` into `out` by their keys' top 16 bits, then each bucket in full: keys are
/// SipHash values under a secret key, so the buckets hold a few records each — two passes over
/// the records instead of a comparison sort's ≈ 18 comparisons per record (the writer's sort
/// was 3.8 % of the demo's CPU). Any spread of keys still sorts correctly (a crowded bucket is
/// just a larger sort).
fn sort_records(records: &[(u64, Seq)], out: &mut Vec<(u64, Seq)>) {
    const BITS: u32 = 16;
    let bucket = |key: u64| (key >> (64 - BITS)) as usize;
    let mut starts = vec![0usize; (1 << BITS) + 1];
    for &(key, _) in records {
        starts[bucket(key) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    out.clear();
    out.resize(records.len(), (0, 0));
    let mut next = starts.clone();
    for &r in records {
        let b = bucket(r.0);
        out[next[b]] = r;
        next[b] += 1;
    }
    for b in starts.windows(2) {
        out[b[0]..b[1]].sort_unstable();
    }
}

// ---- runs on disk ----

const RUN_MAGIC: &[u8; 8] = b"RTGSBMI1";
/// `magic | key_check u64 | seq_from u64 | seq_through u64 | count u64 | tier u32 | crc32 u32`.
const RUN_HEADER_BYTES: u64 = 8 + 8 + 8 + 8 + 8 + 4 + 4;
const RECORD_BYTES: u64 = 16;

struct Run {
    seq_from: Seq,
    seq_through: Seq,
    tier: u32,
    count: u64,
    path: PathBuf,
    file: File,
    /// The first key of every block.
    fences: Vec<u64>,
}

impl Run {
    fn block(&self, b: usize, buf: &mut Vec<u8>) -> io::Result<()> {
        let start = b as u64 * BMI_RUN_BLOCK_RECORDS as u64;
        let n = (self.count - start).min(BMI_RUN_BLOCK_RECORDS as u64);
        buf.resize((n * RECORD_BYTES) as usize, 0);
        self.file.read_exact_at(buf, RUN_HEADER_BYTES + start * RECORD_BYTES)
    }

    /// Seqs recorded under `key`; returns the blocks read.
    fn candidates(&self, key: u64, out: &mut Vec<Seq>, buf: &mut Vec<u8>) -> io::Result<u64> {
        let mut b = self.fences.partition_point(|f| *f < key).saturating_sub(1);
        let mut reads = 0;
        while b < self.fences.len() && self.fences[b] <= key {
            self.block(b, buf)?;
            reads += 1;
            for r in buf.chunks_exact(RECORD_BYTES as usize) {
                let k = u64::from_le_bytes([r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]]);
                if k == key {
                    out.push(u64::from_le_bytes([r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]]));
                } else if k > key {
                    return Ok(reads);
                }
            }
            b += 1;
        }
        Ok(reads)
    }
}

fn run_name(seq_from: Seq, seq_through: Seq) -> String {
    format!("run-{seq_from:020}-{seq_through:020}.bmi")
}

/// Writes a run from sorted records (through a temporary file, fsync'd and renamed) and opens it.
fn write_run(
    dir: &Path,
    key_check: u64,
    (seq_from, seq_through, tier): (Seq, Seq, u32),
    records: impl Iterator<Item = io::Result<(u64, Seq)>>,
    stop: &AtomicBool,
) -> io::Result<Option<Run>> {
    let path = dir.join(run_name(seq_from, seq_through));
    let tmp = path.with_extension("bmi.tmp");
    let mut out = BufWriter::with_capacity(256 << 10, File::create(&tmp)?);
    out.write_all(&[0u8; RUN_HEADER_BYTES as usize])?;
    let (mut crc, mut count, mut fences, mut last) = (crc32fast::Hasher::new(), 0u64, Vec::new(), None);
    // A block at a time into the CRC and the file: fed 16 bytes per call, the CRC never reached
    // its fast path (3.6 % of the demo's CPU in the writer and the merger, measured).
    let mut block = Vec::with_capacity(BMI_RUN_BLOCK_RECORDS * RECORD_BYTES as usize);
    for r in records {
        let (key, seq) = r?;
        assert!(last <= Some((key, seq)), "run records must be sorted");
        last = Some((key, seq));
        if count % BMI_RUN_BLOCK_RECORDS as u64 == 0 {
            crc.update(&block);
            out.write_all(&block)?;
            block.clear();
            if stop.load(Ordering::Relaxed) {
                drop(out);
                let _ = fs::remove_file(&tmp);
                return Ok(None);
            }
            fences.push(key);
        }
        block.extend_from_slice(&key.to_le_bytes());
        block.extend_from_slice(&seq.to_le_bytes());
        count += 1;
    }
    crc.update(&block);
    out.write_all(&block)?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    let mut header = Vec::with_capacity(RUN_HEADER_BYTES as usize);
    header.extend_from_slice(RUN_MAGIC);
    for v in [key_check, seq_from, seq_through, count] {
        header.extend_from_slice(&v.to_le_bytes());
    }
    header.extend_from_slice(&tier.to_le_bytes());
    header.extend_from_slice(&crc.finalize().to_le_bytes());
    file.write_all_at(&header, 0)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, &path)?;
    File::open(dir)?.sync_all()?;
    let file = File::open(&path)?;
    Ok(Some(Run { seq_from, seq_through, tier, count, path, file, fences }))
}

/// Reads a run file back: header, key, CRC, fences; every key goes to `each` as it is read (a
/// run that then fails its CRC only leaves extra keys in the filter: false positives, harmless).
/// `None` if it is not a valid run of this index (other key, torn, damaged).
fn load_run(path: &Path, key_check: u64, mut each: impl FnMut(u64)) -> io::Result<Option<Run>> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    if len < RUN_HEADER_BYTES {
        return Ok(None);
    }
    let mut h = [0u8; RUN_HEADER_BYTES as usize];
    file.read_exact(&mut h)?;
    let u64_at = |at: usize| {
        u64::from_le_bytes([
            h[at],
            h[at + 1],
            h[at + 2],
            h[at + 3],
            h[at + 4],
            h[at + 5],
            h[at + 6],
            h[at + 7],
        ])
    };
    let (check, seq_from, seq_through, count) = (u64_at(8), u64_at(16), u64_at(24), u64_at(32));
    let tier = u32::from_le_bytes([h[40], h[41], h[42], h[43]]);
    let crc_stored = u32::from_le_bytes([h[44], h[45], h[46], h[47]]);
    if &h[..8] != RUN_MAGIC
        || check != key_check
        || seq_from == 0
        || seq_through + 1 < seq_from
        || count.checked_mul(RECORD_BYTES).and_then(|b| b.checked_add(RUN_HEADER_BYTES)) != Some(len)
    {
        return Ok(None);
    }
    let (mut crc, mut fences, mut buf, mut n) =
        (crc32fast::Hasher::new(), Vec::new(), vec![0u8; 4 << 20], 0u64);
    while n < count {
        let take = ((count - n) * RECORD_BYTES).min(buf.len() as u64) as usize;
        file.read_exact(&mut buf[..take])?;
        crc.update(&buf[..take]);
        for r in buf[..take].chunks_exact(RECORD_BYTES as usize) {
            let key = u64::from_le_bytes([r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]]);
            if n % BMI_RUN_BLOCK_RECORDS as u64 == 0 {
                fences.push(key);
            }
            each(key);
            n += 1;
        }
    }
    if crc.finalize() != crc_stored {
        return Ok(None);
    }
    Ok(Some(Run { seq_from, seq_through, tier, count, path: path.to_path_buf(), file, fences }))
}

/// Streams a run's records in order (for a merge).
fn records_of(run: &Run) -> impl Iterator<Item = io::Result<(u64, Seq)>> + '_ {
    let mut buf = Vec::new();
    let mut pos = 0u64;
    let mut at = 0usize;
    std::iter::from_fn(move || {
        if pos >= run.count {
            return None;
        }
        if at * RECORD_BYTES as usize >= buf.len() {
            let n = (run.count - pos).min(1 << 12);
            buf.resize((n * RECORD_BYTES) as usize, 0);
            if let Err(e) = run.file.read_exact_at(&mut buf, RUN_HEADER_BYTES + pos * RECORD_BYTES) {
                pos = run.count;
                return Some(Err(e));
            }
            at = 0;
        }
        let r = &buf[at * RECORD_BYTES as usize..(at + 1) * RECORD_BYTES as usize];
        at += 1;
        pos += 1;
        let key = u64::from_le_bytes([r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]]);
        let seq = u64::from_le_bytes([r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]]);
        Some(Ok((key, seq)))
    })
}

/// The runs the sequencer searches, oldest first, covering seqs `1..=seq_through` without gaps.
#[derive(Default)]
struct RunSet {
    runs: Vec<Arc<Run>>,
    seq_through: Seq,
    /// Rises with every change: the two background threads publish in any order, the sequencer
    /// keeps the newest.
    version: u64,
    merges: u64,
}

/// The run list both background threads change (under its lock), and its latest snapshot for
/// the sequencer (which never waits on a background thread to take it).
struct Runs {
    list: std::sync::Mutex<RunSet>,
    latest: std::sync::Mutex<Arc<RunSet>>,
    version: AtomicU64,
}

fn locked<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every change under these locks is a few assignments: a panic elsewhere leaves them whole.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Runs {
    fn new(runs: Vec<Arc<Run>>) -> Runs {
        let seq_through = runs.last().map_or(0, |r| r.seq_through);
        let set = RunSet { runs, seq_through, version: 0, merges: 0 };
        let snapshot = Arc::new(RunSet { runs: set.runs.clone(), ..set });
        Runs {
            list: std::sync::Mutex::new(set),
            latest: std::sync::Mutex::new(snapshot),
            version: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RunSet> {
        locked(&self.list)
    }

    /// Applies `change` and publishes the result.
    fn change(&self, change: impl FnOnce(&mut RunSet)) {
        let mut list = self.lock();
        change(&mut list);
        list.version += 1;
        list.seq_through = list.runs.last().map_or(0, |r| r.seq_through);
        *locked(&self.latest) = Arc::new(RunSet { runs: list.runs.clone(), ..*list });
        self.version.store(list.version, Ordering::Release);
    }

    /// The latest snapshot if it is newer than `version`.
    fn newer_than(&self, version: u64) -> Option<Arc<RunSet>> {
        (self.version.load(Ordering::Acquire) != version).then(|| Arc::clone(&locked(&self.latest)))
    }
}

/// The writer thread: writes each frozen generation as a run (never held up by merges, so the
/// sequencer does not wait for them) and wakes the merger.
struct Writer {
    dir: PathBuf,
    key_check: u64,
    runs: Arc<Runs>,
    merger: Sender<()>,
    stop: Arc<AtomicBool>,
}

impl Writer {
    fn run(self, rx: Receiver<Arc<Frozen>>) -> Result<(), String> {
        let mut sorted = Vec::new();
        while let Ok(frozen) = rx.recv() {
            frozen.records_into(&mut sorted);
            let range = (frozen.seq_from, frozen.seq_through, 0);
            drop(frozen);
            let records = sorted.iter().copied().map(Ok);
            let written = write_run(&self.dir, self.key_check, range, records, &self.stop);
            let Some(run) =
                written.map_err(|e| format!("writing a bmi run in {}: {e}", self.dir.display()))?
            else {
                return Ok(());
            };
            self.runs.change(|l| l.runs.push(Arc::new(run)));
            // A merge already pending covers this one too.
            let _ = self.merger.try_send(());
        }
        Ok(())
    }
}

/// The merge thread: [`BmiIndexConfig::merge_fanout`] adjacent runs of one tier become one run
/// of the next, the oldest such group first, while the writer goes on appending.
struct Merger {
    dir: PathBuf,
    key_check: u64,
    fanout: usize,
    runs: Arc<Runs>,
    stop: Arc<AtomicBool>,
}

impl Merger {
    fn run(self, wake: Receiver<()>) -> Result<(), String> {
        while wake.recv().is_ok() {
            while let Some(group) = self.mergeable() {
                if !self.merge(&group)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The oldest `fanout` adjacent runs of one tier.
    fn mergeable(&self) -> Option<Vec<Arc<Run>>> {
        let list = self.runs.lock();
        list.runs.windows(self.fanout).find(|w| w.iter().all(|r| r.tier == w[0].tier)).map(|w| w.to_vec())
    }

    /// Merges `group` into one run and puts it in their place; false if stopped.
    fn merge(&self, group: &[Arc<Run>]) -> Result<bool, String> {
        let (first, last) = (&group[0], &group[group.len() - 1]);
        let range = (first.seq_from, last.seq_through, first.tier + 1);
        let merged = Merge::new(group.iter().map(|r| records_of(r)).collect());
        let Some(run) = write_run(&self.dir, self.key_check, range, merged, &self.stop)
            .map_err(|e| format!("merging bmi runs in {}: {e}", self.dir.display()))?
        else {
            return Ok(false);
        };
        let run = Arc::new(run);
        self.runs.change(|l| {
            // Still adjacent: only the writer changes the list meanwhile, and only at its end.
            if let Some(at) = l.runs.iter().position(|r| Arc::ptr_eq(r, first)) {
                l.runs.splice(at..at + group.len(), [Arc::clone(&run)]);
                l.merges += 1;
            }
        });
        for r in group {
            // Open handles (the sequencer's current run set) keep reading the unlinked file.
            fs::remove_file(&r.path).map_err(|e| format!("removing {}: {e}", r.path.display()))?;
        }
        Ok(true)
    }
}

/// A k-way merge of sorted record streams (k is the merge fan-out: a few).
struct Merge<I> {
    inputs: Vec<I>,
    heads: Vec<Option<(u64, Seq)>>,
    started: bool,
}

impl<I: Iterator<Item = io::Result<(u64, Seq)>>> Merge<I> {
    fn new(inputs: Vec<I>) -> Self {
        let heads = vec![None; inputs.len()];
        Merge { inputs, heads, started: false }
    }

    fn advance(&mut self, i: usize) -> io::Result<()> {
        self.heads[i] = self.inputs[i].next().transpose()?;
        Ok(())
    }
}

impl<I: Iterator<Item = io::Result<(u64, Seq)>>> Iterator for Merge<I> {
    type Item = io::Result<(u64, Seq)>;

    fn next(&mut self) -> Option<Self::Item> {
        if !self.started {
            self.started = true;
            for i in 0..self.inputs.len() {
                if let Err(e) = self.advance(i) {
                    return Some(Err(e));
                }
            }
        }
        let (i, record) =
            self.heads.iter().enumerate().filter_map(|(i, h)| h.map(|r| (i, r))).min_by_key(|(_, r)| *r)?;
        if let Err(e) = self.advance(i) {
            return Some(Err(e));
        }
        Some(Ok(record))
    }
}

// ---- the index ----

/// The index the sequencer thread owns (see the module documentation).
pub struct BmiIndex {
    journal_dir: PathBuf,
    /// Reads a run's candidate back from the journal.
    entries: EntryReader,
    key: [u64; 2],
    config: BmiIndexConfig,
    filter: Filter,
    current: Generation,
    previous: Generation,
    /// Generations handed to the writer, newest last, until its run set covers them: searched
    /// like the recent ones meanwhile.
    frozen: Vec<Arc<Frozen>>,
    /// Indexes and records for the next generations: made resident at open ([`SPARES`] of them),
    /// then a covered frozen generation's (allocating fresh ones at every rotation left the freed
    /// ones lingering in the allocator: peak RSS). At most [`SPARES`].
    spares: Vec<Spare>,
    runs: Arc<RunSet>,
    /// The journal writer's progress: entries up to here are in the journal files, where a
    /// run's candidate can be read back. A generation leaves memory only once it is.
    seq_written: Arc<AtomicU64>,
    to_writer: Option<Sender<Arc<Frozen>>>,
    /// Where the writer and the merger publish the run list.
    shared_runs: Arc<Runs>,
    writer: Option<JoinHandle<Result<(), String>>>,
    merger: Option<JoinHandle<Result<(), String>>>,
    stop: Arc<AtomicBool>,
    stats: BmiIndexStats,
    candidates: Vec<Seq>,
    ranges: Vec<(Seq, Seq)>,
    block: Vec<u8>,
}

/// What [`BmiIndex::resolve`] leaves for [`BmiIndex::record`] of the same batch: the keys the
/// filter did not rule out (it took the others already, while their buckets were in cache).
#[must_use = "the batch's new entries go to BmiIndex::record with it"]
pub struct Resolved {
    positives: Vec<u64>,
    /// The filter's newest generation when the look-up began.
    since: usize,
}

/// A check value of the hash key and function, stored in every run: a run written under another
/// key, or by a version that hashed with SipHash-2-4 (whose check was `siphash24(key, "rtgs bmi
/// index key check")`), is useless (its keys say nothing) and is rebuilt from the journal.
fn key_check(key: [u64; 2]) -> u64 {
    siphash13(key, b"rtgs bmi index key check: SipHash-1-3")
}

/// The index's SipHash key: `dir/KEY`, 16 random bytes made once (`/dev/urandom`).
fn load_or_make_key(dir: &Path) -> Result<[u64; 2], BmiIndexError> {
    let path = dir.join("KEY");
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let mut fresh = [0u8; 16];
            File::open("/dev/urandom")
                .and_then(|mut f| f.read_exact(&mut fresh))
                .map_err(io_err(Path::new("/dev/urandom")))?;
            let tmp = dir.join("KEY.tmp");
            let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
            f.write_all(&fresh).and_then(|()| f.sync_all()).map_err(io_err(&tmp))?;
            fs::rename(&tmp, &path).map_err(io_err(&path))?;
            File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir))?;
            fresh.to_vec()
        }
        Err(source) => return Err(BmiIndexError::Io { path, source }),
    };
    let k: [u8; 16] = bytes.as_slice().try_into().map_err(|_| {
        BmiIndexError::Broken(format!(
            "{} is not 16 bytes: move it aside (the index is rebuilt from the journal)",
            path.display()
        ))
    })?;
    let half = |b: &[u8]| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    Ok([half(&k[..8]), half(&k[8..])])
}

/// Parses `run-FROM-THROUGH.bmi`.
fn parse_run_name(name: &str) -> Option<(Seq, Seq)> {
    let rest = name.strip_prefix("run-")?.strip_suffix(".bmi")?;
    let (from, through) = rest.split_once('-')?;
    Some((from.parse().ok()?, through.parse().ok()?))
}

impl BmiIndex {
    /// Opens the index in `data_dir/bmi-index` for a journal that ends at `journal_seq_last`:
    /// loads the runs that cover the journal from seq 1 without a gap (others are deleted),
    /// rebuilds the filter, replays the journal after the last run, starts the writer thread.
    pub fn open(
        data_dir: &Path,
        journal_dir: &Path,
        journal_seq_last: Seq,
        seq_written: Arc<AtomicU64>,
        config: BmiIndexConfig,
    ) -> Result<BmiIndex, BmiIndexError> {
        assert!(config.recent_entries > 0 && config.merge_fanout >= 2, "bmi index sizes");
        let dir = data_dir.join("bmi-index");
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let key = load_or_make_key(&dir)?;
        let mut filter = Filter::new(config.filter_keys_first);
        let mut stats = BmiIndexStats::default();
        let runs = load_runs(&dir, key_check(key), journal_seq_last, &mut filter, &mut stats)?;
        let through = runs.last().map_or(0, |r| r.seq_through);
        let stop = Arc::new(AtomicBool::new(false));
        let (to_writer, writer_rx) = bounded::<Arc<Frozen>>(crate::limits::BMI_FROZEN_QUEUE);
        let (wake_merger, merger_rx) = bounded::<()>(1);
        let shared_runs = Arc::new(Runs::new(runs.clone()));
        let writer = Writer {
            dir: dir.clone(),
            key_check: key_check(key),
            runs: Arc::clone(&shared_runs),
            merger: wake_merger,
            stop: Arc::clone(&stop),
        };
        let merger = Merger {
            dir,
            key_check: key_check(key),
            fanout: config.merge_fanout,
            runs: Arc::clone(&shared_runs),
            stop: Arc::clone(&stop),
        };
        let spawn = |name: &str| std::thread::Builder::new().name(name.into());
        let broken = |e: io::Error| BmiIndexError::Broken(format!("cannot start a bmi index thread: {e}"));
        let writer = spawn("bmi-index").spawn(move || writer.run(writer_rx)).map_err(broken)?;
        let merger = spawn("bmi-merge").spawn(move || merger.run(merger_rx)).map_err(broken)?;
        let mut index = BmiIndex {
            journal_dir: journal_dir.to_path_buf(),
            entries: EntryReader::new(journal_dir),
            key,
            config,
            filter,
            current: Generation::new(through + 1, 0),
            previous: Generation::new(through + 1, 0),
            frozen: Vec::new(),
            spares: Vec::new(),
            runs: Arc::new(RunSet { runs, seq_through: through, version: 0, merges: 0 }),
            seq_written,
            to_writer: Some(to_writer),
            shared_runs,
            writer: Some(writer),
            merger: Some(merger),
            stop,
            stats,
            candidates: Vec::new(),
            ranges: Vec::new(),
            block: Vec::new(),
        };
        index.top_up_spares();
        let entries_max = config.recent_entries;
        index.current = Generation::reusing(through + 1, entries_max, Vec::new(), index.spares.pop());
        index.replay(through + 1, journal_seq_last)?;
        // What the first rotations need is ready; anything made from now on is made on the way.
        index.top_up_spares();
        index.filter.opening = false;
        Ok(index)
    }

    /// Records the journal's entries `from..=until` (those after the last run) again.
    fn replay(&mut self, from: Seq, until: Seq) -> Result<(), BmiIndexError> {
        if from > until {
            return Ok(());
        }
        let mut reader = JournalReader::open(&self.journal_dir, from)?;
        let (mut entries, mut keys) = (Vec::new(), Vec::new());
        while reader.next_batch(&mut entries)? {
            entries.retain(|e| e.seq <= until);
            keys.clear();
            keys.extend(entries.iter().map(|e| self.key_of(&e.bmi)));
            self.stats.replayed_at_open += entries.len() as u64;
            let since = self.filter.newest();
            self.remember(&entries, &keys, since, |_| true)?;
            if entries.last().is_some_and(|e| e.seq >= until) {
                break;
            }
            entries.clear();
        }
        Ok(())
    }

    /// Fills the spares up to [`SPARES`] with resident ones (at open only).
    fn top_up_spares(&mut self) {
        while self.spares.len() < SPARES {
            self.spares.push(Generation::resident_spare(self.config.recent_entries));
        }
    }

    fn key_of(&self, bmi: &Bmi) -> u64 {
        siphash13(self.key, bmi.as_bytes())
    }

    /// Takes the writer's newest run set and drops the frozen generations it covers.
    fn absorb(&mut self) {
        if let Some(set) = self.shared_runs.newer_than(self.runs.version) {
            self.stats.merges = set.merges;
            self.runs = set;
        }
        let through = self.runs.seq_through;
        while self.frozen.first().is_some_and(|f| f.seq_through <= through) {
            let covered = self.frozen.remove(0);
            // The writer is done with it (its run is in): its index and records serve the next
            // generation.
            if let Ok(f) = Arc::try_unwrap(covered) {
                if self.spares.len() < SPARES {
                    self.spares.push((f.index, f.records));
                }
            }
        }
    }

    /// One [`Lookup`] per command, for the core sequencer: what was sequenced under its `bmi`
    /// before (the first entry), if anything.
    pub fn resolve(
        &mut self,
        commands: &[Command],
        out: &mut Vec<Lookup>,
    ) -> Result<Resolved, BmiIndexError> {
        self.absorb();
        let mut resolved = Resolved { positives: Vec::new(), since: self.filter.newest() };
        let first = out.len();
        out.extend(
            commands
                .iter()
                .map(|c| Lookup { key: if c.bmi.is_none() { 0 } else { self.key_of(&c.bmi) }, known: None }),
        );
        for (i, c) in commands.iter().enumerate() {
            if let Some(ahead) = out.get(first + i + PREFETCH_AHEAD) {
                self.filter.prefetch(ahead.key);
            }
            if c.bmi.is_none() {
                continue;
            }
            let key = out[first + i].key;
            self.stats.lookups += 1;
            if self.filter.contains(key) {
                self.stats.filter_positives += 1;
                resolved.positives.push(key);
                out[first + i].known = self.find(key, &c.bmi)?;
            } else {
                // Never sequenced: it will be now (or it repeats a command of this batch that
                // will be). Into the filter while its buckets are in cache; `record` then skips
                // it. (Were it not sequenced after all, an extra key costs false positives only.)
                self.filter.insert(key);
            }
        }
        Ok(resolved)
    }

    /// What was sequenced under `bmi`, if anything (a status question: unlike [`Self::resolve`]
    /// it adds nothing to the filter).
    pub fn known(&mut self, bmi: &Bmi) -> Result<Option<Known>, BmiIndexError> {
        if bmi.is_none() {
            return Ok(None);
        }
        self.absorb();
        let key = self.key_of(bmi);
        self.stats.lookups += 1;
        if !self.filter.contains(key) {
            return Ok(None);
        }
        self.stats.filter_positives += 1;
        self.find(key, bmi)
    }

    /// A filter positive: the recent generations, then frozen ones, then the runs (newest first),
    /// each candidate confirmed by the journal.
    fn find(&mut self, key: u64, bmi: &Bmi) -> Result<Option<Known>, BmiIndexError> {
        if let Some(k) = self.current.get(key, bmi).or_else(|| self.previous.get(key, bmi)) {
            self.stats.recent_hits += 1;
            return Ok(Some(k));
        }
        // Only where the filter generations that said yes hold their keys.
        let mut ranges = std::mem::take(&mut self.ranges);
        self.filter.matching(key, &mut ranges);
        let overlaps = |from: Seq, through: Seq| ranges.iter().any(|&(f, t)| f <= through && from <= t);
        let mut candidates = std::mem::take(&mut self.candidates);
        candidates.clear();
        for f in self.frozen.iter().rev().filter(|f| overlaps(f.seq_from, f.seq_through)) {
            f.candidates(key, &mut candidates);
        }
        let runs = Arc::clone(&self.runs);
        for r in runs.runs.iter().rev().filter(|r| overlaps(r.seq_from, r.seq_through)) {
            let reads = r.candidates(key, &mut candidates, &mut self.block).map_err(io_err(&r.path))?;
            self.stats.run_block_reads += reads;
        }
        self.ranges = ranges;
        candidates.sort_unstable();
        let mut found = None;
        for &seq in &candidates {
            self.stats.journal_reads += 1;
            let Some(entry) = self.entries.read(seq)? else {
                return Err(BmiIndexError::Broken(format!(
                    "the index holds seq {seq} but the journal has no such entry"
                )));
            };
            if entry.bmi == *bmi {
                self.stats.old_hits += 1;
                found = Some(Known::of(&entry));
                break;
            }
        }
        self.candidates = candidates;
        Ok(found)
    }

    /// Remembers the newly sequenced entries of the batch `resolved` came from (`keys[i]`: the
    /// lookup key of `entries[i]`'s `bmi`, as [`BmiIndex::resolve`] gave it). May hand a
    /// generation to the writer (blocking while the writer is [`crate::limits::BMI_FROZEN_QUEUE`]
    /// generations behind: back-pressure).
    pub fn record(
        &mut self,
        resolved: Resolved,
        entries: &[Entry],
        keys: &[u64],
    ) -> Result<(), BmiIndexError> {
        self.remember(entries, keys, resolved.since, |key| resolved.positives.contains(&key))
    }

    /// Remembers entries; `to_filter(key)`: whether the filter still lacks the key; `since`: the
    /// filter generation that was the newest when their keys began to go in.
    fn remember(
        &mut self,
        entries: &[Entry],
        keys: &[u64],
        since: usize,
        to_filter: impl Fn(u64) -> bool,
    ) -> Result<(), BmiIndexError> {
        assert_eq!(entries.len(), keys.len(), "one key per entry");
        let seqs = entries.iter().filter(|e| !e.bmi.is_none()).map(|e| e.seq);
        let range = (seqs.clone().min(), seqs.max());
        for (i, (e, &key)) in entries.iter().zip(keys).enumerate() {
            if let Some(&ahead) = keys.get(i + PREFETCH_AHEAD) {
                self.current.prefetch(ahead);
            }
            if e.bmi.is_none() {
                continue;
            }
            if to_filter(key) {
                self.filter.insert(key);
            }
            self.current.insert(key, Recent { bmi: e.bmi, known: Known::of(e) });
            if self.current.len() >= self.config.recent_entries
                && self.previous.seq_through <= self.seq_written.load(Ordering::Acquire)
            {
                self.rotate()?;
            }
        }
        if let (Some(from), Some(through)) = range {
            // Every generation these keys went into — also one the inserts above began — knows
            // their seqs before any of them is looked up again.
            self.filter.cover(since, from, through);
        }
        Ok(())
    }

    /// The previous generation goes to disk; the current one becomes the previous.
    fn rotate(&mut self) -> Result<(), BmiIndexError> {
        let from = self.current.seq_through + 1;
        let previous = std::mem::replace(&mut self.previous, Generation::new(from, 0));
        let (frozen, buffer) = previous.freeze();
        let fresh = Generation::reusing(from, self.config.recent_entries, buffer, self.spares.pop());
        self.previous = std::mem::replace(&mut self.current, fresh);
        if frozen.records.is_empty() {
            return Ok(());
        }
        // Sorted and written by the writer; searched here until its run is in the run set.
        let frozen = Arc::new(frozen);
        self.frozen.push(Arc::clone(&frozen));
        let sent = self.to_writer.as_ref().is_some_and(|tx| tx.send(frozen).is_ok());
        if !sent {
            return Err(self.writer_failure());
        }
        Ok(())
    }

    fn writer_failure(&mut self) -> BmiIndexError {
        let reason = match self.writer.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => e,
            Some(Err(_)) => "it panicked".into(),
            _ => "it stopped".into(),
        };
        BmiIndexError::Broken(format!("the bmi index writer failed: {reason}"))
    }

    pub fn stats(&mut self) -> BmiIndexStats {
        self.absorb();
        let mut s = self.stats.clone();
        s.runs = self.runs.runs.len() as u64;
        s.run_entries = self.runs.runs.iter().map(|r| r.count).sum();
        s.filter_generations = self.filter.generations.len() as u64;
        s.filter_bytes = self.filter.bytes();
        s
    }
}

impl Drop for BmiIndex {
    /// Stops the writer (a run or merge in progress is abandoned: derived data, rebuilt at open).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // The writer stops when its queue closes; the merger when the writer's waker drops.
        self.to_writer = None;
        for h in [self.writer.take(), self.merger.take()].into_iter().flatten() {
            let _ = h.join();
        }
    }
}

/// The valid runs that cover `1..=seq_through` without a gap and not beyond the journal, oldest
/// first (their keys inserted into `filter`); every other run file is deleted.
fn load_runs(
    dir: &Path,
    key_check: u64,
    journal_seq_last: Seq,
    filter: &mut Filter,
    stats: &mut BmiIndexStats,
) -> Result<Vec<Arc<Run>>, BmiIndexError> {
    let mut named: Vec<(Seq, std::cmp::Reverse<Seq>, PathBuf)> = Vec::new();
    for item in fs::read_dir(dir).map_err(io_err(dir))? {
        let path = item.map_err(io_err(dir))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        match parse_run_name(&name) {
            Some((from, through)) => named.push((from, std::cmp::Reverse(through), path)),
            None if name.ends_with(".bmi.tmp") => fs::remove_file(&path).map_err(io_err(&path))?,
            None => {}
        }
    }
    // Longest run first among those starting at the same seq: a merged run wins over its parts.
    named.sort();
    let mut runs = Vec::new();
    let mut next = 1;
    for (from, std::cmp::Reverse(through), path) in named {
        let usable = from == next && through <= journal_seq_last;
        let run = if usable {
            let since = filter.newest();
            let run = load_run(&path, key_check, |k| filter.insert(k)).map_err(io_err(&path))?;
            filter.cover(since, from, through);
            run
        } else {
            None
        };
        match run {
            Some(run) if run.seq_from == from && run.seq_through == through => {
                next = through + 1;
                runs.push(Arc::new(run));
            }
            _ => {
                // Damaged, superseded by a merged run, after a gap, or past the journal's end.
                stats.runs_discarded += 1;
                fs::remove_file(&path).map_err(io_err(&path))?;
            }
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests;
