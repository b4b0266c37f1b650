//! # rtgs-bench: component and pipeline benchmarks
//!
//! # Layout
//! A deliberately tiny harness (no criterion: its dependency tree costs minutes to build on a
//! 2-core host): each benchmark runs a closure over a fixed batch, repeats for about a second
//! after a warm-up, and reports the median of five such runs as ns per item and items per second.
//!
//! `cargo run --release -p rtgs-bench [-- FILTER]` — see `bench/README.md` for figures.

use rtgs_core::codec;
use rtgs_core::entry::{AccountId, Bmi, CenterId, Command, Currency, Entry, Outcome, Payload, Transfer};
use rtgs_core::finalizer::Finalizer;
use rtgs_core::gap_buffer::{gap_buffer, Insert};
use rtgs_core::ledger::{Applied, Ledger};
use rtgs_core::prng::Prng;
use rtgs_core::sequencer::{Lookup, Sequencer};
use rtgs_embedded::bmi_index::{BmiIndex, BmiIndexConfig};
use rtgs_embedded::cluster::{ClientEvent, Cluster, ClusterConfig};
use rtgs_embedded::journal::Journal;
use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

const BATCH: usize = 8_192;
const ACCOUNTS: u64 = 10_000;

fn eur() -> Currency {
    Currency::new(b"EUR").unwrap_or_else(|_| unreachable!())
}

fn transfer_command(prng: &mut Prng, n: u64) -> Command {
    let debtor = 1 + prng.below(ACCOUNTS);
    let creditor = 1 + (debtor + prng.below(ACCOUNTS - 1)) % ACCOUNTS;
    Command {
        origin: CenterId((n % 3) as u8 + 1),
        bmi: Bmi::numbered("B-", n).unwrap_or_else(|_| unreachable!()),
        payload: Payload::Transfer(Transfer {
            debtor: AccountId(debtor),
            creditor: AccountId(creditor),
            amount_minor: 1 + prng.below(5_000),
            currency: eur(),
        }),
    }
}

fn entries(count: usize, seq_first: u64) -> Vec<Entry> {
    let mut prng = Prng::new(1);
    (0..count as u64)
        .map(|i| {
            let c = transfer_command(&mut prng, seq_first + i);
            Entry {
                seq: seq_first + i,
                epoch: 1,
                timestamp_us: 1,
                origin: c.origin,
                bmi: c.bmi,
                payload: c.payload,
            }
        })
        .collect()
}

/// Runs `f` (which processes `items` items per call) repeatedly; prints the median rate.
fn bench(name: &str, items: usize, mut f: impl FnMut()) {
    bench_with_setup(name, items, || (), |()| f());
}

/// Like [`bench`], but each call's input is made by `setup`, which is not timed.
fn bench_with_setup<T>(name: &str, items: usize, mut setup: impl FnMut() -> T, mut f: impl FnMut(T)) {
    let filter = std::env::args().nth(1).unwrap_or_default();
    if !name.contains(&filter) {
        return;
    }
    let mut timed = |budget: Duration| {
        let (mut spent, mut calls) = (Duration::ZERO, 0u64);
        while spent < budget {
            let input = setup();
            let start = Instant::now();
            f(input);
            spent += start.elapsed();
            calls += 1;
        }
        spent.as_nanos() as f64 / (calls as f64 * items as f64)
    };
    timed(Duration::from_millis(200));
    let mut rates: Vec<f64> = (0..5).map(|_| timed(Duration::from_millis(200))).collect();
    rates.sort_by(f64::total_cmp);
    let ns = rates[2];
    println!("{name:<44} {ns:>9.1} ns/item {:>14.0} items/s", 1e9 / ns);
}

