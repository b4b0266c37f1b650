//! The plugin's rows: deposit orders (`p2p_deposit_orders`), matching sessions
//! (`matching_sessions`, with their reservations, LP state and bundle — the legs the legacy kept
//! as `p2p_matches`), sellers' inventory, the LP trade records handed to execution
//! (`torq_trades`), escalations, dead letters, error records and counters.
//!
//! Everything here is primary data: it is what the checkpoint stores and the state hash covers.
//! Lookup indexes are derived from it (`checkpoint::Index`).

use std::collections::BTreeMap;

use rtgs_core::entry::Seq;
use rtgs_core::wire::{DecodeError, Reader, Wire, Writer};

use crate::command::{Decision, Resolution};
use crate::settings::{PartnerSettings, Timings};
use crate::types::*;

code_enum! {
    /// A deposit order's status. The order is the taxi call: matching never ends it — only the
    /// user (CANCELLED) or its own `expires_at` (EXPIRED) does, or the payment (COMPLETED).
    pub enum OrderStatus {
        /// Submitted, waiting for the intake.
        Open = 1,
        /// Bound to its session, which is matching or awaiting the user's decision.
        Matching = 2,
        /// Its session committed a bundle: never claimed again.
        Matched = 3,
        /// Every leg paid and settled.
        Completed = 4,
        /// The user cancelled it.
        Cancelled = 5,
        /// Its own deadline passed.
        Expired = 6,
        /// Its session ended without a match (closed by the user, auto-closed after the grace,
        /// or LP_ALREADY_COMMITTED): the order lives on until the user cancels it or it expires;
        /// no automatic retry, no automatic cancel.
        Idle = 7,
    }
}

impl OrderStatus {
    /// Still alive (its deadline can still end it).
    pub fn is_live(self) -> bool {
        matches!(self, OrderStatus::Open | OrderStatus::Matching | OrderStatus::Matched | OrderStatus::Idle)
    }
}

wire_struct! {
    /// One deposit order. `customer` is an opaque reference: no PII ever enters the journal.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Order {
        pub id: OrderId,
        pub partner: PartnerId,
        pub customer: CustomerRef,
        pub currency: Ccy,
        pub amount_minor: u64,
        /// The partner's account the bought amount is paid to at settlement (the buyer side).
        pub credit_account: Account,
        /// The order's one deadline: every leg inherits it, it never moves.
        pub expires_at_us: u64,
        pub created_at_us: u64,
        pub status: OrderStatus,
        /// The session the intake bound it to. Set once, never cleared: an order bound to a
        /// session is never claimed again.
        pub session: Option<SessionId>,
        /// The `Tick` past `expires_at` has dealt with it (an order a compensation or an
        /// operator still holds stays live after that).
        pub deadline_handled: bool,
        pub ended_at_us: Option<u64>,
    }
}

code_enum! {
    /// `matching_sessions.status`.
    pub enum SessionStatus {
        /// The window is open (the P2P phase, then the LP phase, by time).
        Matching = 1,
        /// The window closed unmatched; not terminal: the user retries, cancels or closes.
        AwaitingUserDecision = 2,
        /// A bundle with an LP leg is committed; the LP's confirmation is awaited (BUNDLE_READY).
        Committed = 3,
        /// The LP rejected after the commit: provider reservations are being released first; the
        /// core side (legs, seller funds, order) waits for that.
        Compensating = 4,
        /// The legs are handed to execution (the escrow recorded on the LP leg, if any).
        PaymentInProgress = 5,
        /// Something irreversible stands (a leg past CREATED, a live escrow): an operator decides.
        Escalated = 6,
        /// COMPENSATION_FAILED or ESCROW_RECORD_FAILED: stopped until an operator acts.
        DeadLetter = 7,
        Completed = 8,
        Cancelled = 9,
        ClosedByUser = 10,
        /// No decision within the grace: the system closed it. Never merged with
        /// CLOSED_BY_USER — it is the count the product wants to bring down.
        AutoClosed = 11,
        /// The LP's `reserve` answered COMMITTED (a confirmation whose answer was lost).
        LpAlreadyCommitted = 12,
        /// The order's own deadline passed.
        Expired = 13,
        /// An operator released an escalated or dead-lettered session's legs.
        ResolvedByOperator = 14,
    }
}

