use super::*;
use crate::journal::Journal;
use rtgs_core::entry::{AccountId, CenterId, Currency, Payload, Transfer};
use rtgs_core::sequencer::{Admission, Sequencer};

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rtgs-bmi-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

fn transfer(bmi: &str, amount: u64) -> Command {
    Command {
        origin: CenterId(1),
        bmi: ok(Bmi::new(bmi.as_bytes())),
        payload: Payload::Transfer(Transfer {
            debtor: AccountId(1),
            creditor: AccountId(2),
            amount_minor: amount,
            currency: ok(Currency::new(b"EUR")),
        }),
    }
}

fn small() -> BmiIndexConfig {
    BmiIndexConfig { recent_entries: 50, filter_keys_first: 64, merge_fanout: 3 }
}

/// A sequencer, its index and a journal, driven as the embedded engine's threads drive them.
struct Rig {
    dir: PathBuf,
    sequencer: Sequencer,
    index: BmiIndex,
    journal: Journal,
    written: Arc<AtomicU64>,
}

impl Rig {
    fn open(dir: &Path, config: BmiIndexConfig) -> Rig {
        let (journal, tail) = ok(Journal::open(&dir.join("journal"), 1 << 12));
        let written = Arc::new(AtomicU64::new(tail.seq_last));
        let index =
            ok(BmiIndex::open(dir, &dir.join("journal"), tail.seq_last, Arc::clone(&written), config));
        let mut sequencer = Sequencer::new(CenterId(1), 0);
        sequencer.resume_at(tail.seq_last + 1, tail.epoch_last, 0);
        sequencer.begin_epoch(tail.epoch_last + 1);
        Rig { dir: dir.to_path_buf(), sequencer, index, journal, written }
    }

    fn submit(&mut self, commands: Vec<Command>) -> Vec<Admission> {
        let (mut lookups, mut entries, mut admissions) = (Vec::new(), Vec::new(), Vec::new());
        let resolved = ok(self.index.resolve(&commands, &mut lookups));
        self.sequencer.handle_commands(1, commands, &lookups, &mut entries, &mut admissions);
        let keys: Vec<u64> = admissions
            .iter()
            .zip(&lookups)
            .filter(|(a, _)| matches!(a, Admission::Sequenced(_)))
            .map(|(_, l)| l.key)
            .collect();
        ok(self.index.record(resolved, &entries, &keys));
        if let (Some(f), Some(l)) = (entries.first(), entries.last()) {
            let mut frames = Vec::new();
            rtgs_core::codec::encode_frame(&entries, &mut frames);
            ok(self.journal.append(&frames, f.seq, l.seq));
            ok(self.journal.seal());
            self.written.store(l.seq, Ordering::Release);
        }
        admissions
    }