fn main() {
    println!("{:<44} {:>17} {:>22}", "benchmark", "median", "throughput");

    // Sequencer: stamp a batch of fresh transfers (repeats within the batch looked for, entries
    // built), the driver's look-ups given. Making the commands is setup, outside the timing.
    let mut prng = Prng::new(7);
    let mut seq = Sequencer::new(CenterId(1), 1);
    let mut n = 0u64;
    let mut out = Vec::with_capacity(BATCH);
    let mut adm = Vec::with_capacity(BATCH);
    bench_with_setup(
        "sequencer: handle_commands (8192/batch)",
        BATCH,
        || {
            (0..BATCH)
                .map(|_| {
                    n += 1;
                    let c = transfer_command(&mut prng, n);
                    (Lookup { key: rtgs_core::hash::bytes64(5, c.bmi.as_bytes()), known: None }, c)
                })
                .unzip::<_, _, Vec<_>, Vec<_>>()
        },
        |(lookups, batch)| {
            out.clear();
            adm.clear();
            seq.handle_commands(1, batch, &lookups, &mut out, &mut adm);
            black_box(&out);
        },
    );
    bmi_index();

    let batch = entries(BATCH, 1);
    let mut buf = Vec::with_capacity(BATCH * 80);
    bench("codec: encode_frame (8192 entries)", BATCH, || {
        buf.clear();
        codec::encode_frame(&batch, &mut buf);
        black_box(&buf);
    });
    let mut decoded = Vec::with_capacity(BATCH);
    bench("codec: decode_frame (check + parse)", BATCH, || {
        decoded.clear();
        black_box(codec::decode_frame(&buf, &mut decoded).ok());
    });

    // Gap buffer, one thread: insert a batch out of order, drain it.
    let (p, mut c) = gap_buffer::<Entry>(rtgs_core::limits::GAP_BUFFER_SLOTS, 1);
    let mut next = 1u64;
    let mut template = entries(BATCH, 1);
    bench("gap buffer: insert (reversed pairs) + drain", BATCH, || {
        for (i, e) in template.iter_mut().enumerate() {
            e.seq = next + (i as u64 ^ 1);
        }
        for e in &template {
            if let Insert::Full(_) = p.insert(e.seq, e.clone()) {
                unreachable!("window full");
            }
        }
        let drained = c.drain(usize::MAX, 0, |_, e| {
            black_box(e);
        });
        assert_eq!(drained, BATCH);
        next += BATCH as u64;
    });

    // Gap buffer across threads: a producer thread inserts, this thread drains.
    {
        let total = 4_000_000u64;
        let (p, mut c) = gap_buffer::<u64>(rtgs_core::limits::GAP_BUFFER_SLOTS, 1);
        let start = Instant::now();
        let producer = std::thread::spawn(move || {
            let mut s = 1;
            while s <= total {
                match p.insert(s, s) {
                    Insert::Full(_) => std::thread::yield_now(),
                    _ => s += 1,
                }
            }
        });
        let mut got = 0u64;
        while got < total {
            got += c.drain(usize::MAX, 0, |_, v| {
                black_box(v);
            }) as u64;
        }
        let _ = producer.join();
        let ns = start.elapsed().as_nanos() as f64 / total as f64;
        if "gap buffer: producer thread → consumer thread"
            .contains(&std::env::args().nth(1).unwrap_or_default())
        {
            println!(
                "{:<44} {ns:>9.1} ns/item {:>14.0} items/s",
                "gap buffer: producer thread → consumer thread",
                1e9 / ns
            );
        }
    }

    // Ledger apply over 10,000 funded accounts.
    let mut ledger = Ledger::new();
    let mut s = 0u64;
    let mut apply = |l: &mut Ledger, p: Payload| {
        s += 1;
        l.apply(&Entry { seq: s, epoch: 1, timestamp_us: s, origin: CenterId(1), bmi: Bmi::NONE, payload: p })
    };
    for a in 1..=ACCOUNTS {
        apply(&mut ledger, Payload::AccountOpen { account: AccountId(a), currency: eur() });
        apply(&mut ledger, Payload::AccountFund { account: AccountId(a), amount_minor: 1 << 40 });
    }
    let mut stream = entries(BATCH, 1);
    bench("ledger: apply transfer (10k accounts)", BATCH, || {
        for e in stream.iter_mut() {
            s += 1;
            e.seq = s;
            black_box(ledger.apply(e));
        }
    });

    // Quorum tally: three centers ack every seq; each seq becomes final once.
    let mut fin = Finalizer::new(3);
    let mut fseq = 0u64;
    let mut finals = Vec::with_capacity(BATCH);
    bench("finalizer: 3 acks per seq (per seq)", BATCH, || {
        finals.clear();
        let first = fseq + 1;
        for center in 1..=3u8 {
            for i in 0..BATCH as u64 {
                let a = Applied { seq: first + i, outcome: Outcome::Accepted, state_hash: first + i };
                fin.handle_ack(CenterId(center), a, &mut finals);
            }
        }
        fseq += BATCH as u64;
        assert_eq!(finals.len(), BATCH);
    });

    pipeline();
}

