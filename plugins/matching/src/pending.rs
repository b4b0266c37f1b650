//! What the plugin still waits for, re-derived from its state ([`Plugin::pending_effects`]), and
//! its report figures.
//!
//! Every effect that expects an answer leaves its id in the state until the answer is journaled:
//! a session's LP call in flight (`LpAwait`, with its key), a stray release (`StrayRelease`), a
//! hand-off whose P2P legs are not all paid. From those the effects are rebuilt exactly as
//! emitted — same id, same body, same idempotency key — so a new owner re-executing them sends
//! the *same* requests, which the LP answers by replaying its first answer. Alerts expect no
//! answer and are not pending (the case stays visible in the state).
//!
//! [`Plugin::pending_effects`]: rtgs_core::plugin::Plugin::pending_effects

use std::collections::BTreeMap;

use rtgs_core::entry::PluginKind;
use rtgs_core::plugin::Effect;

use crate::effect::{self, LpOnReservation, MatchingEffect, ReservationBody};
use crate::lp::{call_effect, effect_key, reserve_effect};
use crate::plugin::MatchingPlugin;
use crate::routing::handoff_of;
use crate::state::*;

pub(crate) fn pending_effects(p: &MatchingPlugin, out: &mut Vec<Effect>) {
    let mut all: BTreeMap<u64, MatchingEffect> = BTreeMap::new();
    for s in p.st.sessions.values() {
        if let Some(a) = s.lp.awaiting {
            let e = match a.call {
                LpCall::Reserve => Some(reserve_effect(s)),
                call => call_effect(s, call),
            };
            if let Some(e) = e.filter(|e| effect_key(e) == a.key) {
                all.insert(a.effect_id, e);
            }
        }
        if let Some((id, e)) = awaited_handoff(s) {
            all.insert(id, e);
        }
    }
    for r in p.st.strays.values() {
        let body =
            ReservationBody { session: r.session, reservation: r.reservation, amount_minor: 0, nonce: 0 };
        debug_assert_eq!(effect::reservation_key(effect::op::LP_RELEASE, &body, r.key.attempt), r.key);
        all.insert(r.effect_id, MatchingEffect::LpRelease(LpOnReservation { body, key: r.key }));
    }
    for r in p.st.abandoned.values() {
        all.insert(r.effect_id, crate::lp::abandoned_effect(r));
    }
    for (effect_id, e) in all {
        let (op, body) = e.encode();
        out.push(Effect { plugin: PluginKind::Matching, effect_id, op, body });
    }
}

/// A hand-off whose P2P legs are not all paid yet.
fn awaited_handoff(s: &Session) -> Option<(u64, MatchingEffect)> {
    let b = s.bundle.as_ref()?;
    let id = b.handoff_effect?;
    let paying = matches!(s.status, SessionStatus::PaymentInProgress | SessionStatus::Escalated);
    let unpaid = b.legs.iter().any(|l| l.kind == LegKind::P2p && l.status == LegStatus::Created);
    (paying && unpaid).then(|| (id, MatchingEffect::HandOff(handoff_of(s.id, s.order, b))))
}

/// Orders matched twice, or whose committed legs do not add up to the order: must be 0.
pub fn double_matches(p: &MatchingPlugin) -> u64 {
    let mut bad = 0;
    let mut sessions_per_order: BTreeMap<crate::types::OrderId, u32> = BTreeMap::new();
    for s in p.st.sessions.values() {
        *sessions_per_order.entry(s.order).or_default() += 1;
        let Some(b) = &s.bundle else { continue };
        let committed: u64 = b
            .legs
            .iter()
            .filter(|l| matches!(l.status, LegStatus::Created | LegStatus::Paid | LegStatus::Settled))
            .map(|l| l.amount_minor)
            .sum();
        if committed != 0 && committed != s.amount_minor {
            bad += 1;
        }
    }
    bad + sessions_per_order.values().filter(|n| **n > 1).count() as u64
}

pub(crate) fn figures(p: &MatchingPlugin, out: &mut Vec<(&'static str, u64)>) {
    let st = &p.st;
    let c = &st.counters;
    let mut orders = [0u64; 8];
    for o in st.orders.values() {
        orders[usize::from(o.status.code())] += 1;
    }
    let mut sessions = [0u64; 16];
    for s in st.sessions.values() {
        sessions[usize::from(s.status.code())] += 1;
    }
    let open_cases = st.escalations.values().filter(|e| e.resolved.is_none()).count() as u64;
    let open_letters = st.dead_letters.values().filter(|d| d.resolved_at_us.is_none()).count() as u64;
    out.extend([
        ("matching_orders", st.orders.len() as u64),
        ("matching_orders_open", orders[OrderStatus::Open.code() as usize]),
        ("matching_orders_matching", orders[OrderStatus::Matching.code() as usize]),
        ("matching_orders_matched", orders[OrderStatus::Matched.code() as usize]),
        ("matching_orders_completed", orders[OrderStatus::Completed.code() as usize]),
        ("matching_orders_cancelled", orders[OrderStatus::Cancelled.code() as usize]),
        ("matching_orders_expired", orders[OrderStatus::Expired.code() as usize]),
        ("matching_orders_idle", orders[OrderStatus::Idle.code() as usize]),
        ("matching_sellers", st.sellers.len() as u64),
        ("matching_sessions", st.sessions.len() as u64),
        ("matching_sessions_matching", sessions[SessionStatus::Matching.code() as usize]),
        ("matching_awaiting_user_decision", sessions[SessionStatus::AwaitingUserDecision.code() as usize]),
        ("matching_payment_in_progress", sessions[SessionStatus::PaymentInProgress.code() as usize]),
        ("matching_bundles_committed", c.bundles_committed),
        ("matching_windows_closed", c.windows_closed),
        ("matching_retries_by_user", c.retries_by_user),
        ("matching_closed_by_user", c.closed_by_user),
        ("matching_auto_closed", c.auto_closed),
        ("matching_cancelled", c.cancelled),
        ("matching_completed", c.completed),
        ("matching_expired", c.expired),
        ("matching_confirmed", c.confirmed),
        ("matching_blocked", c.blocked),
        ("matching_compensated", c.compensated),
        ("matching_escalated", st.escalations.len() as u64),
        ("matching_escalations_open", open_cases),
        ("matching_lp_already_committed", c.lp_already_committed),
        ("matching_dead_letters", st.dead_letters.len() as u64),
        ("matching_dead_letters_open", open_letters),
        ("matching_double_matches", double_matches(p)),
        ("matching_lp_calls", c.lp_calls),
        ("matching_lp_resends", c.lp_resends),
        ("matching_lp_expired_330", c.lp_expired_330),
        ("matching_lp_busy", c.lp_busy),
        ("matching_strays_released", c.strays_released),
        ("matching_legs_paid", c.legs_paid),
        ("matching_commands_rejected", st.rejected.values().sum()),
    ]);
}