    /// Waits until the writer has put everything frozen on disk.
    fn settle(&mut self) {
        for _ in 0..2_000 {
            self.index.absorb();
            if self.index.frozen.is_empty() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        panic!("the bmi index writer did not catch up");
    }
}

#[test]
fn the_filter_never_forgets_and_rarely_lies() {
    let mut f = Filter::new(1 << 10);
    let key = |i: u64| siphash13([7, 9], &i.to_le_bytes());
    for i in 0..200_000 {
        f.insert(key(i));
    }
    assert!(f.generations.len() >= 5, "grew by generations: {}", f.generations.len());
    assert!((0..200_000).all(|i| f.contains(key(i))), "no false negative");
    let positives = (1_000_000..2_000_000).filter(|&i| f.contains(key(i))).count();
    // ≈ 10⁻³ for the first generation, ≈ 10⁻² for each later one (fewer bits per key).
    let bound = 1_500 + 15_000 * (f.generations.len() - 1);
    assert!(positives < bound, "{positives} false positives in 10⁶ (bound {bound})");
    // Each generation knows the seqs of its keys once told; positives search only there.
    let since = f.newest();
    f.insert(key(7_777_777));
    f.cover(since, 500, 600);
    let mut ranges = Vec::new();
    f.matching(key(7_777_777), &mut ranges);
    assert!(ranges.contains(&(500, 600)), "{ranges:?}");
}

#[test]
fn a_retry_older_than_memory_gets_its_original_seq_and_a_different_content_conflicts() {
    let dir = tempdir("old");
    let mut rig = Rig::open(&dir, small());
    assert_eq!(rig.submit(vec![transfer("FIRST", 7)]), vec![Admission::Sequenced(1)]);
    for k in 0..60u64 {
        let batch = (0..20).map(|i| transfer(&format!("N{k}-{i}"), 1)).collect();
        rig.submit(batch);
    }
    rig.settle();
    let stats = rig.index.stats();
    assert!(stats.runs >= 1 && stats.merges >= 1, "on disk and merged: {stats:?}");
    assert!(rig
        .index
        .current
        .get(rig.index.key_of(&ok(Bmi::new(b"FIRST"))), &ok(Bmi::new(b"FIRST")))
        .is_none());
    // A status question finds it too (on disk), and one never used is not found and not added:
    // sequenced afterwards, it is new.
    let bmi = |text: &str| ok(Bmi::new(text.as_bytes()));
    assert_eq!(ok(rig.index.known(&bmi("FIRST"))).map(|k| k.seq), Some(1));
    assert_eq!(ok(rig.index.known(&bmi("N59-19"))).map(|k| k.seq), Some(1201));
    assert_eq!(ok(rig.index.known(&bmi("ASKED-FIRST"))), None);
    assert_eq!(rig.submit(vec![transfer("ASKED-FIRST", 1)]), vec![Admission::Sequenced(1202)]);
    assert_eq!(ok(rig.index.known(&bmi("ASKED-FIRST"))).map(|k| k.seq), Some(1202));
    let answers = rig.submit(vec![transfer("FIRST", 7), transfer("FIRST", 8), transfer("N3-4", 1)]);
    assert_eq!(answers, vec![Admission::Duplicate(1), Admission::Conflict(1), Admission::Duplicate(66)]);
    let stats = rig.index.stats();
    assert!(stats.old_hits >= 2 && stats.journal_reads >= 2, "{stats:?}");
    drop(rig);
    let _ = fs::remove_dir_all(&dir);
}

/// Every one of the 400 `R{k}-{i}` bmis, retried, gets its own seq: whichever filter generation,
/// run, frozen or recent generation holds it.
fn every_one_is_known(rig: &mut Rig) {
    for k in 0..40u64 {
        let answers = rig.submit((0..10).map(|i| transfer(&format!("R{k}-{i}"), k)).collect());
        let expected: Vec<Admission> = (0..10).map(|i| Admission::Duplicate(k * 10 + i + 1)).collect();
        assert_eq!(answers, expected, "batch {k}");
    }
    assert!(rig.index.filter.generations.len() >= 3, "several filter generations were searched");
}

#[test]
fn a_restart_reloads_the_runs_and_replays_the_journal_after_them() {
    let dir = tempdir("restart");
    let mut rig = Rig::open(&dir, small());
    for k in 0..40u64 {
        rig.submit((0..10).map(|i| transfer(&format!("R{k}-{i}"), k)).collect());
    }
    rig.settle();
    let on_disk = rig.index.stats().run_entries;
    assert!(on_disk > 0);
    every_one_is_known(&mut rig);
    drop(rig);
    let mut rig = Rig::open(&dir, small());
    every_one_is_known(&mut rig);
    let stats = rig.index.stats();
    assert_eq!(stats.run_entries, on_disk, "the runs are reused: {stats:?}");
    assert_eq!(stats.replayed_at_open, 400 - on_disk, "only the journal after them is replayed");
    assert_eq!(
        rig.submit(vec![transfer("R0-0", 0), transfer("R39-9", 39), transfer("R5-5", 6), transfer("NEW", 1)]),
        vec![
            Admission::Duplicate(1),
            Admission::Duplicate(400),
            Admission::Conflict(56),
            Admission::Sequenced(401)
        ]
    );
    drop(rig);
    // Runs lost or damaged: rebuilt from the journal, same answers.
    let runs: Vec<PathBuf> = ok(fs::read_dir(dir.join("bmi-index")))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "bmi"))
        .collect();
    assert!(!runs.is_empty());
    let mut bytes = ok(fs::read(&runs[0]));
    let n = bytes.len();
    bytes[n - 3] ^= 1;
    ok(fs::write(&runs[0], bytes));
    let mut rig = Rig::open(&dir, small());
    let stats = rig.index.stats();
    assert!(stats.runs_discarded >= 1, "{stats:?}");
    assert_eq!(
        rig.submit(vec![transfer("R0-0", 0), transfer("R5-5", 5), transfer("NEW", 1)]),
        vec![Admission::Duplicate(1), Admission::Duplicate(56), Admission::Duplicate(401)]
    );
    drop(rig);
    // Another key (KEY lost): every run is useless and rebuilt.
    ok(fs::remove_file(dir.join("bmi-index/KEY")));
    let mut rig = Rig::open(&dir, small());
    assert_eq!(rig.index.stats().replayed_at_open, 401);
    assert_eq!(rig.submit(vec![transfer("R7-1", 7)]), vec![Admission::Duplicate(72)]);
    let _ = rig.dir.clone();
    drop(rig);
    let _ = fs::remove_dir_all(&dir);
}

