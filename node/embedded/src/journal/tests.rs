use super::*;
use rtgs_core::entry::CenterId;
use std::io::Write;

fn tick(seq: Seq) -> Entry {
    Entry::tick(seq, 3, seq * 10, CenterId(1))
}

fn frame(seqs: std::ops::RangeInclusive<Seq>) -> Vec<u8> {
    let entries: Vec<Entry> = seqs.map(tick).collect();
    let mut buf = Vec::new();
    codec::encode_frame(&entries, &mut buf);
    buf
}

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// A cleanly stopped journal: groups of ticks, each synced, then sealed.
fn sealed(dir: &Path, segment_bytes_max: u64, groups: &[(Seq, Seq)]) {
    let (mut j, _) = ok(Journal::open(dir, segment_bytes_max));
    for &(first, last) in groups {
        ok(j.append(&frame(first..=last), first, last));
        ok(j.sync());
    }
    assert_eq!(ok(j.seal()), groups.last().map_or(0, |g| g.1), "sealed: everything marked");
}

/// `n` groups of three seqs.
fn threes(n: u64) -> Vec<(Seq, Seq)> {
    (0..n).map(|k| (k * 3 + 1, k * 3 + 3)).collect()
}

fn read_all(dir: &Path, from: Seq) -> Vec<Seq> {
    let mut r = ok(JournalReader::open(dir, from));
    let mut out = Vec::new();
    while ok(r.next_batch(&mut out)) {}
    out.iter().map(|e| e.seq).collect()
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rtgs-journal-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

fn last_segment(dir: &Path) -> PathBuf {
    ok(segments(dir)).pop().map(|(_, p)| p).unwrap_or_default()
}

fn flip(path: &Path, offset: u64) {
    let mut bytes = ok(fs::read(path));
    bytes[offset as usize] ^= 0x10;
    ok(fs::write(path, bytes));
}

/// Writes seqs 1..=5 and 6..=9 as two sync groups without sealing (a crash after the second
/// sync): the file is `[1..=5][mark 5][6..=9]`. Returns the two frames' lengths.
fn two_groups(dir: &Path, mirror: Option<&Path>) -> (u64, u64) {
    let mut options = JournalOpen::new(1 << 20);
    options.mirror = mirror.map(Path::to_path_buf);
    let (mut j, _) = ok(Journal::open_with(dir, &options));
    let (a, b) = (frame(1..=5), frame(6..=9));
    ok(j.append(&a, 1, 5));
    assert_eq!(ok(j.sync()), 0, "nothing marked yet: nothing may be published");
    ok(j.append(&b, 6, 9));
    assert_eq!(ok(j.sync()), 5, "the first group's mark is durable now");
    (a.len() as u64, b.len() as u64)
}

/// [`two_groups`] in a fresh directory `name`, without a mirror: the directory, its segment and
/// the two frames' lengths.
fn two_groups_in(name: &str) -> (PathBuf, PathBuf, u64, u64) {
    let dir = tempdir(name);
    let (a, b) = two_groups(&dir, None);
    let seg = last_segment(&dir);
    (dir, seg, a, b)
}

/// [`two_groups`] with a mirror, in fresh directories named after `name`.
struct Mirrored {
    dir: PathBuf,
    mirror: PathBuf,
    seg: PathBuf,
    mseg: PathBuf,
    a: u64,
    b: u64,
}

impl Mirrored {
    fn new(name: &str) -> Mirrored {
        let (dir, mirror) = (tempdir(&format!("{name}-journal")), tempdir(&format!("{name}-mirror")));
        let (a, b) = two_groups(&dir, Some(&mirror));
        let (seg, mseg) = (last_segment(&dir), last_segment(&mirror));
        Mirrored { dir, mirror, seg, mseg, a, b }
    }

    fn options(&self) -> JournalOpen {
        JournalOpen { mirror: Some(self.mirror.clone()), ..JournalOpen::new(1 << 20) }
    }
}

impl Drop for Mirrored {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
        let _ = fs::remove_dir_all(&self.mirror);
    }
}

