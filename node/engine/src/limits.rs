//! Every bound of the production engine in one place (TigerBeetle's `constants.zig`), with
//! `const` assertions on how they relate. The core's own bounds (gap buffer, tally window,
//! sequencer batch, timers) are `rtgs_core::limits`; the broker's are `rtgs_kafka::clients`.
//! Queues are bounded channels whose capacity is counted in *messages of their kind* (a batch,
//! a commit): their byte bound is that capacity times the largest such message, noted with each.

use rtgs_core::limits as core;
use std::time::Duration;

// ---- messages on the broker --------------------------------------------------------------

/// Largest message a producer sends and a topic accepts (`message.max.bytes`).
pub const MESSAGE_BYTES_MAX: usize = rtgs_kafka::clients::MESSAGE_BYTES_MAX;
/// Room kept in every message for the record batch around it (headers, key, timestamps).
pub const RECORD_OVERHEAD_BYTES: usize = 1_024;
/// Largest payload (one frame, one ack or notice message) the engine puts in a message.
pub const PAYLOAD_BYTES_MAX: usize = MESSAGE_BYTES_MAX - RECORD_OVERHEAD_BYTES;

/// A frame's own bytes around its items (codec: length, CRC, version, count).
pub const FRAME_OVERHEAD_BYTES: usize = rtgs_core::codec::FRAME_HEADER_BYTES + 1 + 4;
/// The largest encoded payload (codec): a plugin command — tag, plugin, op, body length, body.
/// A transfer (tag, debtor, creditor, amount, currency: 28 bytes) is far smaller.
const PAYLOAD_ENCODED_BYTES_MAX: usize = 1 + 1 + 2 + 4 + core::PLUGIN_BODY_BYTES_MAX;
/// The largest encoded journal entry: seq, epoch, timestamp, origin, bmi length, bmi, payload.
pub const ENTRY_BYTES_MAX: usize = 8 + 4 + 8 + 1 + 1 + core::BMI_BYTES_MAX + PAYLOAD_ENCODED_BYTES_MAX;
/// The largest encoded command (inbound topic): origin, bmi length, bmi, payload.
pub const COMMAND_BYTES_MAX: usize = 1 + 1 + core::BMI_BYTES_MAX + PAYLOAD_ENCODED_BYTES_MAX;

/// Entries per journal message: one sequencer batch, cut further by bytes (a frame stays under
/// [`PAYLOAD_BYTES_MAX`]: batches of plugin commands with large bodies are split).
pub const JOURNAL_MESSAGE_ENTRIES_MAX: usize = core::SEQUENCER_BATCH_ENTRIES_MAX;
/// Commands per inbound message (API submissions, plugin results, owner proposals), cut
/// further by bytes like journal frames.
pub const COMMANDS_PER_MESSAGE: usize = 4_096;

/// A center's acks per message (`rtgs_kafka::wire`: 10 bytes each after a 13-byte head).
pub const ACKS_PER_MESSAGE: usize = core::SEQUENCER_BATCH_ENTRIES_MAX;
/// The largest ack message: center, first seq, count, the acks, CRC.
pub const ACK_MESSAGE_BYTES_MAX: usize = 1 + 8 + 4 + ACKS_PER_MESSAGE * 10 + 4;
/// Notices per message (`rtgs_kafka::wire`).
pub const NOTICES_PER_MESSAGE: usize = 8_192;
/// The largest encoded notice: seq, status, reason, bmi length, bmi.
pub const NOTICE_BYTES_MAX: usize = 8 + 1 + 2 + 1 + core::BMI_BYTES_MAX;
/// The largest notice message: count, the notices, CRC.
pub const NOTICE_MESSAGE_BYTES_MAX: usize = 4 + NOTICES_PER_MESSAGE * NOTICE_BYTES_MAX + 4;
/// At most this many of this center's acks are published again when finality stands still
/// (the oldest first: the ones it waits for); a later stall asks again.
pub const REACK_ENTRIES_MAX: usize = 1 << 16;