/// The kinds of session state (seed §0 `MatchSessionStatus.Kind`). No wildcard anywhere it is
/// matched: a new status does not compile until every rule says where it belongs.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum SessionKind {
    WindowOpen,
    AwaitingDecision,
    Committed,
    Terminal,
}

impl SessionStatus {
    pub fn kind(self) -> SessionKind {
        use SessionStatus as S;
        match self {
            S::Matching => SessionKind::WindowOpen,
            S::AwaitingUserDecision => SessionKind::AwaitingDecision,
            S::Committed | S::Compensating | S::PaymentInProgress | S::Escalated | S::DeadLetter => {
                SessionKind::Committed
            }
            S::Completed
            | S::Cancelled
            | S::ClosedByUser
            | S::AutoClosed
            | S::LpAlreadyCommitted
            | S::Expired
            | S::ResolvedByOperator => SessionKind::Terminal,
        }
    }

    /// The overdue sweep looks only at these (`IN (open states)`, never `NOT IN (terminal)`: an
    /// unknown state errs on the safe side — not swept — instead of releasing a live session's
    /// reservations).
    pub fn is_sweepable(self) -> bool {
        matches!(self.kind(), SessionKind::WindowOpen | SessionKind::AwaitingDecision)
    }

    /// The name the seed and the API use.
    pub fn name(self) -> &'static str {
        use SessionStatus as S;
        match self {
            S::Matching => "MATCHING",
            S::AwaitingUserDecision => "AWAITING_USER_DECISION",
            S::Committed => "BUNDLE_COMMITTED",
            S::Compensating => "COMPENSATING",
            S::PaymentInProgress => "PAYMENT_IN_PROGRESS",
            S::Escalated => "ESCALATED",
            S::DeadLetter => "DEAD_LETTER",
            S::Completed => "COMPLETED",
            S::Cancelled => "CANCELLED",
            S::ClosedByUser => "CLOSED_BY_USER",
            S::AutoClosed => "AUTO_CLOSED",
            S::LpAlreadyCommitted => "LP_ALREADY_COMMITTED",
            S::Expired => "EXPIRED",
            S::ResolvedByOperator => "RESOLVED_BY_OPERATOR",
        }
    }
}

impl OrderStatus {
    pub fn name(self) -> &'static str {
        match self {
            OrderStatus::Open => "OPEN",
            OrderStatus::Matching => "MATCHING",
            OrderStatus::Matched => "MATCHED",
            OrderStatus::Completed => "COMPLETED",
            OrderStatus::Cancelled => "CANCELLED",
            OrderStatus::Expired => "EXPIRED",
            OrderStatus::Idle => "IDLE",
        }
    }
}

wire_struct! {
    /// A P2P seller's inventory reserved by a session (an anchor): a ledger hold with a lease.
    /// Renewed at half its lease while the window is open; one that lapses reverts (the hold is
    /// released), and a restart or failover that finds it past its expiry treats it as returned.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct P2pReservation {
        pub hold_id: u64,
        pub seller: SellerId,
        pub account: Account,
        pub amount_minor: u64,
        pub expires_at_us: u64,
    }
}

code_enum! {
    /// The LP reservation API's calls (`TorqLpReservationClient`).
    pub enum LpCall {
        Reserve = 1,
        Renew = 2,
        Confirm = 3,
        Release = 4,
    }
}

wire_struct! {
    /// An LP call in flight: rebuilt exactly (same effect id, same body, same key) for a new
    /// owner; sent again with the same key when its answer is overdue.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct LpAwait {
        pub call: LpCall,
        pub effect_id: u64,
        pub key: IdempotencyKey,
        pub sent_at_us: u64,
    }
}

