//! # rtgs-core: the sans-IO heart of the node
//!
//! # Layout
//! Plain deterministic state machines, no tokio, no Kafka, no PostgreSQL, no clock — Cargo
//! enforces it: this crate depends on nothing that does I/O. Time comes in as the entry's
//! timestamp or as an argument.
//!
//! * [`entry`] — journal entry types (`Entry`, `Command`, `Payload`, `Outcome`, ISO reasons).
//! * [`codec`] — length- and CRC-checked binary frames of entries.
//! * [`sequencer`] — gap-free seqs, epochs, timestamps, ticks, `bmi` dedupe window.
//! * [`gap_buffer`] — lock-free bounded reorder window between journal readers and the applier.
//! * [`ledger`] — deterministic apply, ISO 20022 reject reasons, chained state hash.
//! * [`finalizer`] — 2-of-3 quorum tally, exactly-once finality, divergence halt.
//! * [`replica`] — the ledger and the plugin host applied together: the one apply path.
//! * [`center`] — one data center's whole state machine (gap buffer → replica → commits → acks
//!   → quorum → notices, its timers and window policies): the type every engine drives.
//! * [`client`] — what engines tell their clients (final notices, refusals).
//! * [`statement`] — an account's statement lines: the one rule the read model and the centers
//!   apply.
//! * [`plugin`] — the contract plugins implement (deterministic, effects out, results in).
//! * [`plugin_host`] — a center's plugins: routing, step digests, effect ownership, failover.
//! * [`wire`] — the compact binary codec of the plugins' commands, effects and checkpoints.
//! * [`limits`] — every bound in one place; [`hash`], [`prng`] — deterministic helpers;
//!   [`hint`] — prefetch hints of the hot paths.

pub mod center;
pub mod client;
pub mod codec;
pub mod entry;
pub mod finalizer;
pub mod gap_buffer;
pub mod hash;
pub mod hint;
pub mod ledger;
pub mod limits;
pub mod plugin;
pub mod plugin_host;
pub mod prng;
pub mod replica;
pub mod sequencer;
pub mod statement;
pub mod wire;