// One entry, command, ack or notice message always fits a message: cutting by size progresses.
const _: () = assert!(FRAME_OVERHEAD_BYTES + ENTRY_BYTES_MAX <= PAYLOAD_BYTES_MAX);
const _: () = assert!(FRAME_OVERHEAD_BYTES + COMMAND_BYTES_MAX <= PAYLOAD_BYTES_MAX);
const _: () = assert!(PAYLOAD_BYTES_MAX <= core::FRAME_BYTES_MAX);
const _: () = assert!(ACK_MESSAGE_BYTES_MAX <= PAYLOAD_BYTES_MAX);
const _: () = assert!(NOTICE_MESSAGE_BYTES_MAX <= PAYLOAD_BYTES_MAX);
const _: () = assert!(ACKS_PER_MESSAGE <= rtgs_kafka::wire::ITEMS_PER_MESSAGE_MAX);
const _: () = assert!(NOTICES_PER_MESSAGE <= rtgs_kafka::wire::ITEMS_PER_MESSAGE_MAX);
// A message of acks spans less than half the tally window: finality over a message's seqs is
// read back from the window before any of its slots is reused (the finality metric does).
const _: () = assert!(ACKS_PER_MESSAGE <= core::FINALIZER_WINDOW_SEQS / 2);
const _: () = assert!(REACK_ENTRIES_MAX <= core::FINALIZER_WINDOW_SEQS);

// ---- reading the topics ---------------------------------------------------------------------

/// Bytes taken from a center's stream consumer (the journal and the acks, `center::streams`) per
/// batch, beyond its first message (≈ one sequencer batch of transfers, 64 bytes each).
pub const STREAMS_RECV_BYTES_MAX: usize = core::SEQUENCER_BATCH_ENTRIES_MAX * 64;
/// Bytes taken from the notify consumer per batch (the API), beyond its first message.
pub const NOTICE_RECV_BYTES_MAX: usize = 1 << 20;
/// Bytes taken from the inbound consumer per sequencer round, beyond its first message: a
/// command is at least ≈ 40 bytes, so about one sequencer batch.
pub const INBOUND_RECV_BYTES_MAX: usize = core::SEQUENCER_BATCH_ENTRIES_MAX * 40;
/// The broker's fetch wait (`rtgs_kafka::clients::consumer_waiting`) of the journal and ack
/// readers and the leader's inbound reader without the push path (each hop costs 1–2 of it), and
/// with it (they are the record, the backstop and the path of large batches then; a longer wait
/// keeps the broker's polling cost lower). The broker here serves every storage request of every
/// client one after the other (tansu 0.6: one task behind a channel), so each fetch also delays
/// every produce. 50 ms instead of 25 took the API's store of its submissions from 9.9–10.1 to
/// 8.0–8.1 ms mean at 2,000/s and `bench/cluster.sh` phase 1 from ≈ 108,000–111,000/s to
/// 110,362 · 121,709 · 115,574/s (bench/README.md). Not more: a hop through the broker costs
/// one to two waits, and at 100 ms the batches that are not pushed (the large ones) reached the
/// centers after the gap timeout of the batches pushed after them
/// (`rtgs_core::limits::GAP_TIMEOUT_US`, 200 ms), so centers without any fault pulled gaps from
/// the outbox.
pub const STREAM_FETCH_WAIT: Duration = Duration::from_millis(10);
pub const PUSHED_STREAM_FETCH_WAIT: Duration = Duration::from_millis(50);
// A hop through the broker (two waits at most) takes at most half the gap timeout.
const _: () = assert!(4 * PUSHED_STREAM_FETCH_WAIT.as_micros() <= core::GAP_TIMEOUT_US as u128);
/// The API's notify reader: refusals (and the final notices the in-process path could not hand
/// over) — not on the path of an ordinary payment.
pub const NOTICE_FETCH_WAIT: Duration = Duration::from_millis(50);
/// How long a reader waits for a first message before it looks at its other inputs.
pub const STREAMS_WAIT: Duration = Duration::from_millis(20);
pub const NOTICE_WAIT: Duration = Duration::from_millis(50);
/// The leader's wait for inbound messages before it looks at its other inputs.
pub const INBOUND_WAIT_LEADING: Duration = Duration::from_millis(20);

// ---- queues between the tasks (bounded: back-pressure, never growth) ------------------------

