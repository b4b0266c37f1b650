//! # rtgs-withdrawal: the withdrawal plugin (seed 001)
//!
//! A customer's withdrawal — from the request to the chain's confirmation threshold — as a
//! deterministic, sans-IO state machine over the ordered journal (mission.md §3.2, §3.2.1,
//! §3.4). Every center applies the same entries and holds the same state; the outside world
//! (the AML screener, the policy engine and approvers, the custody signer, the chains) is reached
//! only through [`WithdrawalEffect`]s executed by the owner center, whose answers come back as
//! [`WithdrawalCommand`]s in new entries. Money moves only through the core's ledger intents.
//!
//! # Layout
//! * [`types`] — ids (`WithdrawalId` = the request's seq, `AssetId`, `VaultId`, ...), bounded
//!   [`types::Text`], payloads.
//! * [`records`] — the append-only records (`broadcast_attempts`, their outcomes,
//!   `confirmations`, `withdrawal_operations`, transitions, vault choices): private fields,
//!   `AppendOnly` logs and `SetOnce` fields — append-only and set-once by type.
//! * [`status`] — the 14 states and [`status::TRANSITIONS`], the one table every status change
//!   is checked against.
//! * [`operation`] — the operations, the states each is allowed in, and [`operation::RefuseCode`].
//! * [`chain`] — chain families and their rules (slots, replacement, in-flight and workspace
//!   limits, validity windows), registered chains, assets (token ⇄ ledger currency, settlement
//!   account) and vaults.
//! * [`settings`] — the timers (2 h approval, signature and slot; the stale monitor; AML; the
//!   broadcast margin; reorg checks), journaled.
//! * [`command`] / [`effect`] — inputs and results / requests to the world, with their codec.
//! * [`alert`] — the open operator alerts, derived from state (conditions close when they end,
//!   events after a hold time), replicated with the rest of the state; no alert effect.
//! * [`state`] — the rows; [`checkpoint`] — encode/decode, state hash, derived indexes and the
//!   invariants between them.
//! * [`plugin`] — [`WithdrawalPlugin`] and its routing; the rules live in `intake` (requests and
//!   holds), `lifecycle` (status moves, money, the screener's, approvers' and signer's answers),
//!   `chainwatch` (broadcast answers, webhooks, lookups, reorgs), `dispatch` (vault round-robin,
//!   slots), `monitor` (ticks and timers, archiving) and `ops` (operations); `pending` rebuilds
//!   the awaited effects and computes the figures.
//! * [`world`] — the outside world behind adapter traits a real integration implements
//!   (`Screener`, `PolicyEngine`, `Custody`, `ChainClient`), their simulators (the shared EVM
//!   chain, a UTXO chain, a Solana-like chain, validity-window chains) with faults,
//!   [`world::World`], the node's `EffectAdapter` over them, a `Workload` (accounts,
//!   registrations, requests) and `check_paid_once` (the end checks of a run).
//! * [`driver`] — a single-threaded journal driver with a ledger (tests, benchmarks).
//! * [`limits`] — every bound of the crate in one place.
//!
//! **Architecture Invariant**: nothing here reads a clock or does I/O; "now" is the entry's
//! timestamp, and maps are `BTreeMap`s so that iteration (and therefore effects and the state
//! hash) is the same on every center.
//!
//! **Architecture Invariant** (money): `Σ balances + Σ holds = Σ funded` holds because the
//! plugin only holds, releases, settles and reverses through the ledger, and [`checkpoint`]
//! refuses a state whose money does not match its status (held while anything can happen,
//! settled when COMPLETED, released or reversed otherwise).
//!
//! **Architecture Invariant** (one transaction): a withdrawal's round has one slot; every
//! transaction it signs for that slot (the payment, a boost, a drop) is a replacement of the
//! others, so at most one of them is ever mined. An effect executed again sends the same signed
//! payload.
//!
//! **Retention** ("ever"): the append-only records are bounded per withdrawal (`limits`); final
//! withdrawals stay in state up to `TERMINAL_KEPT_MAX`, the oldest beyond it leave once a week
//! old (`ARCHIVE_AFTER_US`, no reorg reaches that far). "Kept for ever" is the journal's job: it
//! is never deleted and replaying it rebuilds every record.

#[macro_use]
extern crate rtgs_core;

/// The codec, shared with the collection plugin (`rtgs_chain_sim::wire`).
pub use rtgs_chain_sim::wire;

pub mod alert;
pub mod chain;
mod chainwatch;
pub mod checkpoint;
pub mod command;
mod dispatch;
pub mod driver;
pub mod effect;
mod intake;
mod lifecycle;
pub mod limits;
mod monitor;
pub mod operation;
mod ops;
mod pending;
pub mod plugin;
pub mod records;
pub mod settings;
pub mod state;
pub mod status;
pub mod types;
pub mod world;

pub use command::WithdrawalCommand;
pub use effect::WithdrawalEffect;
pub use plugin::WithdrawalPlugin;
pub use state::Withdrawal;
pub use status::Status;
