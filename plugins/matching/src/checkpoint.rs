//! Whole-state checkpoint, state hash, derived indexes and the invariants between them.
//!
//! Only primary data ([`State`]) is encoded; the lookup indexes ([`Index`]) are rebuilt from it
//! on decode and must then equal what the running plugin maintained incrementally — that
//! comparison *is* the invariant check (`MatchingPlugin::check_invariants`). Building them checks
//! the relations the rules rely on: every bundle covers its order exactly, an order has at most
//! one session and is matched at most once, sellers' reserved amounts are their anchors and live
//! legs, the escrow ↔ trade records agree. A checkpoint that breaks one is refused.

use std::collections::{BTreeMap, BTreeSet};

pub use rtgs_core::wire::CheckpointError;
use rtgs_core::wire::{check, hash_checkpoint, read_checkpoint, write_checkpoint, Sink};

use crate::limits::{BUNDLE_LEGS_MAX, P2P_LEGS_MAX};
use crate::state::*;
use crate::types::*;

/// Checkpoint format version.
pub const CHECKPOINT_VERSION: u8 = 1;
const STATE_HASH_SEED: u64 = 0x3A7C_0000_0000_0001;

/// Lookup structures derived from [`State`]; never encoded.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Index {
    /// OPEN orders no session was ever bound to: all the intake may claim.
    pub intake: BTreeSet<OrderId>,
    /// Live orders by their own deadline.
    pub deadlines: BTreeSet<(u64, OrderId)>,
    /// Sessions the overdue sweep may act on (window open, or awaiting a decision), by
    /// `expires_at`. A session in any other state is not here, so it is never swept.
    pub overdue: BTreeSet<(u64, SessionId)>,
    /// Session timers.
    pub wakes: BTreeSet<(u64, SessionId)>,
    /// Sellers with something free to reserve, by currency and free amount.
    pub free: BTreeSet<(Ccy, u64, SellerId)>,
    /// Which sessions hold an anchor of which seller.
    pub anchors: BTreeSet<(SellerId, SessionId)>,
    pub live_orders: usize,
}

impl Index {
    /// Rebuilds every index from primary data, checking the relations they rely on.
    pub fn build(st: &State) -> Result<Index, &'static str> {
        let mut ix = Index::default();
        ix.index_orders(st)?;
        let reserved = ix.index_sessions(st)?;
        ix.index_sellers(st, &reserved)?;
        ix.index_trades(st)?;
        Ok(ix)
    }

    fn index_orders(&mut self, st: &State) -> Result<(), &'static str> {
        for (id, o) in &st.orders {
            check(o.id == *id, "order key")?;
            check(o.amount_minor > 0, "order amount")?;
            match (o.status, o.session) {
                (OrderStatus::Open, None) => {
                    self.intake.insert(*id);
                }
                (OrderStatus::Open, Some(_)) => return Err("an open order bound to a session"),
                (OrderStatus::Matching | OrderStatus::Matched, None) => {
                    return Err("matching without a session")
                }
                _ => {}
            }
            if let Some(s) = o.session {
                let session = st.sessions.get(&s).ok_or("order bound to an unknown session")?;
                check(session.order == *id, "order and session disagree")?;
            }
            if o.status.is_live() {
                if !o.deadline_handled {
                    self.deadlines.insert((o.expires_at_us, *id));
                }
                self.live_orders += 1;
                check(o.ended_at_us.is_none(), "live order with an end")?;
            }
        }
        Ok(())
    }

    /// Returns what each seller has reserved (anchors and live legs).
    fn index_sessions(&mut self, st: &State) -> Result<BTreeMap<SellerId, u64>, &'static str> {
        let mut reserved: BTreeMap<SellerId, u64> = BTreeMap::new();
        let mut holds: BTreeSet<u64> = BTreeSet::new();
        for (id, s) in &st.sessions {
            check(s.id == *id && id.0 >= 1 && id.0 <= st.session_id_last, "session id")?;
            let o = st.orders.get(&s.order).ok_or("session of an unknown order")?;
            check(o.session == Some(*id), "an order with two sessions")?;
            check(o.amount_minor == s.amount_minor && o.currency == s.currency, "session and order differ")?;
            check(order_fits(s.status, o.status), "session and order statuses disagree")?;
            check(s.p2p.len() <= P2P_LEGS_MAX, "too many anchors")?;
            check(s.p2p.is_empty() || s.status == SessionStatus::Matching, "anchors outside the window")?;
            check(s.p2p_reserved_minor() <= s.amount_minor, "anchors above the order")?;
            for r in &s.p2p {
                check(holds.insert(r.hold_id) && r.hold_id <= st.hold_id_last, "hold id")?;
                check(st.sellers.contains_key(&r.seller), "anchor of an unknown seller")?;
                check(self.anchors.insert((r.seller, *id)), "two anchors of one seller")?;
                *reserved.entry(r.seller).or_default() += r.amount_minor;
            }
            if let Some(b) = &s.bundle {
                check_bundle(b, o, &mut holds, &mut reserved, st.hold_id_last)?;
            }
            check(s.wake_at_us == crate::session::next_wake(s, &st.timings), "session timer drifted")?;
            if let Some(at) = s.wake_at_us {
                self.wakes.insert((at, *id));
            }
            if s.status.is_sweepable() {
                self.overdue.insert((s.expires_at_us, *id));
            }
            if s.status.kind() == SessionKind::Terminal {
                check(s.lp.awaiting.is_none() && s.p2p.is_empty(), "a finished session still waits")?;
            }
        }
        Ok(reserved)
    }

    fn index_sellers(&mut self, st: &State, reserved: &BTreeMap<SellerId, u64>) -> Result<(), &'static str> {
        for (id, s) in &st.sellers {
            check(s.id == *id, "seller key")?;
            let r = reserved.get(id).copied().unwrap_or(0);
            check(s.reserved_minor == r, "seller reserved differs from its anchors and legs")?;
            if s.free_minor() > 0 {
                self.free.insert((s.currency, s.free_minor(), *id));
            }
        }
        Ok(())
    }

    fn index_trades(&mut self, st: &State) -> Result<(), &'static str> {
        for (escrow, t) in &st.trades {
            check(t.escrow == *escrow, "trade key")?;
            let s = st.sessions.get(&t.session).ok_or("trade of an unknown session")?;
            let leg = s.bundle.as_ref().and_then(|b| b.lp_leg()).ok_or("trade without an LP leg")?;
            check(leg.escrow == Some(*escrow) && leg.trade == Some(t.trade), "trade and leg disagree")?;
        }
        for (reservation, r) in &st.strays {
            check(r.reservation == *reservation, "stray key")?;
        }
        for (key, r) in &st.abandoned {
            check(r.key == *key, "abandoned key")?;
        }
        Ok(())
    }
}

