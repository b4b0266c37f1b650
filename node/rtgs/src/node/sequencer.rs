//! The sequencer instance of one center: leads while it holds the inbound partition.
//!
//! Leading, per batch of inbound messages (up to [`SEQUENCER_BATCH_ENTRIES_MAX`] entries):
//! sequence (core [`Sequencer`]) → record the frames in the outbox with the fenced conditional
//! update → publish them to the journal → (every few batches) mark them published. A fenced
//! record means another instance took over: this one steps down at once and forgets its state.
//!
//! Where to resume the inbound topic is PostgreSQL's `sequencer.inbound_offset`, recorded in the
//! same transaction as each batch, so a new leader neither skips nor re-reads a sequenced
//! message. The broker's committed offset is only a hint for where fetching starts (it is not
//! fenced by group generation); messages at or below the recorded offset are skipped.
//!
//! A `bmi` is paid at most once, ever: before sequencing a batch the leader asks PostgreSQL which
//! of its `bmi`s were sequenced before (`sequenced_bmi`, one query per batch) and hands the
//! answers to the core sequencer, which answers a retry with the original seq and refuses other
//! content under a known `bmi` (DUPL, with a notice); the batch's own `bmi`s are written in its
//! record transaction, under a unique index. A failover loses nothing of it and needs no replay
//! window: the table is the whole history (a database from before migration `0003` is
//! backfilled from the outbox at takeover).

use super::{now_us, recv_batch, retry_pg, Node};
use anyhow::Context;
use futures_util::FutureExt;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use rtgs_core::codec;
use rtgs_core::entry::{Bmi, Command, Entry, Seq};
use rtgs_core::hash::siphash24;
use rtgs_core::limits::SEQUENCER_BATCH_ENTRIES_MAX;
use rtgs_core::sequencer::{Admission, Lookup, Sequencer};
use rtgs_kafka::leadership::Leadership;
use rtgs_kafka::wire::{self, Notice, NoticeStatus};
use rtgs_pg::sequencer_store::{OutboxBatch, SequencerStore};
use rtgs_pg::StoreError;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The leader renews its lease (`sequencer.updated_at`) this often, even when idle. Short, so
/// that the lease's age tells the time since a leader died within 0.1 s (see
/// [`LEADER_SILENCE_MAX`]). A recorded batch renews it as well, so the separate one-row update
/// runs only while fewer than ten batches a second are recorded.
const LEASE_INTERVAL: Duration = Duration::from_millis(100);
/// How often a non-leader looks at the lease.
const LEASE_CHECK_INTERVAL: Duration = Duration::from_millis(100);
/// A lease older than this means the leader is gone (it exceeds the group session timeout of
/// 6 s by more than [`LEASE_INTERVAL`], so the broker has expired the dead member by then: a
/// rejoin before that would have the dead member in the new generation). A member that sees it
/// rejoins the group: the broker here (tansu 0.6) drops a dead member's heartbeat session but does not
/// reassign its partition until some member joins; on Apache Kafka the rejoin is a harmless
/// extra rebalance. The epoch fence keeps any rebalance safe.
///
/// Every 0.1 s here counts: with tansu, a rejoin reaches a leader in ≈ 0.3 s when the group's
/// coordinator-side leader (the member that computes assignments) is the dead one or the
/// rejoiner, and ≈ 3.3 s otherwise — tansu makes a joining member that is not that leader wait
/// `PAUSE_MS` = 3 s. So takeover ≈ 6.35 + 0.2 + 0.3 (or 3.3) s.
const LEADER_SILENCE_MAX: Duration = Duration::from_millis(6_350);
/// Added per center number (DC1 +0, DC2 +0.1 s, DC3 +0.2 s): orders the survivors; the rejoin
/// claim makes sure only one of them rejoins.
const LEADER_SILENCE_STAGGER: Duration = Duration::from_millis(100);
/// Journal messages published but not yet confirmed by the broker before the leader waits.
const IN_FLIGHT_MAX: usize = 64;
/// How often published batches are marked so in the outbox (a new leader republishes at most
/// this much again; consumers drop the repeats by seq).
const MARK_INTERVAL: Duration = Duration::from_millis(200);

