//! # rtgs-matching: the P2P deposit matching plugin
//!
//! A customer's deposit order is matched with P2P sellers' inventory and an LP's capacity
//! (mission.md §3.3, seed 002, whose §0 governs). A deterministic, sans-IO state machine over the
//! ordered journal: every center applies the same entries and holds the same state; money moves
//! only through ledger intents in the seq of the entry; the outside world (the LP, the P2P
//! marketplace and payment rail) is reached only through [`MatchingEffect`]s, whose results come
//! back as [`MatchingCommand`]s in new entries.
//!
//! # The model (seed §0, the taxi call)
//! An **order** is the call: matching never ends it — only the user (cancel) or its own
//! `expires_at` does. A **session** is one dispatch attempt, a window of a P2P phase (180 s) then
//! an LP phase (120 s), per partner; a partner without P2P gets the LP phase only. A window that
//! closes unmatched leaves the session AWAITING_USER_DECISION: the user retries (a new window,
//! same session), cancels (session and order CANCELLED) or closes (CLOSED_BY_USER); no decision
//! within the grace (300 s) ⇒ AUTO_CLOSED. No automatic retry, no automatic cancel.
//!
//! # Money (mission §3.4, decided here)
//! * **Sellers' funds** are their ledger accounts' balances. A P2P reservation (an anchor) is a
//!   `Hold` on the seller's account under a lease; committing makes it a leg (the same hold).
//! * **The LP's capacity** is reserved at the LP (its lease, renewed at half); its leg is a `Hold`
//!   on the LP's nostro account in the ledger (`SetLpAccount`, one per currency), made in the
//!   commit's own intent group, so a bundle's legs are all holds, committed all or none.
//! * **The buyer side** is the order's `credit_account`, the partner's account its customers'
//!   deposits are paid to. When every leg is PAID, one group settles every leg's hold to it:
//!   a leg moves exactly its amount from its seller (or the LP) to the buyer side.
//! * Compensation and expiry release the holds; conservation is the ledger's
//!   `Σ balances + Σ holds = Σ funded`.
//!
//! # PII
//! The journal is replicated to every center and kept forever: an order carries an opaque
//! [`types::CustomerRef`] only. Customer PII (name, phone, bank account) lives at the origin
//! center's API, apart from the journal and the session data, readable only by the owning
//! participant and operators (`rtgs-api`, `plugins/matching`).
//!
//! # Layout
//! * [`types`] — ids, the opaque customer reference, the LP idempotency key.
//! * [`settings`] — per-partner windows and grace, the plugin's timings.
//! * [`command`] — [`MatchingCommand`]: orders, decisions, settings, sellers' offers, operators'
//!   resolutions, and the LP's answers, paid legs, trade webhooks; with codec.
//! * [`effect`] — [`MatchingEffect`]: LP reserve / renew / confirm / release, hand-offs, alerts.
//! * [`state`] — orders, sessions (reservations, LP state, bundle and legs), sellers, trade
//!   records, escalations, dead letters, error records, counters.
//! * [`plugin`] — [`MatchingPlugin`]: the `Plugin` impl, command routing, inputs, queries. Its
//!   rules live in `tick` (deadlines, the overdue sweep, the intake, timers), `session`
//!   (timers, windows, reservations returned), `routing` (phases, anchors, the atomic commit),
//!   `lp` (the LP protocol and its answers), `compensation` (provider first, then core;
//!   escalations, dead letters) and `payment` (paid legs, settlement, decisions, resolutions).
//! * [`checkpoint`] — whole-state encode/decode, state hash, derived indexes and invariants.
//! * `pending` — the effects still awaited, rebuilt from the state (what a new owner
//!   re-executes), and the report figures.
//! * [`lp_sim`] — the [`LpAdapter`] trait and a deterministic LP simulator (leases, idempotency
//!   keys kept forever, codes 330 and 336, BUSY, NO_POOL, transport failures, lost and late
//!   answers, rejection after commit, COMMITTED on reserve).
//! * [`market_sim`] — the P2P side: sellers appearing, leaving and offering part of their funds,
//!   and the payment rail that confirms buyers' payments.
//! * [`adapter`] — [`adapter::NodeAdapter`]: both simulators as the node's `EffectAdapter` (result
//!   `bmi`s derived from what they answer), and a [`adapter::Workload`] for demos.
//! * [`driver`] — a single-threaded journal driver over a real ledger and plugin host (tests).
//! * [`limits`] — every bound of the crate in one place.
//!
//! **Architecture Invariant**: nothing here reads a clock or does I/O; "now" is the entry's
//! timestamp; maps are `BTreeMap`s so that iteration (effects, the state hash) is the same on
//! every center.
//!
//! **Architecture Invariant** (no double match): an order is bound to at most one session, once
//! (set by the intake in the step that creates the session, never cleared); a commit refuses an
//! order that already has live legs; a bundle covers its order exactly. Checked by
//! `check_invariants` and on every checkpoint decode.

#[macro_use]
extern crate rtgs_core;

pub mod adapter;
pub mod checkpoint;
pub mod command;
mod compensation;
pub mod driver;
pub mod effect;
pub mod limits;
mod lp;
pub mod lp_sim;
pub mod market_sim;
mod payment;
mod pending;
pub mod plugin;
mod routing;
pub(crate) mod session;
pub mod settings;
pub mod state;
mod tick;
pub mod types;

pub use command::MatchingCommand;
pub use effect::MatchingEffect;
pub use lp_sim::{LpAdapter, LpSim};
pub use pending::double_matches;
pub use plugin::MatchingPlugin;
