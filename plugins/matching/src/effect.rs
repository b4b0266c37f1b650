//! Effects: requests to the outside world, emitted as `rtgs_core::plugin::Effect { op, body }`
//! and executed by an adapter on the owning center only. LP answers re-enter the journal as
//! [`crate::command::LpAnswered`] naming the effect and the key.
//!
//! Re-executing an effect is harmless by construction: every LP call carries its idempotency key
//! (body + attempt number), which the LP keeps unique forever, so a second execution — by a new
//! owner, or after an answer was lost — gets the first answer replayed. A hand-off names its
//! session and bundle, and the P2P rail takes each leg once.

use rtgs_core::entry::{PluginKind, Seq};
use rtgs_core::plugin::Effect;
use rtgs_core::wire::{from_slice, to_vec, DecodeError};

use crate::limits::EFFECTS_PER_ENTRY_MAX;
use crate::state::LegKind;
use crate::types::*;

wire_struct! {
    /// `reserve`: hold LP capacity for the remainder of an order.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct ReserveBody {
        pub session: SessionId,
        pub partner: PartnerId,
        pub currency: Ccy,
        pub amount_minor: u64,
    }
}

wire_struct! {
    /// `renew`, `confirm` and `release` name a reservation; `confirm` repeats the amount. A
    /// renewal's `nonce` is the lease it extends (each renewal is its own request, a retried
    /// one the same); 0 otherwise.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct ReservationBody {
        pub session: SessionId,
        pub reservation: ReservationId,
        pub amount_minor: u64,
        pub nonce: u64,
    }
}

wire_struct! {
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct LpReserve {
        pub body: ReserveBody,
        pub key: IdempotencyKey,
    }
}

wire_struct! {
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct LpOnReservation {
        pub body: ReservationBody,
        pub key: IdempotencyKey,
    }
}

wire_struct! {
    /// One leg as execution sees it.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct HandOffLeg {
        pub index: u8,
        pub kind: LegKind,
        pub seller: Option<SellerId>,
        pub escrow: Option<EscrowId>,
        pub amount_minor: u64,
        pub deadline_us: u64,
    }
}

wire_struct! {
    /// The bundle's legs go to execution (`p2p_matches` created): the P2P rail watches the
    /// buyer's payments, the LP's escrow is already known to the LP.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct HandOff {
        pub session: SessionId,
        pub order: OrderId,
        pub bundle: u32,
        pub legs: Vec<HandOffLeg>,
    }
}

code_enum! {
    /// What an operator alert is about.
    pub enum AlertKind {
        Escalated = 1,
        DeadLetter = 2,
        LpAlreadyCommitted = 3,
    }
}

wire_struct! {
    /// Tell the operators (fire and forget: the case stays visible in the state).
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Alert {
        pub kind: AlertKind,
        pub session: SessionId,
        /// The escalation's or dead letter's id.
        pub case: u64,
    }
}

wire_struct! {
    /// The widget shows the user the decision (retry / cancel / close) until the grace ends
    /// (fire and forget: the widget also polls the order's status).
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct DecisionNeeded {
        pub session: SessionId,
        pub order: OrderId,
        /// The window that closed (1, 2, ...).
        pub window: u32,
        pub grace_ends_at_us: u64,
    }
}

/// Everything the plugin asks of the outside world.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum MatchingEffect {
    LpReserve(LpReserve),
    LpRenew(LpOnReservation),
    LpConfirm(LpOnReservation),
    LpRelease(LpOnReservation),
    HandOff(HandOff),
    Alert(Alert),
    AwaitingDecision(DecisionNeeded),
}

/// Effect op codes (the `Effect::op`).
pub mod op {
    pub const LP_RESERVE: u16 = 1;
    pub const LP_RENEW: u16 = 2;
    pub const LP_CONFIRM: u16 = 3;
    pub const LP_RELEASE: u16 = 4;
    pub const HAND_OFF: u16 = 5;
    pub const ALERT: u16 = 6;
    pub const AWAITING_DECISION: u16 = 7;
}

impl MatchingEffect {
    pub fn encode(&self) -> (u16, Vec<u8>) {
        use MatchingEffect as E;
        match self {
            E::LpReserve(e) => (op::LP_RESERVE, to_vec(e)),
            E::LpRenew(e) => (op::LP_RENEW, to_vec(e)),
            E::LpConfirm(e) => (op::LP_CONFIRM, to_vec(e)),
            E::LpRelease(e) => (op::LP_RELEASE, to_vec(e)),
            E::HandOff(e) => (op::HAND_OFF, to_vec(e)),
            E::Alert(e) => (op::ALERT, to_vec(e)),
            E::AwaitingDecision(e) => (op::AWAITING_DECISION, to_vec(e)),
        }
    }

    pub fn decode(op: u16, body: &[u8]) -> Result<Self, DecodeError> {
        use MatchingEffect as E;
        Ok(match op {
            op::LP_RESERVE => E::LpReserve(from_slice(body)?),
            op::LP_RENEW => E::LpRenew(from_slice(body)?),
            op::LP_CONFIRM => E::LpConfirm(from_slice(body)?),
            op::LP_RELEASE => E::LpRelease(from_slice(body)?),
            op::HAND_OFF => E::HandOff(from_slice(body)?),
            op::ALERT => E::Alert(from_slice(body)?),
            op::AWAITING_DECISION => E::AwaitingDecision(from_slice(body)?),
            other => return Err(DecodeError::UnknownOp(other)),
        })
    }