wire_struct! {
    /// The LP capacity a session holds: the LP's reservation and its lease.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct LpHold {
        pub reservation: ReservationId,
        pub amount_minor: u64,
        pub expires_at_us: u64,
        /// The lease the LP granted (renewal is due at half of it).
        pub lease_us: u64,
    }
}

wire_struct! {
    /// A session's side of the LP protocol.
    #[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
    pub struct LpState {
        /// `matching_sessions.lp_reserve_attempt`: rises only on 330.
        pub attempt: u32,
        /// The amount the reservation in flight (or held) is for.
        pub amount_minor: u64,
        pub held: Option<LpHold>,
        pub awaiting: Option<LpAwait>,
        /// Consecutive BUSY / NO_POOL / transport failures: the backoff's exponent.
        pub retries: u32,
    }
}

code_enum! {
    /// Where a leg's funds come from.
    pub enum LegKind {
        /// The LP's capacity (escrow at the LP; its nostro account in the ledger).
        Lp = 1,
        /// A P2P seller's inventory (its ledger account).
        P2p = 2,
    }
}

code_enum! {
    /// A leg's status (`p2p_matches.status`). Past CREATED a leg is irreversible: never
    /// compensated automatically.
    pub enum LegStatus {
        Created = 1,
        /// The buyer's payment for this leg is confirmed (CODEF / the LP's completion webhook).
        Paid = 2,
        Settled = 3,
        Cancelled = 4,
        Expired = 5,
    }
}

wire_struct! {
    /// One leg of a bundle: an amount held on a seller's (or the LP's) account.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Leg {
        pub kind: LegKind,
        pub hold_id: u64,
        pub account: Account,
        pub seller: Option<SellerId>,
        pub amount_minor: u64,
        /// The order's deadline, inherited (never shrinking: one deadline per order).
        pub deadline_us: u64,
        pub status: LegStatus,
        pub reservation: Option<ReservationId>,
        /// Recorded from the LP's confirmation (same escrow again = success, another = refused).
        pub escrow: Option<EscrowId>,
        pub trade: Option<TradeId>,
    }
}

wire_struct! {
    /// The legs committed together, atomically, in one seq: all or none.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Bundle {
        /// 1, 2, ... per session (a compensated bundle is followed by a new one).
        pub number: u32,
        pub committed_at_us: u64,
        pub legs: Vec<Leg>,
        /// The hand-off to execution (`p2p_matches` created), pending while a P2P leg is unpaid.
        pub handoff_effect: Option<u64>,
    }
}

impl Bundle {
    pub fn amount_minor(&self) -> u64 {
        self.legs.iter().map(|l| l.amount_minor).sum()
    }

    pub fn lp_leg(&self) -> Option<&Leg> {
        self.legs.iter().find(|l| l.kind == LegKind::Lp)
    }

    /// Something automatic compensation must not undo: a leg past CREATED or a live escrow.
    pub fn is_irreversible(&self) -> bool {
        self.legs.iter().any(|l| l.status != LegStatus::Created || l.escrow.is_some())
    }
}

code_enum! {
    /// The honest result of a bundle confirmation (`BundleConfirmationService.Result`).
    pub enum BundleResult {
        /// The LP confirmed and the escrow is recorded on the LP leg.
        Confirmed = 1,
        /// The LP could not answer now (BUSY, transport, lost answer): the same confirmation is
        /// tried again (same key).
        Blocked = 2,
        /// The LP rejected: provider released first, then the core side; re-planned after a
        /// backoff — a retry, not a completion.
        Compensated = 3,
        /// Rejected, but something irreversible stands: handed to an operator.
        Escalated = 4,
        /// The core side of a compensation was refused: dead letter, stopped.
        CompensationFailed = 5,
        /// The escrow could not be recorded (another one is already there): dead letter, stopped.
        EscrowRecordFailed = 6,
    }
}

