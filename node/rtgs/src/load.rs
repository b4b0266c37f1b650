//! `rtgs load`: generate N transfers, submit them to a running production cluster through the
//! inbound topic, and measure until every one is final (a notice from its origin center).
//!
//! Setup first opens and funds `--accounts` accounts (ids `--account-base + 1 ..`; an account
//! that exists already is answered RT01, which is fine) and waits for those to be final. Then the
//! transfers go out in messages of `--batch` commands, the origin center rotating per message,
//! at `--rate` transfers/s (0: as fast as the broker takes them). Each `bmi` is
//! `RUN-T<i>`, so a run's payments are found in the databases by prefix.
//!
//! The report: submitted, settled (ACCC), rejected (RJCT by reason), refused (DUPL at the
//! sequencer), missing, notices repeated (notices are at-least-once across a node crash),
//! throughput (first submit → last final) and submit → final latency percentiles. Exit status 1
//! if any transfer is not final before `--timeout-s`.

use clap::Args;
use hdrhistogram::Histogram;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use rtgs_core::codec;
use rtgs_core::entry::{AccountId, Bmi, CenterId, Command, Currency, Payload, RejectReason, Transfer};
use rtgs_core::prng::Prng;
use rtgs_kafka::topics::TopicNames;
use rtgs_kafka::wire::{self, NoticeStatus};
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Transfers to submit.
    #[arg(long, default_value_t = 50_000)]
    pub transfers: u64,
    /// Accounts to open, fund and pay between.
    #[arg(long, default_value_t = 1_000)]
    pub accounts: u64,
    /// First account id is BASE + 1.
    #[arg(long, default_value_t = 0)]
    pub account_base: u64,
    /// Funding per account, in minor units.
    #[arg(long, default_value_t = 100_000_000)]
    pub fund_minor: u64,
    /// Transfers per second (0: as fast as possible).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Commands per inbound message.
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Centers to spread the origin over, 1..=N (each notifies its own participants).
    #[arg(long, default_value_t = 3)]
    pub centers: u8,
    /// Origin centers, e.g. `1,2` (instead of 1..=--centers): a drill that stops a center keeps
    /// its participants out of the run.
    #[arg(long, value_delimiter = ',')]
    pub origins: Vec<u8>,
    #[arg(long, env = "RTGS_BOOTSTRAP", default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    #[arg(long, env = "RTGS_TOPIC_PREFIX", default_value = "rtgs")]
    pub topic_prefix: String,
    /// Prefix of every bmi of this run (default: derived from the clock).
    #[arg(long)]
    pub run_id: Option<String>,
    /// Seed of the generated transfers.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Give up waiting for finality after this many seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout_s: u64,
    /// Do not open and fund the accounts (they exist).
    #[arg(long)]
    pub skip_setup: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// The notice reader's broker fetch wait, in milliseconds: each fetch costs the broker
    /// (tansu) CPU whether or not it finds anything, so a throughput run on the cluster's own
    /// cores reads with a long one (`bench/cluster.sh`: 100); latencies then carry up to it.
    #[arg(long, default_value_t = rtgs_kafka::clients::FETCH_WAIT_MS)]
    pub fetch_wait_ms: u64,
}

#[derive(Serialize)]
struct Report {
    run_id: String,
    submitted: u64,
    settled: u64,
    rejected: BTreeMap<String, u64>,
    refused: u64,
    missing: u64,
    /// The first few missing `bmi`s (for the investigation a missing notice deserves).
    missing_first: Vec<String>,
    notices_repeated: u64,
    /// Notices the live reader had not delivered but a second read of the notice topic found
    /// (done when finality stalls with transfers missing): a consumer-side loss, not the node's.
    notices_found_on_reread: u64,
    setup_s: f64,
    submit_s: f64,
    elapsed_s: f64,
    finalized_per_s: f64,
    latency_ms_p50: f64,
    latency_ms_p90: f64,
    latency_ms_p99: f64,
    latency_ms_max: f64,
    ok: bool,
}