/// Decoded journal batches waiting for the center task (each ≤ [`STREAMS_RECV_BYTES_MAX`] plus
/// one message).
pub const JOURNAL_QUEUE_BATCHES: usize = 8;
/// Decoded ack batches waiting for the center task (each ≤ [`STREAMS_RECV_BYTES_MAX`] plus one
/// message).
pub const ACK_QUEUE_BATCHES: usize = 8;
/// Commits waiting for the committer; behind them the center task merges what comes into one
/// (up to [`MERGED_COMMIT_ENTRIES_MAX`] entries, then it waits for the committer).
pub const COMMIT_QUEUE_COMMITS: usize = 2;
/// Acks, re-ack requests, notices and commands waiting for the publisher.
pub const PUBLISH_QUEUE_ITEMS: usize = 64;
/// Effect batches waiting for a plugin's adapter task.
pub const EFFECT_QUEUE_BATCHES: usize = 64;
/// Effect batches the center task keeps while an adapter's queue is full (a slow adapter does
/// not stall the journal); beyond this the center task waits for the adapter.
pub const EFFECT_OUTBOX_BATCHES_MAX: usize = 1_024;
/// Committed entry batches waiting for the API's read model (a slow read model holds the
/// committer back rather than losing an entry).
pub const FEED_QUEUE_BATCHES: usize = 256;
/// API submissions waiting for the inbound topic.
pub const SUBMIT_QUEUE_BATCHES: usize = 1_024;
/// API submissions drained from that queue while the broker stores the round before (they
/// were pushed to the leader already; the next round stores them all).
pub const SUBMIT_PENDING_MAX: usize = 4 * COMMANDS_PER_MESSAGE;
/// Notices and refusals waiting for the API's dispatcher thread.
pub const API_EVENT_QUEUE: usize = 1_024;

// ---- commits ----------------------------------------------------------------------------------

/// Commits that queued up behind a running one are merged into one transaction up to about this
/// many entries (a catching-up center writes each changed balance once per merged commit); the
/// center task waits for the committer beyond it.
pub const MERGED_COMMIT_ENTRIES_MAX: usize = 131_072;
/// A commit of finality progress alone waits this long for more to merge with (a commit is one
/// fsync; progress lags, which a restart only pays for by reading more acks again).
pub const PROGRESS_COMMIT_DELAY: Duration = Duration::from_millis(50);

// One commit of the center holds what one journal batch released, at most a gap buffer's worth
// (a filled hole releases the whole buffer at once) and a batch: merging never stops short of it.
const _: () =
    assert!(MERGED_COMMIT_ENTRIES_MAX >= core::GAP_BUFFER_SLOTS + core::SEQUENCER_BATCH_ENTRIES_MAX);

// ---- retries and timeouts ------------------------------------------------------------------

/// Pause between two attempts of a PostgreSQL call that did not get an answer.
pub const PG_RETRY_PAUSE: Duration = Duration::from_millis(250);
/// At start, PostgreSQL must answer within this (then the node stops with a message).
pub const PG_START_DEADLINE: Duration = Duration::from_secs(60);
/// Pause between two attempts to publish a message the broker did not confirm.
pub const PUBLISH_RETRY_PAUSE: Duration = Duration::from_millis(100);
/// A publish not confirmed within this is tried again.
pub const PUBLISH_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause after a consumer error (librdkafka reconnects by itself).
pub const CONSUMER_ERROR_PAUSE: Duration = Duration::from_millis(100);
/// Broker metadata calls (watermarks, seeks, topic creation).
pub const BROKER_CALL_TIMEOUT: Duration = Duration::from_secs(10);
pub const TOPICS_TIMEOUT: Duration = Duration::from_secs(30);
/// A node restarted because the broker went away tries to reach it again this often.
pub const BROKER_WAIT_PAUSE: Duration = Duration::from_secs(1);
/// How often the node looks whether the broker went away (and, ×10, whether a halted node's
/// journal was rebuilt).
pub const BROKER_LOSS_POLL: Duration = Duration::from_millis(100);
/// Outbox batches `rtgs rebuild-journal` reads and publishes at a time.
pub const REBUILD_PAGE_BATCHES: i64 = 256;
/// A node halted because the broker lost data says so on stderr this often.
pub const BROKER_LOST_LINE_EVERY: Duration = Duration::from_secs(10);

// ---- the sequencer ---------------------------------------------------------------------------

