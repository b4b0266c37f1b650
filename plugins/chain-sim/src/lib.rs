//! # rtgs-chain-sim: what the chain plugins share
//!
//! The collection plugin (seed 000) and the withdrawal plugin (seed 001) both talk to chains:
//! they encode commands, effects and checkpoints the same way, name chains, tokens and
//! transactions the same way, and are tested against the same simulated EVM-like chain. That
//! common ground lives here, once; each plugin keeps its own effects and results and wraps the
//! simulator in its own adapter.
//!
//! # Layout
//! * [`wire`] — the compact binary codec, the core's (`rtgs_core::wire`: `Wire`, `wire_struct!`,
//!   `code_enum!`, `wire_id!`, the hashing `HashSink`): hostile input is a `DecodeError` value.
//! * [`types`] — [`ChainId`], [`TokenId`], [`TxHash`], [`Address`].
//! * [`answer`] — what a node answers to a broadcast ([`BroadcastOutcome`]: accepted, refused
//!   for certain, ambiguous) and what a receipt lookup finds ([`ReceiptStatus`]).
//! * [`evm`] — [`EvmChain`], a deterministic EVM-like chain: accounts with token and native
//!   balances and per-block history, per-sender nonces mined in order (a stuck nonce blocks the
//!   later ones), a mempool with same-nonce replacement at ≥ +10 % gas price, blocks, receipts,
//!   reorgs shallow (below the confirmation depth) and deep (past it, a transaction coming back
//!   or replaced by a conflicting one), and injectable faults. Moved here from the collection
//!   plugin (`git log --follow plugins/chain-sim/src/evm/mod.rs`).
//!
//! Depends on `rtgs-core` only: no I/O, no clock, no threads. Every random choice comes from the
//! core's seeded `Prng`, so one seed is one run.

#[macro_use]
extern crate rtgs_core;

pub mod wire;

pub mod answer;
pub mod evm;
pub mod types;

pub use answer::{AmbiguousCode, BroadcastOutcome, Receipt, ReceiptStatus, RejectCode};
pub use evm::EvmChain;
pub use types::{Address, ChainId, TokenId, TxHash};