wire_struct! {
    /// One matching attempt of an order (`matching_sessions`).
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Session {
        pub id: SessionId,
        pub order: OrderId,
        pub partner: PartnerId,
        pub currency: Ccy,
        pub amount_minor: u64,
        pub status: SessionStatus,
        pub opened_at_us: u64,
        /// The current window: the P2P phase ends here, then the LP phase to `window_ends_at_us`.
        pub window_opened_at_us: u64,
        pub p2p_phase_ends_at_us: u64,
        pub window_ends_at_us: u64,
        /// `matching_sessions.expires_at`: it moves, and the status says what it means — the
        /// window's close (MATCHING) or the grace's end (AWAITING_USER_DECISION).
        pub expires_at_us: u64,
        /// Windows opened (the first, then one per user retry).
        pub windows: u32,
        /// Windows the overdue sweep closed (at most one per window).
        pub window_closes: u32,
        /// P2P anchors held while the window is open.
        pub p2p: Vec<P2pReservation>,
        pub lp: LpState,
        pub bundle: Option<Bundle>,
        pub bundles_committed: u32,
        pub compensations: u32,
        /// When the next routing pass or retry is due.
        pub retry_at_us: Option<u64>,
        /// The session's timer (derived from the above; stored so the index rebuilds).
        pub wake_at_us: Option<u64>,
        pub last_result: Option<BundleResult>,
        pub last_decision: Option<Decision>,
        pub ended_at_us: Option<u64>,
    }
}

impl Session {
    /// Funds reserved but not committed: the anchors (and the LP capacity, outside the ledger).
    pub fn p2p_reserved_minor(&self) -> u64 {
        self.p2p.iter().map(|r| r.amount_minor).sum()
    }
}

wire_struct! {
    /// A P2P seller and its inventory.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Seller {
        pub id: SellerId,
        /// The ledger account holding the seller's inventory.
        pub account: Account,
        pub currency: Ccy,
        /// What the seller offers right now (reserved and committed amounts included); 0: the
        /// seller left.
        pub offer_minor: u64,
        /// Held for anchors and unsettled legs.
        pub reserved_minor: u64,
        pub sold_minor: u64,
    }
}

impl Seller {
    pub fn free_minor(&self) -> u64 {
        self.offer_minor.saturating_sub(self.reserved_minor)
    }
}

wire_struct! {
    /// The LP trade handed to execution (`torq_trades` mirror): written with the escrow on the
    /// LP leg, in the same step, because everything after the confirmation — the buyer's
    /// transfer notice, the LP's completion webhook, the expiry backstop — finds the trade by
    /// its escrow, not the leg. Identity, amount and partner only: no seller data.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct TradeRecord {
        pub escrow: EscrowId,
        pub trade: TradeId,
        pub session: SessionId,
        pub order: OrderId,
        pub partner: PartnerId,
        pub amount_minor: u64,
        pub recorded_at_us: u64,
        /// The LP's completion webhook came (exactly once counts).
        pub completed: bool,
    }
}

code_enum! {
    /// Why an operator must decide.
    pub enum EscalationReason {
        /// The LP rejected after the commit, but a leg is past CREATED or an escrow is live.
        IrreversibleOnReject = 1,
        /// The order's deadline passed with an escrow live or a leg paid.
        DeadlinePassed = 2,
        /// `reserve` answered COMMITTED: an escrow exists that `release` cannot undo (336).
        LpAlreadyCommitted = 3,
        /// An LP confirmation for a reservation the session no longer uses (a late confirm).
        OrphanEscrow = 4,
        /// `release` answered 336: the reservation was committed after all.
        ReleaseRefused = 5,
        /// Settling the paid legs was refused by the ledger (the credit account closed?).
        SettleRefused = 6,
    }
}

wire_struct! {
    /// A case handed to an operator.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Escalation {
        pub id: u64,
        pub session: SessionId,
        pub order: OrderId,
        pub reason: EscalationReason,
        pub reservation: Option<ReservationId>,
        pub escrow: Option<EscrowId>,
        pub at_us: u64,
        pub resolved: Option<Resolution>,
        pub resolved_at_us: Option<u64>,
    }
}

code_enum! {
    /// What stopped a session in the dead-letter queue.
    pub enum DeadLetterKind {
        CompensationFailed = 1,
        EscrowRecordFailed = 2,
    }
}