/// Which order statuses a session status allows.
fn order_fits(s: SessionStatus, o: OrderStatus) -> bool {
    use OrderStatus as O;
    use SessionStatus as S;
    match s {
        S::Matching | S::AwaitingUserDecision => o == O::Matching,
        S::Committed | S::Compensating | S::PaymentInProgress | S::Escalated | S::DeadLetter => {
            o == O::Matched
        }
        S::Completed => o == O::Completed,
        S::Cancelled => o == O::Cancelled,
        S::Expired => o == O::Expired,
        S::ClosedByUser | S::AutoClosed | S::LpAlreadyCommitted | S::ResolvedByOperator => {
            matches!(o, O::Idle | O::Cancelled | O::Expired)
        }
    }
}

/// A bundle covers its order exactly, with at most 3 legs (≤ 2 P2P, ≤ 1 LP), each inheriting
/// the order's deadline; its live legs' holds are distinct and count as their sellers' reserved.
fn check_bundle(
    b: &Bundle,
    o: &Order,
    holds: &mut BTreeSet<u64>,
    reserved: &mut BTreeMap<SellerId, u64>,
    hold_id_last: u64,
) -> Result<(), &'static str> {
    check(b.legs.len() <= BUNDLE_LEGS_MAX && !b.legs.is_empty(), "bundle legs")?;
    let p2p = b.legs.iter().filter(|l| l.kind == LegKind::P2p).count();
    check(p2p <= P2P_LEGS_MAX && b.legs.len() - p2p <= 1, "bundle leg kinds")?;
    check(b.amount_minor() == o.amount_minor, "a bundle does not cover its order exactly")?;
    for l in &b.legs {
        check(l.deadline_us == o.expires_at_us, "a leg's deadline is not its order's")?;
        check(l.amount_minor > 0 && l.hold_id <= hold_id_last, "leg")?;
        check(l.kind == LegKind::Lp || l.escrow.is_none(), "escrow on a P2P leg")?;
        check(l.kind == LegKind::Lp || l.seller.is_some(), "P2P leg without a seller")?;
        if matches!(l.status, LegStatus::Created | LegStatus::Paid) {
            check(holds.insert(l.hold_id), "two live legs share a hold")?;
            if let Some(seller) = l.seller {
                *reserved.entry(seller).or_default() += l.amount_minor;
            }
        }
    }
    let live = b.legs.iter().any(|l| matches!(l.status, LegStatus::Created | LegStatus::Paid));
    check(!live || o.status == OrderStatus::Matched, "live legs of an order not MATCHED")?;
    Ok(())
}

/// Writes the checkpoint (version byte, then the state) into any sink.
pub fn write_state(st: &State, sink: &mut dyn Sink) {
    write_checkpoint(CHECKPOINT_VERSION, st, sink);
}

/// Reads a checkpoint and rebuilds its indexes.
pub fn read_state(buf: &[u8]) -> Result<(State, Index), CheckpointError> {
    let st: State = read_checkpoint(CHECKPOINT_VERSION, buf)?;
    let ix = Index::build(&st).map_err(CheckpointError::Inconsistent)?;
    Ok((st, ix))
}

/// Hash of the whole state: the checkpoint's bytes, folded without materialising them.
pub fn hash_state(st: &State) -> u64 {
    hash_checkpoint(STATE_HASH_SEED, CHECKPOINT_VERSION, st)
}
