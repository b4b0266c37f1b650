//! # rtgs-collection: the collection (wallet sweeping) plugin
//!
//! Deposits land in per-customer hot wallets; this plugin sweeps them, on a schedule, to the
//! treasury in one transaction per wallet and token (mission.md §3.1, seed 000). It is a
//! deterministic, sans-IO state machine over the ordered journal: every center applies the same
//! entries and holds the same state; the outside world (the chain) is reached only through
//! [`CollectionEffect`]s, whose results come back as [`CollectionCommand`]s in new entries.
//!
//! # Layout
//! * [`types`] — ids (`DepositId`, `WalletId`, `BatchId`, `TxHash`, ...) and the group key.
//! * [`wire`] — the compact binary codec every command, effect and checkpoint uses (the core's
//!   `rtgs_core::wire`, shared by every plugin).
//! * [`settings`] — `collection.*` / `stale_tx.*` settings, global and per partner, validated.
//! * [`command`] — [`CollectionCommand`]: operator/core inputs and adapter results, with codec.
//! * [`effect`] — [`CollectionEffect`]: balance reads, sweep broadcasts, receipt lookups,
//!   cancellations of given-up nonces, with codec.
//! * [`alert`] — the open operator alerts, derived from state (raised when a condition starts,
//!   closed when it ends; events held open for a while), replicated with the rest of the state.
//! * [`state`] — the rows: `collection_queue` ([`QueueRow`]), `collection_batches` ([`Batch`]),
//!   wallet groups, relayers and their nonce locks.
//! * [`plugin`] — [`CollectionPlugin`]: the `Plugin` impl, command routing, audit queries.
//!   Its rules live in three sibling modules: `schedule` (scheduled runs and the stale monitor,
//!   both driven by `Tick`s), `sweep` (balance results, skip rules, the batch lifecycle and the
//!   race fix, given-up nonces) and `nonce` (the relayer nonce manager and batch dispatch).
//! * [`query`] — read-only operator queries: STALE batches, QUEUED rows per wallet, skipped
//!   groups with reasons, partners' settings.
//! * `reset` — the operator's relayer nonce reset (forward only, idle relayers only).
//! * [`checkpoint`] — whole-state encode/decode, state hash, derived indexes and invariants.
//! * [`chain_sim`] — the [`ChainAdapter`] trait and [`ChainSim`]: the shared deterministic
//!   EVM-like chain simulator (`rtgs_chain_sim::evm`, injectable faults) with the collection's
//!   reads, reports and RPC latency.
//! * [`driver`] — a single-threaded journal driver: sequences commands and ticks, applies them,
//!   executes effects on an adapter and feeds the results back (tests and demos).
//! * `pending` — the effects still awaited, rebuilt from the state (`Plugin::pending_effects`,
//!   what a new owner re-executes), and the report figures.
//! * [`adapter`] — [`adapter::NodeAdapter`]: a [`ChainAdapter`] as the node's `EffectAdapter`
//!   (result `bmi`s derived from effect ids, the chain's clock scaled against the journal's);
//!   [`adapter::Workload`]: deposits and relayers for demos and the simulator.
//! * [`limits`] — every bound of the crate in one place.
//!
//! **Architecture Invariant**: nothing here reads a clock or does I/O; "now" is the entry's
//! timestamp, and maps are `BTreeMap`s so that iteration (and therefore effects and the state
//! hash) is the same on every center.
//!
//! **Architecture Invariant** (money): a batch collects exactly the QUEUED rows included at or
//! below the block its balance was read at, and a group never has two sweeps that could both
//! succeed — one open batch at a time, reads trusted only at or above its last sweep, and a
//! given-up nonce fences the group until the chain has used it. So Σ swept = Σ COLLECTED.
//!
//! **API Boundary**: the plugin never signs, never talks to a node and never decides a gas
//! price on its own — the balance read brings the price; the adapter signs deterministically,
//! so re-executing an effect after a failover sends the same transaction.

#[macro_use]
extern crate rtgs_core;

pub mod wire;

pub mod adapter;
pub mod alert;
pub mod chain_sim;
pub mod checkpoint;
pub mod command;
pub mod driver;
pub mod effect;
pub mod limits;
mod nonce;
mod pending;
pub mod plugin;
pub mod query;
mod reset;
mod schedule;
pub mod settings;
pub mod state;
mod sweep;
pub mod types;

pub use chain_sim::{ChainAdapter, ChainSim};
pub use command::CollectionCommand;
pub use effect::CollectionEffect;
pub use plugin::CollectionPlugin;
pub use state::{Batch, BatchStatus, QueueRow, RowStatus};
