//! Commands: what enters the plugin through the journal, as
//! `Payload::Plugin(PluginCommand { plugin: Matching, op, body })`.
//!
//! Inputs (ops 1–15): orders and the user's decisions (participants, through the widget),
//! partners' settings, the LP's nostro account and operators' resolutions (operators), sellers'
//! offers (the P2P marketplace). Results (ops 16–31): the LP's answers, each naming the effect
//! and the idempotency key it answers, the P2P rail's payment confirmations and the LP's trade
//! completion webhook.

use rtgs_core::entry::{InputError, PluginCommand, PluginKind};
use rtgs_core::wire::{from_slice, to_vec, DecodeError, Reader, Wire, Writer};

use crate::limits::COMMAND_BYTES_MAX;
use crate::settings::{PartnerSettings, Timings};
use crate::state::LpCall;
use crate::types::*;

wire_struct! {
    /// A customer's deposit order, through its partner's widget. `customer` is an opaque
    /// reference, never PII.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct SubmitOrder {
        pub order: OrderId,
        pub partner: PartnerId,
        pub customer: CustomerRef,
        pub currency: Ccy,
        pub amount_minor: u64,
        pub credit_account: Account,
        pub expires_at_us: u64,
    }
}

code_enum! {
    /// The user's decision once a window closed unmatched (or a cancel while it is open).
    pub enum Decision {
        /// A new window in the same session.
        Retry = 1,
        /// Session and order CANCELLED.
        Cancel = 2,
        /// Session CLOSED_BY_USER; the order lives on until it expires or is cancelled.
        Close = 3,
    }
}

impl Decision {
    pub fn name(self) -> &'static str {
        match self {
            Decision::Retry => "retry",
            Decision::Cancel => "cancel",
            Decision::Close => "close",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Decision::ALL.iter().copied().find(|d| d.name() == name)
    }
}

wire_struct! {
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Decide {
        pub order: OrderId,
        pub decision: Decision,
    }
}

wire_struct! {
    /// A partner's own settings (`None`: back to the defaults).
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct SetPartnerSettings {
        pub partner: PartnerId,
        pub settings: Option<PartnerSettings>,
    }
}

wire_struct! {
    /// The LP's nostro account for a currency: its legs are held there.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct SetLpAccount {
        pub currency: Ccy,
        pub account: Account,
    }
}

wire_struct! {
    /// The plugin's timings (operators; demos and the simulator shorten them). Journaled like
    /// everything else, so a replica replaying from the first entry has the same ones.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct SetTimings {
        pub timings: Timings,
    }
}

wire_struct! {
    /// A seller's offer from the P2P marketplace: what it is willing to have reserved and
    /// committed right now (0: it left). Lowering it below what is reserved returns anchors;
    /// committed legs stay.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct SellerOffer {
        pub seller: SellerId,
        pub account: Account,
        pub currency: Ccy,
        pub offer_minor: u64,
    }
}

code_enum! {
    /// An operator's decision on an escalated or dead-lettered session.
    pub enum Resolution {
        /// Release every leg's funds (the operator dealt with the LP's escrow out of band).
        Release = 1,
        /// Settle every leg to the order's credit account.
        Settle = 2,
        /// Run the compensation again (a dead letter): provider release (idempotent), then core.
        Retry = 3,
    }
}

impl Resolution {
    pub fn name(self) -> &'static str {
        match self {
            Resolution::Release => "release",
            Resolution::Settle => "settle",
            Resolution::Retry => "retry",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Resolution::ALL.iter().copied().find(|d| d.name() == name)
    }
}

wire_struct! {
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Resolve {
        pub session: SessionId,
        pub resolution: Resolution,
    }
}

/// The LP's `409` code: the reservation (or the key's reservation) expired.
pub const LP_CODE_EXPIRED: u16 = 330;
/// The LP's `409` code: a committed reservation cannot be released (use the trade-cancel API).
pub const LP_CODE_COMMITTED: u16 = 336;

/// What the LP answered (or that no answer came back from the transport).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum LpAnswer {
    Reserved {
        reservation: ReservationId,
        expires_at_us: u64,
    },
    Renewed {
        expires_at_us: u64,
    },
    /// `confirm` succeeded — or `reserve` found its key's reservation already confirmed.
    Committed {
        reservation: ReservationId,
        escrow: EscrowId,
        trade: TradeId,
    },
    Released,
    Busy,
    NoPool,
    /// 409 330: the reservation expired; that key is dead.
    Expired,
    /// 409 336 on `release`: it is committed.
    CannotRelease,
    /// Any other refusal, with the LP's code.
    Rejected {
        code: u16,
    },
    /// The request failed in transport (connection refused, timeout): nothing is known.
    Transport,
}