struct InFlight {
    seq_first: Seq,
    frames: Arc<Vec<u8>>,
    delivery: DeliveryFuture,
}

/// The state of a leading instance.
struct Leader {
    sequencer: Sequencer,
    /// Keys the core's look-up of repeats within a batch (random per leader: participants choose
    /// `bmi`s, so they must not be able to pile them into one bucket).
    hash_key: [u64; 2],
    epoch: u32,
    /// Recorded in the outbox: messages at or below it are sequenced.
    inbound_offset: i64,
    in_flight: VecDeque<InFlight>,
    /// Highest `seq_first` whose publish (and every earlier one) the broker confirmed.
    delivered_seq_first: Option<Seq>,
    last_mark: Instant,
    /// When `sequencer.updated_at` was last set by this leader (takeover, a recorded batch or a
    /// lease renewal).
    leased_at: Instant,
}

pub async fn run(node: Arc<Node>, pool: deadpool_postgres::Pool) -> anyhow::Result<()> {
    let store = SequencerStore::new(pool);
    let (mut consumer, mut leadership) = join_group(&node)?;
    let producer = rtgs_kafka::clients::producer(&node.bootstrap, &format!("{}-sequencer", node.name))?;
    let mut leader: Option<Leader> = None;
    let mut last_check = Instant::now();
    let mut last_join = Instant::now();
    loop {
        // Every recorded batch renews the lease too: under load no separate renewal is due.
        let lease_due = leader.as_ref().is_some_and(|l| l.leased_at.elapsed() >= LEASE_INTERVAL);
        let check_due = leader.is_none() && last_check.elapsed() >= LEASE_CHECK_INTERVAL;
        if lease_due || check_due {
            last_check = Instant::now();
            if let Some(l) = leader.as_mut() {
                // The lease also checks the fence while idle.
                let epoch = l.epoch;
                l.leased_at = Instant::now();
                if !retry_pg(&node, "sequencer lease", || store.heartbeat(epoch)).await? {
                    eprintln!("{}: sequencer: fenced by a newer leader; stepping down", node.name);
                    leader = None;
                    node.stats.leader.store(false, Ordering::Relaxed);
                }
            } else if last_join.elapsed() >= LEADER_SILENCE_MAX {
                let (silence, epoch) =
                    retry_pg(&node, "sequencer lease check", || store.leader_silence()).await?;
                // One survivor rejoins per silence: two members joining within one rebalance
                // cost this broker an extra round (≈ 5 s measured; a 1 s stagger alone was not
                // enough on a loaded host). The stagger orders the survivors, the claim — a
                // conditional lease renewal in PostgreSQL — makes the later one stand aside.
                let stagger = LEADER_SILENCE_STAGGER.as_secs_f64() * f64::from(node.center.0 - 1);
                let threshold = LEADER_SILENCE_MAX.as_secs_f64() + stagger;
                if silence >= threshold
                    && retry_pg(&node, "sequencer rejoin claim", || store.claim_rejoin(threshold)).await?
                {
                    eprintln!(
                        "{}: sequencer: no leader for {silence:.1} s (epoch {epoch}): rejoining group {} to \
                         force a rebalance",
                        node.name,
                        node.group("sequencer")
                    );
                    drop(consumer);
                    (consumer, leadership) = join_group(&node)?;
                    last_join = Instant::now();
                }
            }
        }
        if leadership.is_leader() != leader.is_some() {
            if leadership.is_leader() {
                leader = Some(take_over(&node, &store, &producer, &consumer).await?);
            } else {
                eprintln!("{}: sequencer: stepping down (partition revoked)", node.name);
                leader = None;
                node.stats.leader.store(false, Ordering::Relaxed);
            }
        }
        // Poll even when not leading: the consumer must keep polling for rebalances to happen.
        let wait = if leader.is_some() { Duration::from_millis(20) } else { Duration::from_millis(100) };
        // A command is at least ~40 bytes: this bounds a batch to the sequencer's batch size.
        let batch =
            recv_batch(&node, "sequencer: inbound", &consumer, wait, SEQUENCER_BATCH_ENTRIES_MAX * 40).await;
        let Some(l) = leader.as_mut() else { continue };
        if !leadership.is_leader() {
            // Revoked while waiting: what was read is left for the next leader.
            continue;
        }
        let result = lead(&node, &store, &producer, &consumer, l, &batch).await;
        if let Err(e) = result {
            match e.downcast_ref::<StoreError>() {
                Some(StoreError::Fenced { .. }) => {
                    eprintln!("{}: sequencer: fenced by a newer leader ({e}); stepping down", node.name);
                    leader = None;
                    node.stats.leader.store(false, Ordering::Relaxed);
                }
                _ => return Err(e),
            }
        }
    }
}