/// The leader renews its lease (`sequencer.updated_at`) this often when no batch did (its own
/// task: a leader waiting for the broker or PostgreSQL still renews).
pub const LEASE_INTERVAL: Duration = Duration::from_millis(100);
/// How often a non-leader tries to claim the lease (one conditional update that changes nothing
/// while the lease is held).
pub const LEASE_CHECK_INTERVAL: Duration = Duration::from_millis(100);
/// A lease silent this long means the leader is gone: a survivor claims it (epoch bump, which
/// fences the old leader). Fifteen missed renewals: a loaded 2-core host delays a renewal by
/// tens of milliseconds, a PostgreSQL checkpoint by a few hundred at worst; a false takeover
/// is safe (the fence) but costs a pause. Takeover after `kill -9` ≈ this + the stagger + one
/// transaction (bench/README.md "Takeover").
pub const LEADER_SILENCE_MAX: Duration = Duration::from_millis(1_500);
/// Added to [`LEADER_SILENCE_MAX`] per center number: orders the survivors (the claim is
/// conditional, so a later one finds the lease renewed and stands aside).
pub const LEADER_SILENCE_STAGGER: Duration = Duration::from_millis(150);
/// Journal messages published but not yet confirmed before the leader waits.
pub const IN_FLIGHT_MAX: usize = 64;
/// How often confirmed batches are marked published in the outbox.
pub const MARK_INTERVAL: Duration = Duration::from_millis(200);
/// A full producer queue makes the leader wait this long before it tries again.
pub const PRODUCER_FULL_PAUSE: Duration = Duration::from_millis(5);

// A leader is taken for dead only after many missed renewals.
const _: () = assert!(LEADER_SILENCE_MAX.as_millis() >= 10 * LEASE_INTERVAL.as_millis());
// The leader's unconfirmed journal messages fit the producer's client queue.
const _: () =
    assert!(IN_FLIGHT_MAX * MESSAGE_BYTES_MAX <= rtgs_kafka::clients::PRODUCER_QUEUE_KBYTES * 1_024);

// ---- plugins, status, runtime -------------------------------------------------------------

/// An adapter waits this long for effects, then polls its outside world.
pub const ADAPTER_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// How often an adapter publishes its figures for the status.
pub const ADAPTER_FIGURES_INTERVAL: Duration = Duration::from_millis(200);
/// How often the status file is written.
pub const STATUS_INTERVAL: Duration = Duration::from_millis(200);
/// Runs of entries the quorum-latency timeline remembers (metrics module docs).
pub const TIMELINE_RUNS_MAX: usize = 65_536;
/// Worker threads of the node's runtime (the target hosts give a node two cores).
pub const WORKER_THREADS: usize = 2;
/// PostgreSQL connections: the center's database (committer, publisher's re-reads, start) and
/// the sequencer's (the leader's records and look-ups).
pub const CENTER_POOL_CONNECTIONS: usize = 4;
pub const SEQUENCER_POOL_CONNECTIONS: usize = 2;
/// The participant API's reads of the center's database (the outcome of a retry whose entry was
/// final before the node started): their own connections, never the committer's.
pub const API_POOL_CONNECTIONS: usize = 2;
/// How long the API waits for such a read before answering with what it knows (ACSP).
pub const API_HISTORY_READ_TIMEOUT: Duration = Duration::from_secs(2);
/// The API's look-ups in the sequencer's database — how far the journal reaches (`last_seq`,
/// before "not found" is answered; one at a time) and the seq of a `bmi` its tracker does not
/// know (`sequenced_bmi`): their own connections, never the leader's; each waits at most
/// [`API_HISTORY_READ_TIMEOUT`] too (then 503 `read_model_behind`, try again).
pub const API_SEQUENCER_POOL_CONNECTIONS: usize = 2;
/// The center's gap pulls from `journal_outbox`: their own connections, so a burst of pulls
/// (the broker down, a center far behind) never delays the leader's records.
pub const OUTBOX_POOL_CONNECTIONS: usize = 2;
/// The leader's lease renewals: one connection of their own, so that nothing queued on the
/// other pools (a burst of gap pulls during a broker outage, a slow record) delays a renewal
/// past the silence threshold and hands leadership to a survivor while the leader is alive.
pub const LEASE_POOL_CONNECTIONS: usize = 1;

// ---- the push path (`push`) -----------------------------------------------------------------