wire_struct! {
    /// A session stopped until an operator acts.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct DeadLetter {
        pub id: u64,
        pub session: SessionId,
        pub kind: DeadLetterKind,
        /// The ledger's refusal (ISO reason code number), for a compensation.
        pub reason_code: u16,
        pub escrow_recorded: Option<EscrowId>,
        pub escrow_offered: Option<EscrowId>,
        pub at_us: u64,
        pub retries: u32,
        pub resolved_at_us: Option<u64>,
    }
}

code_enum! {
    /// Error records (the seed's `log.error`): kept in the state, so no error is a log line
    /// only one center wrote.
    pub enum ErrorKind {
        LpAlreadyCommitted = 1,
        OrphanEscrow = 2,
        EscrowConflict = 3,
        CompensationFailed = 4,
        ReleaseRefused = 5,
        SettleRefused = 6,
        /// A seller's hold was refused by the ledger (its funds are gone): offer cut.
        SellerHoldRefused = 7,
        /// The LP leg's hold on the LP account was refused at commit.
        LpHoldRefused = 8,
        /// One of this plugin's holds was not in the ledger when released (a bug).
        HoldMissing = 9,
    }
}

wire_struct! {
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct ErrorRecord {
        pub seq: Seq,
        pub session: SessionId,
        pub kind: ErrorKind,
        pub reservation: Option<ReservationId>,
        pub escrow: Option<EscrowId>,
        /// The ISO reason code number of a ledger refusal, else 0.
        pub code: u16,
    }
}

code_enum! {
    /// Why a command was refused (the plugin's own answer; the journal keeps the entry).
    pub enum RejectKind {
        Malformed = 1,
        OrderExists = 2,
        InvalidOrder = 3,
        UnknownAccount = 4,
        CurrencyMismatch = 5,
        AlreadyExpired = 6,
        TooManyOrders = 7,
        UnknownOrder = 8,
        /// The decision does not apply to the session's state.
        DecisionNotAllowed = 9,
        InvalidSetting = 10,
        TooManyPartners = 11,
        UnknownSeller = 12,
        SellerConflict = 13,
        TooManySellers = 14,
        UnknownSession = 15,
        ResolutionNotAllowed = 16,
        UnknownLeg = 17,
    }
}

wire_struct! {
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Rejection {
        pub seq: Seq,
        pub kind: RejectKind,
    }
}

wire_struct! {
    /// An LP release the plugin owes for a reservation no session uses (a late RESERVED after
    /// the window closed, a reservation left when a user cancelled): pending until answered.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct StrayRelease {
        pub session: SessionId,
        pub reservation: ReservationId,
        pub key: IdempotencyKey,
        pub effect_id: u64,
        pub sent_at_us: u64,
    }
}

wire_struct! {
    /// A `reserve` whose session stopped waiting (its window closed, the user cancelled) while it
    /// was in flight: asked again (same key) until answered, so that whatever it reserved is
    /// released — or, committed, handed to an operator. Never forgotten.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct AbandonedReserve {
        pub session: SessionId,
        pub partner: PartnerId,
        pub currency: Ccy,
        pub amount_minor: u64,
        pub key: IdempotencyKey,
        pub effect_id: u64,
        pub sent_at_us: u64,
    }
}

wire_struct! {
    /// Totals. They observe; no rule reads them back.
    #[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
    pub struct Counters {
        pub orders: u64,
        pub sessions: u64,
        pub windows_opened: u64,
        pub windows_closed: u64,
        pub retries_by_user: u64,
        pub closed_by_user: u64,
        pub auto_closed: u64,
        pub cancelled: u64,
        pub expired: u64,
        pub completed: u64,
        pub bundles_committed: u64,
        pub confirmed: u64,
        pub blocked: u64,
        pub compensated: u64,
        pub escalated: u64,
        pub compensation_failed: u64,
        pub escrow_record_failed: u64,
        pub lp_already_committed: u64,
        pub commits_refused_live_legs: u64,
        pub lp_calls: u64,
        pub lp_resends: u64,
        pub lp_expired_330: u64,
        pub lp_busy: u64,
        pub lp_no_pool: u64,
        pub lp_transport: u64,
        pub lp_rejected: u64,
        pub lp_renewals: u64,
        pub lp_leases_lapsed: u64,
        pub answers_ignored: u64,
        pub strays_released: u64,
        pub p2p_renewals: u64,
        pub p2p_leases_lapsed: u64,
        pub holds_refused: u64,
        pub legs_paid: u64,
        pub webhooks_duplicate: u64,
        pub webhooks_early: u64,
        pub alerts: u64,
    }
}