/// A fresh member of group `sequencer` (a new member id: joining triggers a rebalance).
fn join_group(node: &Node) -> anyhow::Result<(StreamConsumer<Leadership>, Leadership)> {
    let leadership = Leadership::new(&node.topics.inbound);
    let consumer: StreamConsumer<Leadership> = rtgs_kafka::clients::consumer(
        &node.bootstrap,
        &node.group("sequencer"),
        &format!("{}-sequencer", node.name),
        leadership.clone(),
    )?;
    consumer.subscribe(&[&node.topics.inbound]).context("subscribe to the inbound topic")?;
    Ok((consumer, leadership))
}

/// Becomes the leader: bump the epoch in PostgreSQL, rebuild the sequencer from the outbox,
/// republish what was recorded but not published.
async fn take_over(
    node: &Node,
    store: &SequencerStore,
    producer: &FutureProducer,
    consumer: &StreamConsumer<Leadership>,
) -> anyhow::Result<Leader> {
    let started = Instant::now();
    let t = retry_pg(node, "sequencer takeover", || store.take_over(&node.name)).await?;
    let mut sequencer = Sequencer::new(node.center, 0);
    if t.last_seq > 0 {
        // Only the last batch: where seqs and time resume. Dedupe needs no replay, the
        // `sequenced_bmi` table holds every bmi.
        let batches = retry_pg(node, "outbox read", || store.batches(t.last_seq, t.last_seq)).await?;
        let mut entries = Vec::new();
        for b in &batches {
            codec::decode_frames(&b.frames, &mut entries)
                .with_context(|| format!("recorded batch {} does not decode", b.seq_first))?;
        }
        let Some(last) = entries.last().filter(|e| e.seq == t.last_seq) else {
            anyhow::bail!("the outbox holds no entry at recorded seq {}", t.last_seq);
        };
        sequencer.resume_at(t.last_seq + 1, 0, last.timestamp_us);
    }
    if t.bmi_through < t.last_seq {
        let added =
            retry_pg(node, "bmi backfill", || store.backfill_bmis(t.epoch, t.bmi_through, t.last_seq))
                .await?;
        eprintln!(
            "{}: sequencer: indexed {added} bmis of seqs {}..={} recorded before sequenced_bmi existed",
            node.name,
            t.bmi_through + 1,
            t.last_seq
        );
    }
    sequencer.begin_epoch(t.epoch);
    for b in &t.unpublished {
        let frames = Arc::new(b.frames.clone());
        publish_confirmed(node, producer, b.seq_first, &frames).await?;
    }
    if let Some(last) = t.unpublished.last() {
        retry_pg(node, "mark republished", || store.mark_published(last.seq_first)).await?;
    }
    node.stats.epoch.store(u64::from(t.epoch), Ordering::Relaxed);
    // Messages read before this instance led were dropped: read on from the recorded offset.
    seek(node, consumer, t.inbound_offset + 1);
    node.stats.seq_sequenced.store(t.last_seq, Ordering::Relaxed);
    node.stats.takeovers.fetch_add(1, Ordering::Relaxed);
    node.stats.leader.store(true, Ordering::Relaxed);
    eprintln!(
        "{}: sequencer: LEADER at epoch {} from seq {} (inbound offset {}, {} batches republished, {:.0} ms)",
        node.name,
        t.epoch,
        t.last_seq + 1,
        t.inbound_offset,
        t.unpublished.len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(Leader {
        sequencer,
        hash_key: random_key(),
        epoch: t.epoch,
        inbound_offset: t.inbound_offset,
        in_flight: VecDeque::new(),
        delivered_seq_first: None,
        last_mark: Instant::now(),
        leased_at: Instant::now(),
    })
}

fn send(node: &Node, producer: &FutureProducer, seq_first: Seq, frames: &Arc<Vec<u8>>) -> DeliveryFuture {
    let key = seq_first.to_be_bytes();
    loop {
        let record = FutureRecord::to(&node.topics.journal).payload(frames.as_slice()).key(&key[..]);
        match producer.send_result(record) {
            Ok(delivery) => return delivery,
            // Queue full: the bound on the client queue is our back-pressure.
            Err((_, _)) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Publishes and waits for the broker's confirmation, retrying until it comes.
async fn publish_confirmed(
    node: &Node,
    producer: &FutureProducer,
    seq_first: Seq,
    frames: &Arc<Vec<u8>>,
) -> anyhow::Result<()> {
    loop {
        match send(node, producer, seq_first, frames).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err((e, _))) => eprintln!("{}: sequencer: publish of seq {seq_first}: {e}; again", node.name),
            Err(_) => eprintln!("{}: sequencer: publish of seq {seq_first} cancelled; again", node.name),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One round as leader: sequence `batch` (or a Tick when idle), record, publish.
async fn lead(
    node: &Node,
    store: &SequencerStore,
    producer: &FutureProducer,
    consumer: &StreamConsumer<Leadership>,
    l: &mut Leader,
    batch: &[(i64, Vec<u8>)],
) -> anyhow::Result<()> {
    let now = now_us();
    let mut commands: Vec<Command> = Vec::new();
    let mut last_offset = l.inbound_offset;
    let mut seek_to = None;
    for (offset, payload) in batch {
        if *offset <= last_offset {
            continue; // sequenced by this or an earlier leader
        }
        if *offset > last_offset + 1 {
            // Inbound offsets are contiguous (no transactions, no compaction): a message was not
            // seen here (read before this instance led). Go back for it; never skip one.
            seek_to = Some(last_offset + 1);
            break;
        }
        last_offset = *offset;
        if codec::decode_commands_frames(payload, &mut commands).is_err() {
            // Input error: the message is dropped whole, counted and reported.
            node.stats.malformed_inbound.fetch_add(1, Ordering::Relaxed);
            eprintln!("{}: sequencer: inbound offset {offset} is not a commands frame; dropped", node.name);
        }
    }
    // At most one outbox row per group; only the last group records the offset of the messages
    // read, so a crash between groups makes the next leader read those messages again (their
    // commands recorded already are then answered as retries, never sequenced twice).
    let mut refusals: Vec<Notice> = Vec::new();
    let mut recorded = false;
    let groups: Vec<&[Command]> = commands.chunks(SEQUENCER_BATCH_ENTRIES_MAX).collect();
    for (i, group) in groups.iter().enumerate() {
        let offset = if i + 1 == groups.len() { last_offset } else { l.inbound_offset };
        recorded |= sequence_and_record(node, store, producer, l, now, group, offset, &mut refusals).await?;
    }
    if !recorded && node.idle_tick {
        if let Some(tick) = l.sequencer.poll_tick(now) {
            record_and_publish(node, store, producer, l, &[tick], last_offset).await?;
            recorded = true;
        }
    }
    if !refusals.is_empty() {
        node.stats.refusals.fetch_add(refusals.len() as u64, Ordering::Relaxed);
        let body = wire::encode_notices(&refusals);
        // Best effort: a lost refusal is answered again on the participant's retry.
        let _ = producer.send_result(FutureRecord::<(), _>::to(&node.topics.notify).payload(&body));
    }
    if !recorded && last_offset > l.inbound_offset {
        // Only retries: nothing to record; re-reading them after a failover is harmless.
        l.inbound_offset = last_offset;
    }
    if let Some(offset) = seek_to {
        seek(node, consumer, offset);
    }
    settle_deliveries(node, store, producer, consumer, l, false).await
}

/// Sequences one group of commands and records it; whether anything was recorded.
///
/// Optimistic: the group is sequenced as if every `bmi` were new — nearly all are — and the
/// record's transaction inserts them into `sequenced_bmi` (one pass over the unique index). If
/// one was sequenced before, nothing of the transaction stays: the group is sequenced again
/// from the same seq with PostgreSQL's answers (the original seq, or a conflict) and recorded.
/// A group holding a retry therefore costs a second round; a look-up before every group would
/// cost a second pass over the index for every `bmi` (it cut the throughput to a third).
#[allow(clippy::too_many_arguments)]
async fn sequence_and_record(
    node: &Node,
    store: &SequencerStore,
    producer: &FutureProducer,
    l: &mut Leader,
    now: u64,
    group: &[Command],
    inbound_offset: i64,
    refusals: &mut Vec<Notice>,
) -> anyhow::Result<bool> {
    let bmis: Vec<Bmi> = group.iter().map(|c| c.bmi).collect();
    let mut lookups: Vec<Lookup> =
        bmis.iter().map(|b| Lookup { key: siphash24(l.hash_key, b.as_bytes()), known: None }).collect();
    let seq_first = l.sequencer.seq_next();
    let (mut entries, mut admissions) = (Vec::with_capacity(group.len()), Vec::with_capacity(group.len()));
    for attempt in 0..2 {
        entries.clear();
        admissions.clear();
        l.sequencer.handle_commands(now, group.iter().cloned(), &lookups, &mut entries, &mut admissions);
        if entries.is_empty() {
            break;
        }
        match record_and_publish(node, store, producer, l, &entries, inbound_offset).await {
            Ok(()) => break,
            Err(e) if attempt == 0 && matches!(e.downcast_ref(), Some(StoreError::BmiSequenced { .. })) => {
                // Nothing of it is durable or published: those seqs are stamped again.
                l.sequencer.rewind(seq_first);
                lookups = look_up(node, store, l.hash_key, &bmis).await?;
                node.stats.bmi_rounds.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => return Err(e),
        }
    }
    refusals.extend(admissions.iter().zip(&bmis).filter_map(|(a, bmi)| match a {
        Admission::Conflict(seq) => Some(Notice { seq: *seq, status: NoticeStatus::Refused, bmi: *bmi }),
        _ => None,
    }));
    Ok(!entries.is_empty())
}

/// What PostgreSQL knows of each of a batch's `bmi`s (one query for the batch).
async fn look_up(
    node: &Node,
    store: &SequencerStore,
    hash_key: [u64; 2],
    bmis: &[Bmi],
) -> anyhow::Result<Vec<Lookup>> {
    let mut distinct = bmis.to_vec();
    distinct.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    distinct.dedup();
    let known = retry_pg(node, "bmi look-up", || store.known_bmis(&distinct)).await?;
    Ok(bmis
        .iter()
        .map(|b| Lookup { key: siphash24(hash_key, b.as_bytes()), known: known.get(b).copied() })
        .collect())
}

/// A fresh random SipHash key, from the standard library's per-process random state.
fn random_key() -> [u64; 2] {
    use std::hash::{BuildHasher, Hasher};
    let state = std::collections::hash_map::RandomState::new();
    let half = |salt: u64| {
        let mut h = state.build_hasher();
        h.write_u64(salt);
        h.finish()
    };
    [half(1), half(2)]
}

/// Moves the inbound consumer to `offset` (the next message to sequence).
fn seek(node: &Node, consumer: &StreamConsumer<Leadership>, offset: i64) {
    let result = tokio::task::block_in_place(|| {
        consumer.seek(&node.topics.inbound, 0, Offset::Offset(offset), Duration::from_secs(5))
    });
    match result {
        Ok(()) => eprintln!("{}: sequencer: inbound resumes at offset {offset}", node.name),
        Err(e) => eprintln!("{}: sequencer: cannot seek the inbound topic to {offset}: {e}", node.name),
    }
}

async fn record_and_publish(
    node: &Node,
    store: &SequencerStore,
    producer: &FutureProducer,
    l: &mut Leader,
    entries: &[Entry],
    inbound_offset: i64,
) -> anyhow::Result<()> {
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else { return Ok(()) };
    let mut frames = Vec::with_capacity(entries.len() * 72);
    codec::encode_frame(entries, &mut frames);
    let batch = OutboxBatch { seq_first: first.seq, seq_last: last.seq, epoch: l.epoch, frames };
    // Durable before publish. A lost connection leaves the commit's outcome unknown: look
    // before recording again (a second attempt after a commit would be fenced by itself).
    loop {
        match store.record_batch(&batch, inbound_offset).await {
            Ok(()) => break,
            Err(e @ (StoreError::Pg(_) | StoreError::Pool(_))) => {
                node.stats.pg_retries.fetch_add(1, Ordering::Relaxed);
                eprintln!("{}: sequencer: recording seq {}: {e}; retrying", node.name, batch.seq_first);
                tokio::time::sleep(super::RETRY_PAUSE).await;
                if retry_pg(node, "outbox check", || store.is_recorded(batch.seq_first, batch.epoch)).await? {
                    break;
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    l.leased_at = Instant::now();
    l.inbound_offset = l.inbound_offset.max(inbound_offset);
    node.stats.seq_sequenced.store(batch.seq_last, Ordering::Relaxed);
    node.metrics.sequenced(entries.len());
    let frames = Arc::new(batch.frames);
    let delivery = send(node, producer, batch.seq_first, &frames);
    l.in_flight.push_back(InFlight { seq_first: batch.seq_first, frames, delivery });
    Ok(())
}

/// Collects the broker's confirmations in order (republishing a failed one), and every
/// [`MARK_INTERVAL`] marks the confirmed batches published and hints the inbound offset.
async fn settle_deliveries(
    node: &Node,
    store: &SequencerStore,
    producer: &FutureProducer,
    consumer: &StreamConsumer<Leadership>,
    l: &mut Leader,
    all: bool,
) -> anyhow::Result<()> {
    loop {
        let must_wait = all || l.in_flight.len() > IN_FLIGHT_MAX;
        let Some(front) = l.in_flight.front_mut() else { break };
        let result =
            if must_wait { Some((&mut front.delivery).await) } else { (&mut front.delivery).now_or_never() };
        let Some(result) = result else { break };
        let front = l.in_flight.pop_front().unwrap_or_else(|| unreachable!("front exists"));
        match result {
            Ok(Ok(_)) => l.delivered_seq_first = Some(front.seq_first),
            _ => {
                // Not confirmed: publish again (centers reorder by seq and drop repeats).
                eprintln!(
                    "{}: sequencer: journal publish of seq {} failed; again",
                    node.name, front.seq_first
                );
                publish_confirmed(node, producer, front.seq_first, &front.frames).await?;
                l.delivered_seq_first = Some(front.seq_first);
            }
        }
    }
    if l.last_mark.elapsed() >= MARK_INTERVAL {
        l.last_mark = Instant::now();
        if let Some(seq_first) = l.delivered_seq_first.take() {
            retry_pg(node, "mark published", || store.mark_published(seq_first)).await?;
        }
        if l.inbound_offset >= 0 {
            let mut tpl = TopicPartitionList::new();
            let _ = tpl.add_partition_offset(&node.topics.inbound, 0, Offset::Offset(l.inbound_offset + 1));
            let _ = consumer.commit(&tpl, CommitMode::Async);
        }
    }
    Ok(())
}