/// Acks per pushed ack message: 10 bytes each, base64 within PostgreSQL's 8,000-byte payload.
pub const PUSH_ACKS_PER_NOTICE: usize = 500;
/// A commit's acks are pushed only up to this many (beyond, the broker alone carries them).
pub const PUSH_ACKS_MAX: usize = 2 * PUSH_ACKS_PER_NOTICE;
/// Notices heard but not yet handed to the center task, and pushed items waiting for the center
/// task (each ≤ one journal batch or one ack message); full: skipped, the broker brings them.
pub const PUSH_QUEUE_ITEMS: usize = 256;
/// Notices waiting to be sent (acks, inbound messages); full: skipped (the broker carries them).
pub const PUSH_OUT_QUEUE: usize = 256;
/// Notices sent in one statement (one round trip), at most: what queued up meanwhile.
pub const PUSH_NOTICES_PER_STATEMENT: usize = 64;
/// Inbound messages up to this size are pushed (base64 within PostgreSQL's 8,000-byte
/// payload).
pub const PUSH_INBOUND_BYTES_MAX: usize = 5_800;
/// An API's push is at most this many such messages (≈ 900 single transfers; a window that
/// drains more goes through the broker alone). One message was too few: a closed-loop load of
/// single transfers drains in bursts (a final batch answers many requests at once, and their
/// next requests come together), and at 7,000/s 90 % of the commands came in windows that
/// overflowed one message, so most payments waited for the broker's hops (bench/README.md "Pushes of several notices").
pub const PUSH_INBOUND_NOTICES_MAX: usize = 8;
/// The commands' bytes (`frames::command_bytes`) one push holds at most: its notices' frames
/// without their overhead.
pub const PUSH_INBOUND_COMMAND_BYTES_MAX: usize =
    PUSH_INBOUND_NOTICES_MAX * (PUSH_INBOUND_BYTES_MAX - FRAME_OVERHEAD_BYTES);
/// An API pushes what was submitted at most this often (what comes meanwhile waits for the
/// next push, `crate::api::PushPacer`). Measured at 2,000/s (bench/README.md "Commands pushed
/// before the broker stores them"): 4 and 5 ms made more rounds than the two cores could serve
/// beside k6, 12 ms waited longer for the same tail.
pub const PUSH_INBOUND_INTERVAL: Duration = Duration::from_millis(8);
/// Pushed inbound messages the leader holds between two rounds (beyond, the newest are
/// dropped: the topic brings them).
pub const PUSH_INBOUND_HELD_MAX: usize = 1_024;
/// With the push path on, a round of a center's publisher that carries only what was pushed
/// too (acks the center task pushed, notices handed to this node's API in-process), a round
/// of the API's store of pushed submissions, and the leader's journal batches the push path
/// announced go to the broker at most this often: the broker's copy is then the record and
/// the backstop, not what a payment waits for, and each produce request costs the broker here
/// about 1.5 ms of CPU. Anything else (acks, commands or journal batches not pushed, re-acks,
/// owner proposals, a window that outgrew its push) goes at once — the leader's after the
/// batches it held, so the topic keeps seq order and a batch that only the broker carries never
/// waits for the pace. At 2,000/s on the three-node cluster those producers sent ≈ 380
/// requests a second (bench/README.md "Fewer produce requests"). A pushed batch whose notice a
/// center missed reaches it within a pace, the leader's inbound wait and two fetch waits.
pub const BACKSTOP_PACE: Duration = Duration::from_millis(50);
// A pushed batch a center missed comes by the broker before its gap timeout.
const _: () = assert!(
    BACKSTOP_PACE.as_micros() + INBOUND_WAIT_LEADING.as_micros() + 2 * PUSHED_STREAM_FETCH_WAIT.as_micros()
        < core::GAP_TIMEOUT_US as u128
);
// A notice handed over in-process is remembered until the topic's copy has come (a paced round,
// a fetch wait or two): at 200,000 a second, for four paces.
const _: () = assert!(LOCAL_NOTICES_REMEMBERED as u128 * 1_000 / (4 * BACKSTOP_PACE.as_millis()) >= 200_000);
/// A lost push connection is made again after this pause.
pub const PUSH_RECONNECT_PAUSE: Duration = Duration::from_secs(1);
/// Seqs whose final notice the center task handed to its own API in-process, remembered so
/// that the notify topic's copy is not handed over again (it follows within milliseconds).
pub const LOCAL_NOTICES_REMEMBERED: usize = 131_072;