const STATUS_NONE: u8 = 0;
const STATUS_SETTLED: u8 = 1;
const STATUS_REFUSED: u8 = 2;
/// Rejected: 16 + reason code.
const STATUS_REJECTED: u8 = 16;

/// What the notice collector fills in, indexed by transfer number (setup: opens then funds).
struct Tracker {
    run_id: String,
    submitted_ns: Vec<AtomicU64>,
    final_ns: Vec<AtomicU64>,
    status: Vec<AtomicU8>,
    setup_status: Vec<AtomicU8>,
    finals: AtomicU64,
    setup_finals: AtomicU64,
    repeated: AtomicU64,
}

impl Tracker {
    /// (kind, index) from a bmi of this run: `RUN-T12`, `RUN-O3`, `RUN-F3`.
    fn parse(&self, bmi: &Bmi) -> Option<(u8, usize)> {
        let rest = bmi.as_str().strip_prefix(self.run_id.as_str())?.strip_prefix('-')?;
        let kind = *rest.as_bytes().first()?;
        Some((kind, rest[1..].parse().ok()?))
    }
}

pub fn run(args: LoadArgs) -> anyhow::Result<ExitCode> {
    if args.batch == 0 || args.accounts < 2 || args.centers == 0 || args.origins.contains(&0) {
        anyhow::bail!("--batch must be ≥ 1, --accounts ≥ 2, --centers ≥ 1 and every origin ≥ 1");
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let report = rt.block_on(load(&args))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "load {}: {} submitted, {} settled, {:?} rejected, {} refused, {} MISSING, {} notices repeated",
            report.run_id,
            report.submitted,
            report.settled,
            report.rejected,
            report.refused,
            report.missing,
            report.notices_repeated
        );
        println!(
            "  setup {:.2} s, submit {:.2} s, all final after {:.2} s: {:.0} finalized/s; submit→final \
             p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            report.setup_s,
            report.submit_s,
            report.elapsed_s,
            report.finalized_per_s,
            report.latency_ms_p50,
            report.latency_ms_p90,
            report.latency_ms_p99,
            report.latency_ms_max
        );
    }
    Ok(if report.ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn bmi(run: &str, kind: char, i: u64) -> anyhow::Result<Bmi> {
    Bmi::new(format!("{run}-{kind}{i}").as_bytes()).map_err(|e| anyhow::anyhow!("bmi of run {run:?}: {e:?}"))
}

async fn load(args: &LoadArgs) -> anyhow::Result<Report> {
    let topics = TopicNames::with_prefix(&args.topic_prefix);
    let run_id =
        args.run_id.clone().unwrap_or_else(|| format!("L{:08x}", rtgs_engine::clock::wall_us() as u32));
    let n = args.transfers as usize;
    let a = args.accounts as usize;
    let tracker = Arc::new(Tracker {
        run_id: run_id.clone(),
        submitted_ns: (0..n).map(|_| AtomicU64::new(0)).collect(),
        final_ns: (0..n).map(|_| AtomicU64::new(0)).collect(),
        status: (0..n).map(|_| AtomicU8::new(STATUS_NONE)).collect(),
        setup_status: (0..2 * a).map(|_| AtomicU8::new(STATUS_NONE)).collect(),
        finals: AtomicU64::new(0),
        setup_finals: AtomicU64::new(0),
        repeated: AtomicU64::new(0),
    });
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(args.timeout_s);
    let link = Arc::new(Link {
        bootstrap: args.bootstrap.clone(),
        group: format!("{}.load-{run_id}", args.topic_prefix),
        client_id: format!("load-{run_id}"),
        fetch_wait_ms: args.fetch_wait_ms,
        notify: topics.notify.clone(),
        tracker: Arc::clone(&tracker),
        t0,
        deadline,
        producer: Mutex::new(None),
        collector: Mutex::new(None),
        next_notice: AtomicI64::new(0),
        gone: AtomicBool::new(false),
        reconnecting: tokio::sync::Mutex::new(()),
    });
    // Start reading notices where the topic ends now: this run's notices all come later.
    let notify_from = link.connect(None).await?;
    let eur = Currency::new(b"EUR").map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let origins: Vec<u8> =
        if args.origins.is_empty() { (1..=args.centers).collect() } else { args.origins.clone() };
    let origin = |k: usize| CenterId(origins[k % origins.len()]);

    // Setup: open, then fund (separate messages: funding needs the open applied first, and the
    // journal keeps their order).
    let mut setup_s = 0.0;
    let mut setup_found_on_reread = 0;
    if !args.skip_setup {
        for (kind, offset) in [('O', 0usize), ('F', a)] {
            let commands: Vec<Command> = (0..a as u64)
                .map(|i| {
                    let account = AccountId(args.account_base + 1 + i);
                    let payload = if kind == 'O' {
                        Payload::AccountOpen { account, currency: eur }
                    } else {
                        Payload::AccountFund { account, amount_minor: args.fund_minor }
                    };
                    Ok(Command { origin: origin(i as usize), bmi: bmi(&run_id, kind, i)?, payload })
                })
                .collect::<anyhow::Result<_>>()?;
            for (k, chunk) in commands.chunks(args.batch).enumerate() {
                submit(&link, &topics.inbound, chunk, k as u64).await?;
            }
            let want = (offset + a) as u64;
            let counter = &tracker.setup_finals;
            setup_found_on_reread += wait_for_notices(args, &link, notify_from, counter, want).await?;
            if counter.load(Ordering::Acquire) < want {
                anyhow::bail!(
                    "setup: only {} of {want} account operations final after {} s",
                    counter.load(Ordering::Acquire),
                    args.timeout_s
                );
            }
        }
        setup_s = t0.elapsed().as_secs_f64();
    }

    // Transfers.
    let mut prng = Prng::new(args.seed);
    let started = Instant::now();
    let mut commands = Vec::with_capacity(args.batch);
    let mut message = 0u64;
    for i in 0..n as u64 {
        let debtor = prng.below(args.accounts);
        let creditor = (debtor + 1 + prng.below(args.accounts - 1)) % args.accounts;
        commands.push(Command {
            origin: origin(message as usize),
            bmi: bmi(&run_id, 'T', i)?,
            payload: Payload::Transfer(Transfer {
                debtor: AccountId(args.account_base + 1 + debtor),
                creditor: AccountId(args.account_base + 1 + creditor),
                amount_minor: 1 + prng.below(10_000),
                currency: eur,
            }),
        });
        if commands.len() == args.batch || i + 1 == n as u64 {
            if args.rate > 0 {
                let due = started
                    + Duration::from_secs_f64((i + 1 - commands.len() as u64) as f64 / args.rate as f64);
                tokio::time::sleep_until(due.into()).await;
            }
            let at = t0.elapsed().as_nanos() as u64;
            let first = i + 1 - commands.len() as u64;
            for j in first..=i {
                tracker.submitted_ns[j as usize].store(at, Ordering::Relaxed);
            }
            submit(&link, &topics.inbound, &commands, message).await?;
            commands.clear();
            message += 1;
        }
    }
    let submit_s = started.elapsed().as_secs_f64();
    // Wait for every notice. When none came for a while and some are missing, read the notice
    // topic again from the run's start: a notice the live reader skipped is then told apart from
    // one that was never published.
    let found_on_reread = wait_for_notices(args, &link, notify_from, &tracker.finals, n as u64).await?;
    link.close();

    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)?;
    let (mut settled, mut refused, mut missing) = (0, 0, 0);
    let mut missing_first = Vec::new();
    let mut rejected = BTreeMap::new();
    let mut last_final = 0u64;
    for i in 0..n {
        let status = tracker.status[i].load(Ordering::Acquire);
        match status {
            STATUS_NONE => {
                missing += 1;
                if missing_first.len() < 10 {
                    missing_first.push(format!("{run_id}-T{i}"));
                }
                continue;
            }
            STATUS_SETTLED => settled += 1,
            STATUS_REFUSED => refused += 1,
            s => {
                let code =
                    RejectReason::from_code(u16::from(s - STATUS_REJECTED)).map_or("?", |r| r.iso_code());
                *rejected.entry(code.to_string()).or_insert(0u64) += 1;
            }
        }
        let f = tracker.final_ns[i].load(Ordering::Acquire);
        last_final = last_final.max(f);
        let us = f.saturating_sub(tracker.submitted_ns[i].load(Ordering::Acquire)) / 1_000;
        hist.record(us.max(1))?;
    }
    let first_submit = tracker.submitted_ns.first().map_or(0, |t| t.load(Ordering::Acquire));
    let elapsed_s = last_final.saturating_sub(first_submit) as f64 / 1e9;
    let done = n as u64 - missing;
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1e3;
    Ok(Report {
        run_id,
        submitted: n as u64,
        settled,
        rejected,
        refused,
        missing,
        missing_first,
        notices_repeated: tracker.repeated.load(Ordering::Acquire),
        notices_found_on_reread: found_on_reread + setup_found_on_reread,
        setup_s,
        submit_s,
        elapsed_s,
        finalized_per_s: if elapsed_s > 0.0 { done as f64 / elapsed_s } else { 0.0 },
        latency_ms_p50: ms(0.50),
        latency_ms_p90: ms(0.90),
        latency_ms_p99: ms(0.99),
        latency_ms_max: hist.max() as f64 / 1e3,
        ok: missing == 0,
    })
}