impl Wire for LpAnswer {
    const BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer<'_>) {
        match *self {
            LpAnswer::Reserved { reservation, expires_at_us } => {
                w.bytes(&[1]);
                reservation.put(w);
                expires_at_us.put(w);
            }
            LpAnswer::Renewed { expires_at_us } => {
                w.bytes(&[2]);
                expires_at_us.put(w);
            }
            LpAnswer::Committed { reservation, escrow, trade } => {
                w.bytes(&[3]);
                reservation.put(w);
                escrow.put(w);
                trade.put(w);
            }
            LpAnswer::Released => w.bytes(&[4]),
            LpAnswer::Busy => w.bytes(&[5]),
            LpAnswer::NoPool => w.bytes(&[6]),
            LpAnswer::Expired => w.bytes(&[7]),
            LpAnswer::CannotRelease => w.bytes(&[8]),
            LpAnswer::Rejected { code } => {
                w.bytes(&[9]);
                code.put(w);
            }
            LpAnswer::Transport => w.bytes(&[10]),
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(match r.array::<1>()?[0] {
            1 => LpAnswer::Reserved { reservation: Wire::get(r)?, expires_at_us: Wire::get(r)? },
            2 => LpAnswer::Renewed { expires_at_us: Wire::get(r)? },
            3 => LpAnswer::Committed {
                reservation: Wire::get(r)?,
                escrow: Wire::get(r)?,
                trade: Wire::get(r)?,
            },
            4 => LpAnswer::Released,
            5 => LpAnswer::Busy,
            6 => LpAnswer::NoPool,
            7 => LpAnswer::Expired,
            8 => LpAnswer::CannotRelease,
            9 => LpAnswer::Rejected { code: Wire::get(r)? },
            10 => LpAnswer::Transport,
            _ => return Err(DecodeError::Invalid("lp answer")),
        })
    }
}

wire_struct! {
    /// The LP's answer to one call.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct LpAnswered {
        pub effect_id: u64,
        pub session: SessionId,
        pub call: LpCall,
        pub key: IdempotencyKey,
        /// The reservation the call named (renew, confirm, release).
        pub reservation: Option<ReservationId>,
        pub answer: LpAnswer,
    }
}

wire_struct! {
    /// The P2P rail confirmed the buyer's payment for one leg (CODEF).
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct LegPaid {
        pub session: SessionId,
        pub bundle: u32,
        pub leg: u8,
    }
}

wire_struct! {
    /// The LP's completion webhook: the buyer paid into the escrow and the trade completed.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct LpTradeCompleted {
        pub escrow: EscrowId,
        pub trade: TradeId,
    }
}

/// Everything the plugin accepts.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum MatchingCommand {
    SubmitOrder(SubmitOrder),
    Decide(Decide),
    SetPartnerSettings(SetPartnerSettings),
    SetLpAccount(SetLpAccount),
    SellerOffer(SellerOffer),
    Resolve(Resolve),
    SetTimings(SetTimings),
    LpAnswered(LpAnswered),
    LegPaid(LegPaid),
    LpTradeCompleted(LpTradeCompleted),
}

/// Command op codes (the `PluginCommand::op`).
pub mod op {
    pub const SUBMIT_ORDER: u16 = 1;
    pub const DECIDE: u16 = 2;
    pub const SET_PARTNER_SETTINGS: u16 = 3;
    pub const SET_LP_ACCOUNT: u16 = 4;
    pub const SELLER_OFFER: u16 = 5;
    pub const RESOLVE: u16 = 6;
    pub const SET_TIMINGS: u16 = 7;
    pub const LP_ANSWERED: u16 = 16;
    pub const LEG_PAID: u16 = 17;
    pub const LP_TRADE_COMPLETED: u16 = 18;
}

impl MatchingCommand {
    pub fn encode(&self) -> (u16, Vec<u8>) {
        use MatchingCommand as C;
        match self {
            C::SubmitOrder(c) => (op::SUBMIT_ORDER, to_vec(c)),
            C::Decide(c) => (op::DECIDE, to_vec(c)),
            C::SetPartnerSettings(c) => (op::SET_PARTNER_SETTINGS, to_vec(c)),
            C::SetLpAccount(c) => (op::SET_LP_ACCOUNT, to_vec(c)),
            C::SellerOffer(c) => (op::SELLER_OFFER, to_vec(c)),
            C::Resolve(c) => (op::RESOLVE, to_vec(c)),
            C::SetTimings(c) => (op::SET_TIMINGS, to_vec(c)),
            C::LpAnswered(c) => (op::LP_ANSWERED, to_vec(c)),
            C::LegPaid(c) => (op::LEG_PAID, to_vec(c)),
            C::LpTradeCompleted(c) => (op::LP_TRADE_COMPLETED, to_vec(c)),
        }
    }