/// The writer's bucket sort orders records exactly as a comparison sort does: random keys, keys
/// crowded into one bucket (top bits equal), equal keys with different seqs, empty input.
#[test]
fn run_records_sort_like_a_comparison_sort() {
    let mut prng = rtgs_core::prng::Prng::new(11);
    let random: Vec<(u64, Seq)> = (0..50_000).map(|i| (prng.next_u64(), i)).collect();
    let crowded: Vec<(u64, Seq)> = (0..5_000).map(|i| (0xABCD << 48 | prng.below(1 << 20), i)).collect();
    let equal: Vec<(u64, Seq)> = (0..1_000).map(|i| (prng.below(7) << 60, 1_000 - i)).collect();
    for records in [random, crowded, equal, Vec::new()] {
        let mut expected = records.clone();
        expected.sort_unstable();
        let mut out = vec![(1, 1)];
        sort_records(&records, &mut out);
        assert_eq!(out, expected);
    }
}

#[test]
fn tables_made_at_open_are_zero_and_ready_for_the_first_rotations() {
    // Larger than a huge page: advised and touched page by page, every value still zero.
    let table = Table::<u64>::resident((3 << 20) / 8 + 5);
    assert_eq!(table.len(), (3 << 20) / 8 + 5);
    assert!(table.iter().all(|&slot| slot == 0), "touching pages wrote only zeros");
    let tiny = Table::<u64>::resident(3);
    assert!(tiny.len() == 3 && tiny.iter().all(|&w| w == 0));

    let dir = tempdir("resident");
    let mut rig = Rig::open(&dir, small());
    assert_eq!(rig.index.spares.len(), SPARES, "spares for the first rotations made at open");
    assert!(!rig.index.filter.opening, "filter generations made after open are not resident");
    // Two rotations take the spares; the generations still answer exactly.
    let first: Vec<Command> = (0..120).map(|i| transfer(&format!("R{i}"), 1)).collect();
    rig.submit(first.clone());
    assert!(rig.index.spares.len() < SPARES, "a rotation took a spare");
    let again = rig.submit(first);
    assert!(again.iter().all(|a| matches!(a, Admission::Duplicate(_))), "{again:?}");
    let _ = fs::remove_dir_all(&dir);
}

/// A recent generation's slots keep only the key's high half: keys that share it (and their home
/// slot), keys that are equal, and different `bmi`s under one key are still told apart.
#[test]
fn a_generation_tells_apart_keys_that_share_a_slot_half() {
    let known =
        |seq: Seq| Known { seq, content: rtgs_core::sequencer::Content::of(&transfer("X", seq).payload) };
    let recent = |text: &str, seq: Seq| Recent { bmi: ok(Bmi::new(text.as_bytes())), known: known(seq) };
    let bmi = |text: &str| ok(Bmi::new(text.as_bytes()));
    let mut g = Generation::new(1, 8);
    let (k1, k2) = (0xAAAA_BBBB_0000_0001u64, 0xAAAA_BBBB_0001_0001u64); // same half, same home
    g.insert(k1, recent("A", 1));
    g.insert(k2, recent("B", 2));
    g.insert(k2, recent("C", 3)); // another bmi under the same key
    g.insert(k1, recent("A", 4)); // a repeat: the first entry stays the answer
    assert_eq!(g.len(), 3);
    assert_eq!(g.get(k1, &bmi("A")).map(|k| k.seq), Some(1));
    assert_eq!(g.get(k2, &bmi("B")).map(|k| k.seq), Some(2));
    assert_eq!(g.get(k2, &bmi("C")).map(|k| k.seq), Some(3));
    assert_eq!(g.get(k1, &bmi("B")), None, "B is under k2, not k1");
    assert_eq!(g.get(k2, &bmi("A")), None, "A is under k1, not k2");
    assert_eq!(g.get(0xAAAA_BBBB_0002_0001, &bmi("A")), None);
    let (frozen, _) = g.freeze();
    let mut out = Vec::new();
    frozen.candidates(k1, &mut out);
    assert_eq!(out, vec![1], "the frozen index names k1's records only");
    out.clear();
    frozen.candidates(k2, &mut out);
    out.sort_unstable();
    assert_eq!(out, vec![2, 3]);
}