    /// Decodes a core effect; it must be the matching plugin's.
    pub fn from_effect(e: &Effect) -> Result<Self, DecodeError> {
        if e.plugin != PluginKind::Matching {
            return Err(DecodeError::Invalid("effect of another plugin"));
        }
        Self::decode(e.op, &e.body)
    }
}

/// The idempotency key of a reserve: its body and the session's attempt number.
pub fn reserve_key(body: &ReserveBody, attempt: u32) -> IdempotencyKey {
    IdempotencyKey::of(op::LP_RESERVE, &to_vec(body), attempt)
}

/// The idempotency key of a call on a reservation.
pub fn reservation_key(op: u16, body: &ReservationBody, attempt: u32) -> IdempotencyKey {
    IdempotencyKey::of(op, &to_vec(body), attempt)
}

/// Hands out the effect ids of one entry and counts what is left of its budget.
pub(crate) struct Effects<'a> {
    seq: Seq,
    next_index: usize,
    out: &'a mut Vec<Effect>,
}

impl<'a> Effects<'a> {
    pub(crate) fn new(seq: Seq, out: &'a mut Vec<Effect>) -> Self {
        Effects { seq, next_index: 0, out }
    }

    /// Whether another session step fits this entry's id space.
    pub(crate) fn room_for_session(&self) -> bool {
        self.next_index + crate::limits::EFFECTS_PER_SESSION_STEP_MAX <= EFFECTS_PER_ENTRY_MAX
    }

    /// Emits one effect and returns its id (callers check `room_for_session` per session).
    pub(crate) fn emit(&mut self, effect: &MatchingEffect) -> u64 {
        assert!(self.next_index < EFFECTS_PER_ENTRY_MAX, "effect budget of one entry exceeded");
        let effect_id = Effect::id_for(self.seq, self.next_index as u16);
        self.next_index += 1;
        let (op, body) = effect.encode();
        self.out.push(Effect { plugin: PluginKind::Matching, effect_id, op, body });
        effect_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::tests::eur;

    fn samples() -> Vec<MatchingEffect> {
        use MatchingEffect as E;
        let rb = ReservationBody {
            session: SessionId(1),
            reservation: ReservationId(2),
            amount_minor: 30,
            nonce: 0,
        };
        let key = reservation_key(op::LP_CONFIRM, &rb, 0);
        let body =
            ReserveBody { session: SessionId(1), partner: PartnerId(4), currency: eur(), amount_minor: 30 };
        vec![
            E::LpReserve(LpReserve { body, key: reserve_key(&body, 1) }),
            E::LpRenew(LpOnReservation { body: rb, key }),
            E::LpConfirm(LpOnReservation { body: rb, key }),
            E::LpRelease(LpOnReservation { body: rb, key }),
            E::HandOff(HandOff {
                session: SessionId(1),
                order: OrderId(8),
                bundle: 1,
                legs: vec![HandOffLeg {
                    index: 0,
                    kind: LegKind::P2p,
                    seller: Some(SellerId(3)),
                    escrow: None,
                    amount_minor: 30,
                    deadline_us: 99,
                }],
            }),
            E::Alert(Alert { kind: AlertKind::Escalated, session: SessionId(1), case: 4 }),
            E::AwaitingDecision(DecisionNeeded {
                session: SessionId(1),
                order: OrderId(8),
                window: 2,
                grace_ends_at_us: 77,
            }),
        ]
    }

    #[test]
    fn every_effect_round_trips_and_ids_are_deterministic() {
        let mut out = Vec::new();
        let mut sink = Effects::new(9, &mut out);
        for e in samples() {
            sink.emit(&e);
        }
        for (i, (raw, e)) in out.iter().zip(samples()).enumerate() {
            assert_eq!(raw.effect_id, Effect::id_for(9, i as u16));
            assert_eq!(MatchingEffect::from_effect(raw), Ok(e));
        }
        let foreign = Effect { plugin: PluginKind::Collection, effect_id: 1, op: 1, body: vec![] };
        assert!(MatchingEffect::from_effect(&foreign).is_err());
        for e in samples() {
            let (op, body) = e.encode();
            for n in 0..body.len() {
                assert!(MatchingEffect::decode(op, &body[..n]).is_err());
            }
        }
    }

    /// ☠️ Seed §4-c, "멱등키는 본문의 함수가 아니다": the same body at another attempt is
    /// another key; the same body at the same attempt is the same key (replayed by the LP).
    #[test]
    fn the_key_is_the_body_and_the_attempt() {
        let body =
            ReserveBody { session: SessionId(1), partner: PartnerId(4), currency: eur(), amount_minor: 30 };
        assert_eq!(reserve_key(&body, 0), reserve_key(&body, 0));
        assert_ne!(reserve_key(&body, 0), reserve_key(&body, 1));
        assert_eq!(reserve_key(&body, 0).body_hash, reserve_key(&body, 1).body_hash);
        let other = ReserveBody { amount_minor: 31, ..body };
        assert_ne!(reserve_key(&body, 0), reserve_key(&other, 0));
    }
}