async fn submit(link: &Arc<Link>, topic: &str, commands: &[Command], key: u64) -> anyhow::Result<()> {
    let mut body = Vec::with_capacity(commands.len() * 64);
    codec::encode_commands_frame(commands, &mut body);
    let key = key.to_be_bytes();
    loop {
        let producer = link.producer().await?;
        let record = FutureRecord::to(topic).payload(&body).key(&key[..]);
        tokio::select! {
            sent = producer.send(record, Duration::from_secs(10)) => match sent {
                Ok(_) => return Ok(()),
                Err((e, _)) => {
                    eprintln!("load: submit: {e}; again");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            // The broker went away: this client is dropped and the message sent again on new
            // ones (a command sequenced before is answered by its `bmi`, never paid twice).
            () = link.went_away() => {}
        }
    }
}

/// The load's clients of the broker. When every broker connection is down they are all dropped
/// and made again once the broker answers: a client that knew the broker's topics can crash in
/// librdkafka if the broker comes back without them (ARCHITECTURE.md "When the broker loses its
/// data"), so none outlives a broker that went away. A broker that came back without its data
/// ends the load with a clear error (the nodes halt until `rtgs rebuild-journal`).
struct Link {
    bootstrap: String,
    group: String,
    client_id: String,
    fetch_wait_ms: u64,
    notify: String,
    tracker: Arc<Tracker>,
    t0: Instant,
    deadline: Instant,
    producer: Mutex<Option<FutureProducer>>,
    collector: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The next notice-topic offset to read.
    next_notice: AtomicI64,
    gone: AtomicBool,
    reconnecting: tokio::sync::Mutex<()>,
}

impl Link {
    /// Makes the clients: the producer, and the notice reader from `from` (None: the topic's
    /// end now). Returns where the notice reader starts.
    async fn connect(self: &Arc<Self>, from: Option<i64>) -> anyhow::Result<i64> {
        let consumer: StreamConsumer = rtgs_kafka::clients::consumer_waiting(
            &self.bootstrap,
            &self.group,
            &self.client_id,
            rdkafka::consumer::DefaultConsumerContext,
            self.fetch_wait_ms,
        )?;
        let ends = || {
            tokio::task::block_in_place(|| {
                consumer.fetch_watermarks(&self.notify, 0, Duration::from_secs(20))
            })
        };
        let mut high = ends();
        if from.is_some() {
            // Back from a broker restart: a topic the broker does not know (yet) is asked again
            // for a while; still unknown, the broker lost it.
            let until = Instant::now() + Duration::from_secs(10);
            while high.is_err() && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(500)).await;
                high = ends();
            }
        }
        let (_, high) = match (high, from) {
            (Ok(ends), _) => ends,
            (Err(e), Some(next)) => anyhow::bail!(
                "the broker came back without its data ({} is gone: {e}; this load had read up to offset \
                 {next}): the nodes halt until `rtgs rebuild-journal`; which of this run's transfers became \
                 final is unknown here (rtgs reconcile and the databases tell)",
                self.notify
            ),
            (Err(e), None) => {
                return Err(anyhow::Error::new(e).context(format!(
                    "cannot read topic {} on {} (is the cluster up?)",
                    self.notify, self.bootstrap
                )))
            }
        };
        if let Some(next) = from {
            if high < next {
                anyhow::bail!(
                    "the broker came back without its data ({} ends at offset {high}, this load had read up to \
                     {next}): the nodes halt until `rtgs rebuild-journal`; which of this run's transfers became \
                     final is unknown here (rtgs reconcile and the databases tell)",
                    self.notify
                );
            }
        }
        let start = from.unwrap_or(high);
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.notify, 0, Offset::Offset(start))?;
        consumer.assign(&tpl)?;
        self.next_notice.store(start, Ordering::Release);
        *lock(&self.producer) = Some(rtgs_kafka::clients::producer(&self.bootstrap, &self.client_id)?);
        let link = Arc::clone(self);
        *lock(&self.collector) = Some(tokio::spawn(async move { collect(consumer, link).await }));
        self.gone.store(false, Ordering::Release);
        Ok(start)
    }

    /// The current producer; after the broker went away, a new one (once the broker answers).
    async fn producer(self: &Arc<Self>) -> anyhow::Result<FutureProducer> {
        if self.gone.load(Ordering::Acquire) {
            self.reconnect().await?;
        }
        lock(&self.producer).clone().ok_or_else(|| anyhow::anyhow!("the load's clients are closed"))
    }

    /// Returns once the broker went away (every connection down).
    async fn went_away(&self) {
        while !self.gone.load(Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn close(&self) {
        if let Some(c) = lock(&self.collector).take() {
            c.abort();
        }
        lock(&self.producer).take();
    }

    /// Drops every client, waits for the broker, checks that it kept its data, makes new ones.
    async fn reconnect(self: &Arc<Self>) -> anyhow::Result<()> {
        let _one = self.reconnecting.lock().await;
        if !self.gone.load(Ordering::Acquire) {
            return Ok(()); // another caller reconnected
        }
        self.close();
        eprintln!("load: every broker connection is down: clients dropped; waiting for the broker");
        // Let the senders that saw it drop their clones of the producer.
        tokio::time::sleep(Duration::from_millis(200)).await;
        while tokio::net::TcpStream::connect(&self.bootstrap).await.is_err() {
            if Instant::now() >= self.deadline {
                anyhow::bail!(
                    "the broker at {} did not come back before the load's deadline",
                    self.bootstrap
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let next = self.next_notice.load(Ordering::Acquire);
        self.connect(Some(next)).await?;
        eprintln!("load: the broker is back; reading notices on from offset {next}");
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn collect(consumer: StreamConsumer, link: Arc<Link>) {
    let mut notices = Vec::new();
    loop {
        match consumer.recv().await {
            Ok(m) => {
                let now = link.t0.elapsed().as_nanos() as u64;
                link.tracker.record(m.payload().unwrap_or(&[]), now, &mut notices, true);
                link.next_notice.store(m.offset() + 1, Ordering::Release);
            }
            Err(e) => {
                if e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::AllBrokersDown) {
                    // Dropping this consumer now: see `Link`.
                    link.gone.store(true, Ordering::Release);
                    return;
                }
                eprintln!("load: notices: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Waits until `counter` reaches `want` or `deadline`. When no notice came for a while and some
/// are missing, reads the notice topic again from the run's start: a notice the live reader
/// skipped is then told apart from one that was never published. Returns how many the second
/// reads found.
async fn wait_for_notices(
    args: &LoadArgs,
    link: &Arc<Link>,
    from: i64,
    counter: &AtomicU64,
    want: u64,
) -> anyhow::Result<u64> {
    let (topic, tracker, t0, deadline) = (&link.notify, &link.tracker, link.t0, link.deadline);
    let mut found = 0;
    let mut progress = (counter.load(Ordering::Acquire), Instant::now());
    let mut reread_at = None;
    loop {
        let done = counter.load(Ordering::Acquire);
        let now = Instant::now();
        if done >= want {
            return Ok(found);
        }
        if done != progress.0 {
            progress = (done, now);
        }
        let stalled = now.duration_since(progress.1) >= REREAD_AFTER_STALL;
        if (stalled || now >= deadline) && reread_at != Some(done) {
            reread_at = Some(done);
            found += reread(args, topic, from, tracker, t0).await?;
            continue;
        }
        if now >= deadline {
            return Ok(found);
        }
        if link.gone.load(Ordering::Acquire) {
            link.reconnect().await?;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A stall this long with transfers missing triggers a second read of the notice topic.
const REREAD_AFTER_STALL: Duration = Duration::from_secs(10);

/// Reads the notice topic again from `from` to its current end with a new consumer and records
/// what the live reader missed; returns how many that was.
async fn reread(
    args: &LoadArgs,
    topic: &str,
    from: i64,
    tracker: &Tracker,
    t0: Instant,
) -> anyhow::Result<u64> {
    let consumer: StreamConsumer = rtgs_kafka::clients::consumer(
        &args.bootstrap,
        &format!("{}.load-{}-reread", args.topic_prefix, tracker.run_id),
        &format!("load-{}-reread", tracker.run_id),
        rdkafka::consumer::DefaultConsumerContext,
    )?;
    let (_, high) = consumer.fetch_watermarks(topic, 0, Duration::from_secs(20))?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(from))?;
    consumer.assign(&tpl)?;
    let count = || tracker.finals.load(Ordering::Acquire) + tracker.setup_finals.load(Ordering::Acquire);
    let before = count();
    let mut notices = Vec::new();
    let mut next = from;
    while next < high {
        match tokio::time::timeout(Duration::from_secs(10), consumer.recv()).await {
            Ok(Ok(m)) => {
                next = m.offset() + 1;
                // What a second read sees again is not a repeat by the nodes: not counted.
                let now = t0.elapsed().as_nanos() as u64;
                tracker.record(m.payload().unwrap_or(&[]), now, &mut notices, false);
            }
            Ok(Err(e)) => eprintln!("load: notices (second read): {e}"),
            Err(_) => anyhow::bail!("second read of {topic}: nothing after offset {next} (end {high})"),
        }
    }
    let found = count() - before;
    eprintln!(
        "load: notices stalled at {before}; a second read of {topic} offsets {from}..{high} found {found} more"
    );
    Ok(found)
}

impl Tracker {
    /// Records the notices of one message of the notice topic; `count_repeats`: a notice for a
    /// transfer already final counts as a repeat.
    fn record(&self, payload: &[u8], now: u64, notices: &mut Vec<wire::Notice>, count_repeats: bool) {
        notices.clear();
        if wire::decode_notices(payload, notices).is_none() {
            eprintln!("load: a notice message does not decode; ignored");
            return;
        }
        for notice in notices.iter() {
            let Some((kind, i)) = self.parse(&notice.bmi) else { continue };
            let status = match notice.status {
                NoticeStatus::Settled => STATUS_SETTLED,
                NoticeStatus::Refused => STATUS_REFUSED,
                NoticeStatus::Rejected(o) => STATUS_REJECTED + o.code() as u8,
                // A retry answered with its original seq (e.g. re-read after a takeover): its
                // final notice is the original's.
                NoticeStatus::Duplicate => continue,
            };
            let (slot, counter) = match kind {
                b'T' if i < self.status.len() => (&self.status[i], &self.finals),
                b'O' if i < self.setup_status.len() / 2 => (&self.setup_status[i], &self.setup_finals),
                b'F' if i < self.setup_status.len() / 2 => {
                    (&self.setup_status[self.setup_status.len() / 2 + i], &self.setup_finals)
                }
                _ => continue,
            };
            if slot.swap(status, Ordering::AcqRel) == STATUS_NONE {
                if kind == b'T' {
                    self.final_ns[i].store(now, Ordering::Release);
                }
                counter.fetch_add(1, Ordering::AcqRel);
            } else if count_repeats {
                self.repeated.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