fn set_len(path: &Path, len: u64) {
    ok(ok(OpenOptions::new().write(true).open(path)).set_len(len));
}

#[test]
fn append_rotate_reopen_and_read_from_any_seq() {
    let dir = tempdir("rotate");
    sealed(&dir, 100, &threes(10));
    assert!(ok(segments(&dir)).len() > 1, "rotated");
    let (j, tail) = ok(Journal::open(&dir, 100));
    assert_eq!(
        (tail.seq_last, tail.epoch_last, tail.timestamp_last_us, tail.truncated_bytes, tail.seq_durable),
        (30, 3, 300, 0, 30)
    );
    assert_eq!(j.seq_last(), 30);
    assert_eq!(read_all(&dir, 1), (1..=30).collect::<Vec<_>>());
    assert_eq!(read_all(&dir, 17), (17..=30).collect::<Vec<_>>());
    assert_eq!(read_all(&dir, 31), Vec::<Seq>::new());
    let mut entries = EntryReader::new(&dir);
    for seq in [16, 1, 2, 30, 17] {
        assert_eq!(ok(entries.read(seq)), Some(tick(seq)));
    }
    assert_eq!(ok(entries.read(31)), None);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn the_writer_publishes_a_group_only_once_its_mark_is_durable() {
    let dir = tempdir("marks");
    let (mut j, _) = ok(Journal::open(&dir, 1 << 20));
    ok(j.append(&frame(1..=2), 1, 2));
    ok(j.append(&frame(3..=4), 3, 4));
    assert_eq!(ok(j.sync()), 0);
    ok(j.append(&frame(5..=5), 5, 5));
    assert_eq!(ok(j.sync()), 4, "the mark written before seq 5 covers 1..=4");
    assert_eq!(ok(j.seal()), 5, "idle: the last group gets its own mark");
    assert_eq!(ok(j.seal()), 5, "nothing more to mark");
    drop(j);
    let seg = last_segment(&dir);
    let len = ok(fs::metadata(&seg)).len();
    let frames = (frame(1..=2).len() + frame(3..=4).len() + frame(5..=5).len()) as u64;
    assert_eq!(len, frames + 2 * MARK_FRAME_BYTES as u64, "two marks between and after the groups");
    assert_eq!(read_all(&dir, 1), vec![1, 2, 3, 4, 5], "readers skip the marks");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn every_sync_is_timed() {
    let dir = tempdir("sync-times");
    let (mut j, _) = ok(Journal::open(&dir, 1 << 20));
    let before = j.sync_times().count();
    ok(j.append(&frame(1..=2), 1, 2));
    ok(j.sync());
    assert_eq!(j.sync_times().count(), before + 1, "one sample per sync");
    assert_eq!(ok(j.seal()), 2);
    assert_eq!(j.sync_times().count(), before + 2, "the seal's own sync for the mark");
    ok(j.seal());
    assert_eq!(j.sync_times().count(), before + 2, "nothing to seal: no sync, no sample");
    drop(j);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn sync_times_tell_quantiles_and_slow_syncs() {
    let mut t = SyncTimes::default();
    assert_eq!((t.count(), t.quantile_us(0.99), t.max_us(), t.over_us(5_000)), (0, 0, 0, 0));
    for us in [0, 90, 100, 110, 120, 130, 140, 150, 5_000, 12_000] {
        t.record(us);
    }
    assert_eq!(t.count(), 10);
    assert_eq!(t.total_us(), 17_840, "the exact sum, not the buckets'");
    assert_eq!(t.over_us(5_000), 1, "exactly 5 ms is not over 5 ms; 12 ms is");
    assert_eq!(t.over_us(100), 7);
    assert!((119..=121).contains(&t.quantile_us(0.5)), "p50 {}", t.quantile_us(0.5));
    assert!((11_900..=12_100).contains(&t.max_us()), "max {}", t.max_us());
    assert_eq!(t.over_us(u64::MAX), 0);
    t.record(u64::MAX);
    assert_eq!(t.max_us(), t.histogram.highest_equivalent(SYNC_TIME_MAX_US), "clamped, not lost");
}

#[test]
fn torn_tail_is_cut_and_appends_continue() {
    let dir = tempdir("torn");
    let (mut j, _) = ok(Journal::open(&dir, 1 << 20));
    ok(j.append(&frame(1..=5), 1, 5));
    ok(j.seal());
    let second = frame(6..=9);
    // A crash mid-write: only part of the second frame reached the disk.
    ok(j.append(&second[..second.len() - 3], 6, 9));
    drop(j);
    let (mut j, tail) = ok(Journal::open(&dir, 1 << 20));
    assert_eq!(tail.seq_last, 5);
    assert_eq!(tail.truncated_bytes, second.len() as u64 - 3);
    ok(j.append(&frame(6..=7), 6, 7));
    ok(j.seal());
    assert_eq!(read_all(&dir, 1), (1..=7).collect::<Vec<_>>());
    let _ = fs::remove_dir_all(&dir);
}

/// A flipped bit in the last group, past the last durable mark, with nothing valid after it:
/// that group was never published (its mark was not durable), so it is a torn tail.
#[test]
fn a_bad_frame_past_the_durable_end_with_nothing_after_it_is_cut() {
    let (dir, seg, a, b) = two_groups_in("past-end");
    flip(&seg, a + MARK_FRAME_BYTES as u64 + b - 1);
    let (_, tail) = ok(Journal::open(&dir, 1 << 20));
    assert_eq!((tail.seq_last, tail.truncated_bytes, tail.seq_durable), (5, b, 5));
    assert_eq!(read_all(&dir, 1), vec![1, 2, 3, 4, 5]);
    let _ = fs::remove_dir_all(&dir);
}

/// A flipped bit before the durable end: refused, the file and offset named, nothing changed.
#[test]
fn a_bad_frame_before_the_durable_end_is_corruption_and_nothing_is_cut() {
    let (dir, seg, a, _) = two_groups_in("before-end");
    flip(&seg, 20);
    let before = ok(fs::read(&seg));
    match Journal::open(&dir, 1 << 20) {
        Err(JournalError::Corrupt { path, offset, seqs, advice, .. }) => {
            assert_eq!((path, offset), (seg.clone(), 0));
            assert_eq!(seqs, format!("seqs 1..=5 unreadable; the next valid frame starts at byte {a}"));
            assert!(advice.contains("--journal-mirror"), "{advice}");
        }
        other => panic!("expected corruption, got {:?}", other.map(|(_, t)| t)),
    }
    assert_eq!(ok(fs::read(&seg)), before, "not a byte changed");
    // The same in the second group of a sealed journal: followed by its own durable mark.
    let dir2 = tempdir("before-end-2");
    sealed(&dir2, 1 << 20, &[(1, 5), (6, 9)]);
    let seg2 = last_segment(&dir2);
    flip(&seg2, a + MARK_FRAME_BYTES as u64 + 30);
    assert!(matches!(Journal::open(&dir2, 1 << 20), Err(JournalError::Corrupt { .. })));
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::remove_dir_all(&dir2);
}

#[test]
fn a_damaged_last_mark_alone_is_cut_and_its_frames_stay() {
    let dir = tempdir("last-mark");
    sealed(&dir, 1 << 20, &[(1, 5)]);
    let seg = last_segment(&dir);
    let len = ok(fs::metadata(&seg)).len();
    flip(&seg, len - 2);
    let (_, tail) = ok(Journal::open(&dir, 1 << 20));
    assert_eq!((tail.seq_last, tail.truncated_bytes), (5, MARK_FRAME_BYTES as u64));
    assert_eq!(ok(fs::metadata(&seg)).len(), len, "cut, then marked again at open");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_frame_in_a_sealed_segment_is_corruption() {
    let dir = tempdir("sealed");
    sealed(&dir, 100, &threes(6));
    let first = ok(segments(&dir))[0].1.clone();
    let len = ok(fs::metadata(&first)).len();
    // The very end of a sealed segment (its last mark): still corruption, never a tail.
    flip(&first, len - 1);
    assert!(matches!(Journal::open(&dir, 100), Err(JournalError::Corrupt { path, .. }) if path == first));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_seq_discontinuity_refuses_to_start() {
    let dir = tempdir("discontinuity");
    sealed(&dir, 1 << 20, &[(1, 2)]);
    let path = last_segment(&dir);
    let mut f = ok(OpenOptions::new().append(true).open(&path));
    ok(f.write_all(&frame(5..=5)));
    drop(f);
    assert!(matches!(
        Journal::open(&dir, 1 << 20),
        Err(JournalError::Discontinuity { expected: 3, found: 5, .. })
    ));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_cut_below_what_a_center_applied_is_refused() {
    let (dir, seg, _, b) = two_groups_in("floor");
    let len = ok(fs::metadata(&seg)).len();
    flip(&seg, len - b + 10);
    let mut options = JournalOpen::new(1 << 20);
    options.seq_floor = 7;
    match Journal::open_with(&dir, &options) {
        Err(JournalError::BelowFloor { seq_last: 5, seq_floor: 7, .. }) => {}
        other => panic!("expected a refusal, got {:?}", other.map(|(_, t)| t)),
    }
    assert_eq!(ok(fs::metadata(&seg)).len(), len, "nothing cut");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_mirror_repairs_a_bad_frame_in_either_copy_and_refuses_both() {
    let m = Mirrored::new("m");
    let (seg, mseg) = (&m.seg, &m.mseg);
    assert_eq!(ok(fs::read(seg)), ok(fs::read(mseg)), "identical copies");
    flip(seg, 20);
    let (j, tail) = ok(Journal::open_with(&m.dir, &m.options()));
    drop(j);
    assert_eq!((tail.seq_last, tail.repaired_frames, tail.repaired_bytes), (9, 1, m.a));
    assert_eq!((&tail.repairs[0].path, tail.repairs[0].offset), (seg, 0));
    assert_eq!(ok(fs::read(seg)), ok(fs::read(mseg)), "repaired from the mirror");
    flip(mseg, 30);
    let (j, tail) = ok(Journal::open_with(&m.dir, &m.options()));
    drop(j);
    assert_eq!((tail.repaired_frames, &tail.repairs[0].path), (1, mseg));
    assert_eq!(ok(fs::read(seg)), ok(fs::read(mseg)), "and the other way round");
    flip(seg, 20);
    flip(mseg, 21);
    match Journal::open_with(&m.dir, &m.options()) {
        Err(JournalError::Corrupt { offset: 0, advice, .. }) => {
            assert!(advice.contains("Both copies"), "{advice}")
        }
        other => panic!("expected corruption, got {:?}", other.map(|(_, t)| t)),
    }
}

#[test]
fn a_missing_copy_is_filled_from_the_other() {
    let (dir, mirror) = (tempdir("fill-journal"), tempdir("fill-mirror"));
    sealed(&dir, 100, &threes(6));
    let mut options = JournalOpen::new(100);
    options.mirror = Some(mirror.clone());
    let (j, tail) = ok(Journal::open_with(&dir, &options));
    drop(j);
    assert!(tail.repaired_frames >= 6, "every frame copied: {tail:?}");
    let names = |d: &Path| ok(segments(d)).into_iter().map(|(s, _)| s).collect::<Vec<_>>();
    assert_eq!(names(&dir), names(&mirror));
    // The journal's disk replaced: the journal is restored from the mirror.
    ok(fs::remove_dir_all(&dir));
    let (j, tail) = ok(Journal::open_with(&dir, &options));
    drop(j);
    assert_eq!(tail.seq_last, 18);
    assert_eq!(read_all(&dir, 1), (1..=18).collect::<Vec<_>>());
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::remove_dir_all(&mirror);
}

#[test]
fn torn_tails_of_both_copies_are_cut() {
    let m = Mirrored::new("torn2");
    let keep = m.a + MARK_FRAME_BYTES as u64;
    set_len(&m.seg, keep + m.b - 4);
    set_len(&m.mseg, keep + 3);
    let (j, tail) = ok(Journal::open_with(&m.dir, &m.options()));
    drop(j);
    assert_eq!((tail.seq_last, tail.truncated_bytes, tail.repaired_frames), (5, m.b - 4, 0));
    assert_eq!(ok(fs::read(&m.seg)), ok(fs::read(&m.mseg)));
}

/// `inspect` reports what opening would do, and changes nothing.
#[test]
fn inspect_changes_nothing() {
    let m = Mirrored::new("inspect");
    let (dir, mirror, seg, mseg) = (&m.dir, &m.mirror, &m.seg, &m.mseg);
    flip(seg, 20);
    set_len(mseg, m.a + MARK_FRAME_BYTES as u64 + m.b - 2);
    let (before, mbefore) = (ok(fs::read(seg)), ok(fs::read(mseg)));
    let found = ok(inspect(dir, Some(mirror)));
    assert_eq!((found.tail.seq_last, found.tail.repaired_frames), (9, 2), "{:?}", found.tail);
    assert_eq!(found.replay, None, "no copy of the segment is whole: a read-only replay cannot use either");
    assert_eq!(ok(fs::read(seg)), before);
    assert_eq!(ok(fs::read(mseg)), mbefore);
    assert!(matches!(inspect(dir, None), Err(JournalError::Corrupt { offset: 0, .. })));
    assert_eq!(ok(fs::read(seg)), before);
    // With a whole mirror, a read-only replay reads the mirror's copy.
    let mut whole = before.clone();
    whole[20] ^= 0x10;
    ok(fs::write(mseg, &whole));
    let found = ok(inspect(dir, Some(mirror)));
    assert_eq!(found.replay, Some(vec![(1, mseg.clone())]));
    let mut r = ok(JournalReader::open_segments(found.replay.unwrap_or_default(), 1, found.tail.seq_last));
    let mut out = Vec::new();
    while ok(r.next_batch(&mut out)) {}
    assert_eq!(out.len(), 9);
    // A torn tail is reported, not cut.
    let (torn, tseg, _, b2) = two_groups_in("inspect-torn");
    let tlen = ok(fs::metadata(&tseg)).len();
    set_len(&tseg, tlen - 1);
    let found = ok(inspect(&torn, None));
    assert_eq!((found.tail.seq_last, found.tail.truncated_bytes), (5, b2 - 1));
    assert_eq!(found.replay, Some(vec![(1, tseg.clone())]), "readable up to the tear");
    assert_eq!(ok(fs::metadata(&tseg)).len(), tlen - 1);
    let _ = fs::remove_dir_all(&torn);
}

/// Writes `bytes` at `at` into `path` (a crash's leftovers, damage, a writer in progress).
fn write_at(path: &Path, at: u64, bytes: &[u8]) {
    ok(ok(OpenOptions::new().write(true).open(path)).write_all_at(bytes, at));
}

/// Two sync groups written by a writer that then crashes (no close: its zeros ahead stay on
/// disk). Returns the directory, its segment, where the frames end and the two frames' lengths.
fn crashed_with_zeros(name: &str) -> (PathBuf, PathBuf, u64, u64, u64) {
    let dir = tempdir(name);
    let (mut j, _) = ok(Journal::open(&dir, 1 << 20));
    let (a, b) = (frame(1..=5), frame(6..=9));
    ok(j.append(&a, 1, 5));
    ok(j.sync());
    ok(j.append(&b, 6, 9));
    ok(j.sync());
    let end = j.segment_bytes;
    std::mem::forget(j); // a crash: no close, the zeros ahead are not trimmed
    let seg = last_segment(&dir);
    let bytes = ok(fs::read(&seg));
    assert!(bytes.len() as u64 > end, "zeros ahead are on disk");
    assert!(bytes[end as usize..].iter().all(|b| *b == 0), "past the frames: zeros only");
    (dir, seg, end, a.len() as u64, b.len() as u64)
}

/// The zeros ahead grow by a step with each write (by the write's own size when it is larger)
/// up to `JOURNAL_ZERO_AHEAD_BYTES`, never past the segment's size: no sync carries megabytes
/// of zeros at once, and frames keep landing on zeros written before them.
#[test]
fn zeros_ahead_grow_a_step_per_write_up_to_the_target() {
    let dir = tempdir("zeros-steps");
    let (mut j, _) = ok(Journal::open(&dir, 64 << 20));
    let ahead = |j: &Journal| j.prepared - j.segment_bytes;
    let step = ZERO_STEP_BYTES as u64;
    ok(j.append(&frame(1..=1), 1, 1));
    ok(j.sync());
    assert_eq!(ahead(&j), step, "the first write: one step");
    let mut seq = 1;
    let mut grew = Vec::new();
    while ahead(&j) <= JOURNAL_ZERO_AHEAD_BYTES - step {
        let before = ahead(&j);
        seq += 1;
        // A mark (due after each sync) and a frame: two writes, a step each.
        ok(j.append(&frame(seq..=seq), seq, seq));
        ok(j.sync());
        grew.push(ahead(&j) as i64 - before as i64);
        assert!(grew.len() < 1_000, "the zeros ahead stopped growing");
    }
    assert!(grew.iter().all(|g| *g > 0 && *g <= 2 * step as i64), "a step or two per append: {grew:?}");
    assert!(ahead(&j) <= JOURNAL_ZERO_AHEAD_BYTES, "capped at the target");
    // Less than a step used: the file's size stays.
    let file_before = j.prepared;
    for k in 1..=10 {
        ok(j.append(&frame(seq + k..=seq + k), seq + k, seq + k));
        ok(j.sync());
    }
    seq += 10;
    assert_eq!(j.prepared, file_before, "ten small appends: no zeros added");
    let level = ahead(&j);
    // A write larger than a step adds its own size: the zeros ahead stay at the target.
    let big = frame(seq + 1..=seq + 3_000);
    assert!(big.len() as u64 > step);
    let file_before = j.prepared;
    ok(j.append(&big, seq + 1, seq + 3_000));
    assert_eq!(
        ahead(&j),
        level - MARK_FRAME_BYTES as u64,
        "the mark used a little, the frame's size was added"
    );
    assert_eq!(j.prepared - file_before, big.len() as u64);
    drop(j);
    let _ = fs::remove_dir_all(&dir);
}

/// Near the segment's size the zeros ahead stop at it.
#[test]
fn zeros_ahead_stop_at_the_segments_size() {
    let dir = tempdir("zeros-cap");
    let (mut j, _) = ok(Journal::open(&dir, 100 << 10));
    ok(j.append(&frame(1..=1), 1, 1));
    ok(j.append(&frame(2..=2), 2, 2));
    assert_eq!(j.prepared, 100 << 10, "two steps would pass the segment's size");
    std::mem::forget(j);
    assert_eq!(ok(fs::metadata(last_segment(&dir))).len(), 100 << 10);
    let _ = fs::remove_dir_all(&dir);
}

/// After a crash the writer's zeros ahead are the end of the journal: nothing is cut or
/// reported as torn, readers stop there, and appends go on over them.
#[test]
fn zeros_ahead_left_by_a_crash_are_the_end_not_a_tear() {
    let (dir, seg, end, a, b) = crashed_with_zeros("zeros-end");
    assert_eq!(end, a + MARK_FRAME_BYTES as u64 + b);
    assert_eq!(read_all(&dir, 1), (1..=9).collect::<Vec<_>>(), "readers stop at the zeros");
    let found = ok(inspect(&dir, None));
    assert_eq!((found.tail.seq_last, found.tail.truncated_bytes, found.tail.seq_durable), (9, 0, 5));
    let (mut j, tail) = ok(Journal::open(&dir, 1 << 20));
    assert_eq!((tail.seq_last, tail.truncated_bytes, tail.seq_durable), (9, 0, 5));
    ok(j.append(&frame(10..=12), 10, 12));
    ok(j.seal());
    drop(j);
    assert_eq!(read_all(&dir, 1), (1..=12).collect::<Vec<_>>());
    let frames = a + b + frame(10..=12).len() as u64;
    assert_eq!(ok(fs::metadata(&seg)).len(), frames + 3 * MARK_FRAME_BYTES as u64, "closed: trimmed");
    let _ = fs::remove_dir_all(&dir);
}

/// A frame torn over the zeros ahead (a crash mid-write) is a torn tail: cut, with the zeros.
#[test]
fn a_frame_torn_over_the_zeros_ahead_is_cut() {
    let (dir, seg, end, _, _) = crashed_with_zeros("zeros-torn");
    let len = ok(fs::metadata(&seg)).len();
    let torn = frame(10..=12);
    write_at(&seg, end, &torn[..torn.len() - 5]);
    let found = ok(inspect(&dir, None));
    assert_eq!((found.tail.seq_last, found.tail.truncated_bytes), (9, len - end), "the tear and the zeros");
    let (_, tail) = ok(Journal::open(&dir, 1 << 20));
    assert_eq!(tail.seq_last, 9);
    assert_eq!(read_all(&dir, 1), (1..=9).collect::<Vec<_>>());
    let _ = fs::remove_dir_all(&dir);
}

/// Durable frames that read back as zeros (a lost write) with valid frames after them are
/// corruption, never an end: refused, nothing changed.
#[test]
fn zeros_where_durable_frames_were_are_corruption() {
    let (dir, seg, _, a, _) = crashed_with_zeros("zeros-lost");
    write_at(&seg, 0, &vec![0u8; a as usize]);
    let before = ok(fs::read(&seg));
    match Journal::open(&dir, 1 << 20) {
        Err(JournalError::Corrupt { offset, reason, seqs, .. }) => {
            assert_eq!(offset, 0);
            assert!(reason.contains("zeros where a frame should start"), "{reason}");
            assert!(seqs.contains(&format!("the next valid frame starts at byte {a}")), "{seqs}");
        }
        other => panic!("expected corruption, got {:?}", other.map(|(_, t)| t)),
    }
    assert!(matches!(inspect(&dir, None), Err(JournalError::Corrupt { offset: 0, .. })));
    assert_eq!(ok(fs::read(&seg)), before, "not a byte changed");
    let _ = fs::remove_dir_all(&dir);
}

/// A reader tailing the journal meets the writer's frame half written over the zeros ahead: it
/// stops there without an error, and reads the frame once it is whole.
#[test]
fn a_tailing_reader_stops_at_a_frame_in_progress() {
    let (dir, seg, end, _, _) = crashed_with_zeros("zeros-tail");
    let next = frame(10..=12);
    write_at(&seg, end, &next[..next.len() - 5]);
    assert_eq!(read_all(&dir, 1), (1..=9).collect::<Vec<_>>(), "the frame in progress is not read");
    write_at(&seg, end + next.len() as u64 - 5, &next[next.len() - 5..]);
    assert_eq!(read_all(&dir, 1), (1..=12).collect::<Vec<_>>());
    // Damage is not taken for a frame in progress: a bad frame with a valid one after it.
    write_at(&seg, end + next.len() as u64, &frame(13..=14));
    write_at(&seg, end + 20, &[0xff]);
    let mut r = ok(JournalReader::open(&dir, 1));
    let mut out = Vec::new();
    let err = loop {
        match r.next_batch(&mut out) {
            Ok(true) => {}
            Ok(false) => panic!("read to the end past a damaged frame: {:?}", out.len()),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, JournalError::Corrupt { .. }), "{err}");
    let _ = fs::remove_dir_all(&dir);
}