/// The whole plugin state.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct State {
    pub seq_applied: Seq,
    pub now_us: u64,
    pub timings: Timings,
    /// The settings of partners without their own.
    pub default_settings: PartnerSettings,
    pub partners: BTreeMap<PartnerId, PartnerSettings>,
    /// The LP's nostro account in the ledger, per currency (its legs are held there).
    pub lp_accounts: BTreeMap<Ccy, Account>,
    pub sellers: BTreeMap<SellerId, Seller>,
    pub orders: BTreeMap<OrderId, Order>,
    /// Boxed: a session is taken out and put back at every step (`with_session`), a pointer
    /// moves cheaper than the row.
    pub sessions: BTreeMap<SessionId, Box<Session>>,
    pub session_id_last: u64,
    pub hold_id_last: u64,
    pub trades: BTreeMap<EscrowId, TradeRecord>,
    pub escalations: BTreeMap<u64, Escalation>,
    pub dead_letters: BTreeMap<u64, DeadLetter>,
    pub strays: BTreeMap<ReservationId, StrayRelease>,
    pub abandoned: BTreeMap<IdempotencyKey, AbandonedReserve>,
    pub early_webhooks: BTreeMap<EscrowId, TradeId>,
    pub errors_recent: Vec<ErrorRecord>,
    pub rejections_recent: Vec<Rejection>,
    pub rejected: BTreeMap<RejectKind, u64>,
    pub counters: Counters,
}

impl Wire for State {
    const BYTES_MIN: usize = 0;
    fn put(&self, w: &mut Writer<'_>) {
        self.seq_applied.put(w);
        self.now_us.put(w);
        self.timings.put(w);
        self.default_settings.put(w);
        self.partners.put(w);
        self.lp_accounts.put(w);
        self.sellers.put(w);
        self.orders.put(w);
        self.sessions.put(w);
        self.session_id_last.put(w);
        self.hold_id_last.put(w);
        self.trades.put(w);
        self.escalations.put(w);
        self.dead_letters.put(w);
        self.strays.put(w);
        self.abandoned.put(w);
        self.early_webhooks.put(w);
        self.errors_recent.put(w);
        self.rejections_recent.put(w);
        self.rejected.put(w);
        self.counters.put(w);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(State {
            seq_applied: Wire::get(r)?,
            now_us: Wire::get(r)?,
            timings: Wire::get(r)?,
            default_settings: Wire::get(r)?,
            partners: Wire::get(r)?,
            lp_accounts: Wire::get(r)?,
            sellers: Wire::get(r)?,
            orders: Wire::get(r)?,
            sessions: Wire::get(r)?,
            session_id_last: Wire::get(r)?,
            hold_id_last: Wire::get(r)?,
            trades: Wire::get(r)?,
            escalations: Wire::get(r)?,
            dead_letters: Wire::get(r)?,
            strays: Wire::get(r)?,
            abandoned: Wire::get(r)?,
            early_webhooks: Wire::get(r)?,
            errors_recent: Wire::get(r)?,
            rejections_recent: Wire::get(r)?,
            rejected: Wire::get(r)?,
            counters: Wire::get(r)?,
        })
    }
}

impl State {
    /// The settings in force for a partner.
    pub fn settings_of(&self, partner: PartnerId) -> PartnerSettings {
        self.partners.get(&partner).copied().unwrap_or(self.default_settings)
    }
}