/// The embedded `bmi` index with 10,000,000 `bmi`s known (in the journal and the index's runs):
/// a new `bmi` (look-up and record: the hot path) and a retry of an old one (a run's block and
/// the journal read back).
fn bmi_index() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    if !"bmi index".contains(&filter) && !filter.contains("bmi index") {
        return;
    }
    const KNOWN: u64 = 10_000_000;
    let dir = std::env::temp_dir().join(format!("rtgs-bench-bmi-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let Ok((mut journal, _)) = Journal::open(&dir.join("journal"), rtgs_embedded::limits::SEGMENT_BYTES_MAX)
    else {
        println!("bmi index: cannot open a journal in {}", dir.display());
        return;
    };
    let written = Arc::new(AtomicU64::new(u64::MAX));
    let Ok(mut index) = BmiIndex::open(&dir, &dir.join("journal"), 0, written, BmiIndexConfig::default())
    else {
        println!("bmi index: cannot open it in {}", dir.display());
        return;
    };
    let started = Instant::now();
    let mut prng = Prng::new(11);
    let mut seq_next = 1u64;
    let (mut lookups, mut keys, mut frames) =
        (Vec::with_capacity(BATCH), Vec::with_capacity(BATCH), Vec::new());
    let mut n = 0u64;
    let mut next_batch = |prng: &mut Prng| {
        let batch: Vec<Command> = (0..BATCH as u64).map(|i| transfer_command(prng, n + i)).collect();
        n += BATCH as u64;
        batch
    };
    // The writer thread's part, never timed: the batch's entries appended to the journal.
    let mut stamp_and_append = |batch: &[Command], journal: &mut Journal| {
        let entries = stamped(batch, seq_next);
        frames.clear();
        codec::encode_frame(&entries, &mut frames);
        let _ = journal.append(&frames, seq_next, seq_next + entries.len() as u64 - 1);
        seq_next += entries.len() as u64;
        entries
    };
    for _ in 0..KNOWN / BATCH as u64 {
        let batch = next_batch(&mut prng);
        let entries = stamp_and_append(&batch, &mut journal);
        index_step(&mut index, &batch, &entries, &mut lookups, &mut keys);
    }
    let _ = journal.seal();
    let stats = index.stats();
    println!(
        "bmi index: {} bmis known after {:.1} s ({} runs, {} merges, filter {} MiB in {} generations)",
        stats.lookups,
        started.elapsed().as_secs_f64(),
        stats.runs,
        stats.merges,
        stats.filter_bytes >> 20,
        stats.filter_generations
    );
    // Timed: the sequencer thread's part only (look-up and record).
    bench_with_setup(
        "bmi index: resolve + record a new bmi (10 M known)",
        BATCH,
        || {
            let batch = next_batch(&mut prng);
            let entries = stamp_and_append(&batch, &mut journal);
            (batch, entries)
        },
        |(batch, entries)| index_step(&mut index, &batch, &entries, &mut lookups, &mut keys),
    );
    let mut old = Vec::with_capacity(64);
    let mut old_prng = Prng::new(13);
    bench_with_setup(
        "bmi index: resolve a retry of an old bmi",
        64,
        || {
            // Setup re-makes the original commands (same seed order is not needed: the bmi and
            // content are what the look-up reads).
            (0..64)
                .map(|_| {
                    let n = old_prng.below(KNOWN / 2);
                    transfer_command(&mut old_prng, n)
                })
                .collect::<Vec<_>>()
        },
        |batch| {
            old.clear();
            // A retry answered: nothing to record.
            let _ = index.resolve(&batch, &mut old).map(drop);
            black_box(&old);
        },
    );
    let stats = index.stats();
    println!(
        "bmi index: {} look-ups, {} filter positives, {} old hits, {} journal reads, {} block reads",
        stats.lookups, stats.filter_positives, stats.old_hits, stats.journal_reads, stats.run_block_reads
    );
    drop(index);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The entries the sequencer makes of `commands` (all new) from `seq_first`.
fn stamped(commands: &[Command], seq_first: u64) -> Vec<Entry> {
    commands
        .iter()
        .enumerate()
        .map(|(i, c)| Entry {
            seq: seq_first + i as u64,
            epoch: 1,
            timestamp_us: 1,
            origin: c.origin,
            bmi: c.bmi,
            payload: c.payload.clone(),
        })
        .collect()
}

/// One batch through the `bmi` index as the sequencer thread drives it: look up, then record
/// what was sequenced.
fn index_step(
    index: &mut BmiIndex,
    batch: &[Command],
    entries: &[Entry],
    lookups: &mut Vec<Lookup>,
    keys: &mut Vec<u64>,
) {
    lookups.clear();
    let resolved = index.resolve(batch, lookups);
    keys.clear();
    keys.extend(lookups.iter().map(|l| l.key));
    if let Ok(resolved) = resolved {
        let _ = index.record(resolved, entries, keys);
    }
}

/// The whole embedded pipeline, fsync on: 2,000,000 transfers through three centers.
fn pipeline() {
    let name = "pipeline: embedded cluster, 3 centers, fsync";
    if !name.contains(&std::env::args().nth(1).unwrap_or_default()) {
        return;
    }
    let total = 2_000_000u64;
    let dir = std::env::temp_dir().join(format!("rtgs-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let Ok(cluster) = Cluster::start(&ClusterConfig::new(&dir)) else {
        println!("{name}: cannot start the cluster in {}", dir.display());
        return;
    };
    let submitter = cluster.submitter();
    let mut setup = Vec::new();
    for a in 1..=ACCOUNTS {
        let bmi = |p: &str| Bmi::numbered(p, a).unwrap_or_else(|_| unreachable!());
        setup.push(Command {
            origin: CenterId(1),
            bmi: bmi("O"),
            payload: Payload::AccountOpen { account: AccountId(a), currency: eur() },
        });
        setup.push(Command {
            origin: CenterId(1),
            bmi: bmi("F"),
            payload: Payload::AccountFund { account: AccountId(a), amount_minor: 1 << 40 },
        });
    }
    let expected_setup = setup.len() as u64;
    let feeder = std::thread::spawn(move || {
        for chunk in setup.chunks(1024) {
            let _ = submitter.submit(chunk.to_vec());
        }
        let mut prng = Prng::new(3);
        let mut n = 0;
        while n < total {
            let chunk: Vec<Command> = (0..1024).map(|i| transfer_command(&mut prng, n + i)).collect();
            n += 1024;
            let _ = submitter.submit(chunk);
        }
    });
    let mut finals = 0u64;
    let mut start = Instant::now();
    let want = expected_setup + total.div_ceil(1024) * 1024;
    while finals < want {
        match cluster.events().recv_timeout(Duration::from_secs(30)) {
            Ok(ClientEvent::Final(n)) => {
                if finals < expected_setup && finals + n.len() as u64 >= expected_setup {
                    start = Instant::now();
                }
                finals += n.len() as u64;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let elapsed = start.elapsed();
    let _ = feeder.join();
    let report = cluster.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
    let done = finals.saturating_sub(expected_setup);
    let ns = elapsed.as_nanos() as f64 / done.max(1) as f64;
    println!("{name:<44} {ns:>9.1} ns/item {:>14.0} items/s  (errors: {})", 1e9 / ns, report.errors.len());
}