    /// Checks the size first (a body no command can have is not parsed).
    pub fn decode(op: u16, body: &[u8]) -> Result<Self, DecodeError> {
        use MatchingCommand as C;
        if body.len() > COMMAND_BYTES_MAX {
            return Err(DecodeError::Invalid("command too large"));
        }
        Ok(match op {
            op::SUBMIT_ORDER => C::SubmitOrder(from_slice(body)?),
            op::DECIDE => C::Decide(from_slice(body)?),
            op::SET_PARTNER_SETTINGS => C::SetPartnerSettings(from_slice(body)?),
            op::SET_LP_ACCOUNT => C::SetLpAccount(from_slice(body)?),
            op::SELLER_OFFER => C::SellerOffer(from_slice(body)?),
            op::RESOLVE => C::Resolve(from_slice(body)?),
            op::SET_TIMINGS => C::SetTimings(from_slice(body)?),
            op::LP_ANSWERED => C::LpAnswered(from_slice(body)?),
            op::LEG_PAID => C::LegPaid(from_slice(body)?),
            op::LP_TRADE_COMPLETED => C::LpTradeCompleted(from_slice(body)?),
            other => return Err(DecodeError::UnknownOp(other)),
        })
    }

    /// The journal envelope (fails only if the body exceeds the core's limit).
    pub fn to_plugin_command(&self) -> Result<PluginCommand, InputError> {
        let (op, body) = self.encode();
        PluginCommand::new(PluginKind::Matching, op, body)
    }

    /// The effect this command answers, if it is an effect's result.
    pub fn effect_id(&self) -> Option<u64> {
        match self {
            MatchingCommand::LpAnswered(a) => Some(a.effect_id),
            _ => None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use rtgs_core::entry::{AccountId, Currency};

    pub(crate) fn eur() -> Ccy {
        Ccy(Currency::new(b"EUR").unwrap_or_else(|e| panic!("{e}")))
    }

    pub(crate) fn samples() -> Vec<MatchingCommand> {
        use MatchingCommand as C;
        let key = IdempotencyKey { body_hash: 0xABCD, attempt: 2 };
        let answered = |answer| {
            C::LpAnswered(LpAnswered {
                effect_id: 7 << 16,
                session: SessionId(3),
                call: LpCall::Confirm,
                key,
                reservation: Some(ReservationId(9)),
                answer,
            })
        };
        vec![
            C::SubmitOrder(SubmitOrder {
                order: OrderId(1),
                partner: PartnerId(2),
                customer: CustomerRef([7; 16]),
                currency: eur(),
                amount_minor: 150_000,
                credit_account: Account(AccountId(40)),
                expires_at_us: 900_000_000,
            }),
            C::Decide(Decide { order: OrderId(1), decision: Decision::Retry }),
            C::SetPartnerSettings(SetPartnerSettings {
                partner: PartnerId(2),
                settings: Some(PartnerSettings { use_p2p: false, ..PartnerSettings::default() }),
            }),
            C::SetPartnerSettings(SetPartnerSettings { partner: PartnerId(2), settings: None }),
            C::SetLpAccount(SetLpAccount { currency: eur(), account: Account(AccountId(90)) }),
            C::SellerOffer(SellerOffer {
                seller: SellerId(5),
                account: Account(AccountId(50)),
                currency: eur(),
                offer_minor: 80_000,
            }),
            C::Resolve(Resolve { session: SessionId(3), resolution: Resolution::Release }),
            C::SetTimings(SetTimings { timings: Timings::default() }),
            answered(LpAnswer::Reserved { reservation: ReservationId(9), expires_at_us: 5 }),
            answered(LpAnswer::Renewed { expires_at_us: 6 }),
            answered(LpAnswer::Committed {
                reservation: ReservationId(9),
                escrow: EscrowId(1),
                trade: TradeId(2),
            }),
            answered(LpAnswer::Released),
            answered(LpAnswer::Busy),
            answered(LpAnswer::NoPool),
            answered(LpAnswer::Expired),
            answered(LpAnswer::CannotRelease),
            answered(LpAnswer::Rejected { code: 422 }),
            answered(LpAnswer::Transport),
            C::LegPaid(LegPaid { session: SessionId(3), bundle: 1, leg: 2 }),
            C::LpTradeCompleted(LpTradeCompleted { escrow: EscrowId(1), trade: TradeId(2) }),
        ]
    }

    #[test]
    fn every_command_round_trips() {
        for c in samples() {
            let (op, body) = c.encode();
            assert_eq!(MatchingCommand::decode(op, &body), Ok(c.clone()), "{c:?}");
            let env = c.to_plugin_command().map_err(|e| e.to_string());
            assert_eq!(env.map(|p| (p.plugin, p.op)), Ok((PluginKind::Matching, op)));
        }
    }

    #[test]
    fn malformed_commands_are_errors() {
        assert_eq!(MatchingCommand::decode(999, &[]), Err(DecodeError::UnknownOp(999)));
        for c in samples() {
            let (op, body) = c.encode();
            for n in 0..body.len() {
                assert!(MatchingCommand::decode(op, &body[..n]).is_err(), "{c:?} prefix {n}");
            }
            let mut longer = body.clone();
            longer.push(0);
            assert_eq!(MatchingCommand::decode(op, &longer), Err(DecodeError::Trailing(1)));
        }
        let huge = vec![0u8; COMMAND_BYTES_MAX + 1];
        assert!(MatchingCommand::decode(op::SUBMIT_ORDER, &huge).is_err());
    }

    proptest! {
        #[test]
        fn decode_never_panics(op in 0u16..40, body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = MatchingCommand::decode(op, &body);
        }
    }
}
