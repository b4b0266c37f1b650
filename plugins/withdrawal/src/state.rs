//! The plugin's rows: `withdrawals` ([`Withdrawal`], with its append-only records), chains,
//! assets and vaults as registered, the settings, counters and the refusals of requests that
//! never became withdrawals.
//!
//! Everything here is primary data: what the checkpoint stores and the state hash covers.
//! Lookup indexes are derived from it (`checkpoint::Index`).

use std::collections::BTreeMap;

use crate::alert::{AlertKey, OpenAlert};
use crate::chain::{AssetParams, ChainParams, VaultParams};
use crate::command::{DestinationType, RequestKind};
use crate::effect::RawTx;
use crate::operation::{Actor, Refusal, RefuseCode};
use crate::records::*;
use crate::settings::Settings;
use crate::status::{Cause, Status};
use crate::types::*;

code_enum! {
    /// Which answer a withdrawal waits for (one at a time).
    pub enum AwaitKind {
        /// The AML screener's verdict.
        Screen = 1,
        /// The policy engine's and approvers' decision.
        Authorize = 2,
        /// The signature of the round's payment (its `pending_raw`).
        Sign = 3,
        /// The signature of a replacement (boost or drop; its `pending_raw`).
        SignReplacement = 4,
        /// The signature over a raw digest.
        SignRaw = 5,
        /// A node's answer to attempt `attempt`.
        Broadcast = 6,
        /// The chain's state after an ambiguous answer to attempt `attempt`.
        Check = 7,
        /// The stale monitor's, a validity or a confirmation check's lookup.
        Lookup = 8,
        /// Whether a transaction reported reorged away came back.
        ReorgLookup = 9,
    }
}

wire_struct! {
    /// The one effect a withdrawal waits on; results naming another effect id are stale
    /// duplicates (ignored).
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Awaiting {
        pub kind: AwaitKind,
        pub effect_id: u64,
        pub since_us: u64,
        /// The attempt it concerns (broadcasts and checks), else 0.
        pub attempt: u32,
    }
}

code_enum! {
    /// Where the withdrawal's money is in the ledger.
    pub enum Money {
        /// Nothing held (raw signing, or a request before its hold).
        None = 0,
        /// Held on the customer's account (hold id = withdrawal id).
        Held = 1,
        /// The hold paid to the asset's settlement account (COMPLETED).
        Settled = 2,
        /// The hold returned to the customer.
        Released = 3,
        /// Settled, then reversed by a reversal posting (reorged away for good).
        Reversed = 4,
    }
}

wire_struct! {
    /// One `withdrawals` row and its records.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Withdrawal {
        pub id: WithdrawalId,
        pub account: LedgerAccount,
        pub asset: AssetId,
        pub chain: ChainId,
        pub amount_minor: u64,
        pub amount_chain: u128,
        pub destination_type: DestinationType,
        pub destination: Option<Text>,
        pub memo: Option<Text>,
        pub kind: RequestKind,
        pub aml: bool,
        pub created_by: Actor,
        pub created_at_us: u64,
        pub status: Status,
        pub status_since_us: u64,
        /// The seq of the last status change (QUEUED is first come, first served by it).
        pub status_seq: u64,
        pub notes: Option<Text>,
        pub retry_count: u32,
        /// 1 for the first round; a retry starts the next.
        pub round: u32,
        pub vault: Option<VaultId>,
        pub slot: Option<u64>,
        /// The round's slot is taken and nothing of it is out yet: on ordered chains one such
        /// withdrawal per vault, so a slot given back is always the vault's last.
        pub slot_unsent: bool,
        /// The highest fee sent for the round's slot.
        pub fee: u64,
        /// `chain_validity_expires_at`: when the round's signature stops being valid.
        pub chain_validity_expires_at_us: Option<u64>,
        pub last_boost_at_us: Option<u64>,
        pub cancel_attempted_at_us: Option<u64>,
        pub cancel_completed_at_us: SetOnce<u64>,
        pub awaiting: Option<Awaiting>,
        /// The transaction a `Sign` / `SignReplacement` waits to have signed.
        pub pending_raw: Option<RawTx>,
        /// When the monitor looks at it next (derived from the status, kept for the index).
        pub timer_us: Option<u64>,
        /// Last news of its transaction (sent, a webhook, a lookup's answer).
        pub watch_since_us: u64,
        pub money: Money,
        pub fail_cause: Option<Cause>,
        pub reject_cause: Option<Cause>,
        pub blocked_by_rule: Option<u32>,
        /// An alert was raised about it that no operator has answered yet (dismiss needs one;
        /// the alerts themselves, open or closed, are `State::alerts`).
        pub alert_open: bool,
        pub aml_case: Option<u64>,
        /// Screenings sent without an answer.
        pub aml_unanswered: u32,
        pub raw_signature: SetOnce<Blob>,
        /// A live confirmation of a COMPLETED withdrawal was reorged away: is it coming back?
        pub reorg_since_us: Option<u64>,
        /// COMPLETED and seen in a block twice the threshold deep (or raw signing): a reorg
        /// report the monitor missed can no longer matter. Until then the chain is asked again
        /// every `reorg_check` — a reorg's webhook can be lost like any other.
        pub audited: bool,
        /// When it reached a final status (cleared if it leaves it).
        pub finished_at_us: Option<u64>,
        pub transitions: AppendOnly<TransitionRecord>,
        pub attempts: AppendOnly<BroadcastAttempt>,
        pub outcomes: AppendOnly<OutcomeRecord>,
        pub confirmations: AppendOnly<Confirmation>,
        pub operations: AppendOnly<OperationRecord>,
        pub vault_choices: AppendOnly<VaultChoice>,
    }
}

impl Withdrawal {
    /// The current round's attempts.
    pub fn round_attempts(&self) -> impl Iterator<Item = &BroadcastAttempt> {
        let round = self.round;
        self.attempts.iter().filter(move |a| *a.round() == round)
    }

    pub fn attempt(&self, number: u32) -> Option<&BroadcastAttempt> {
        self.attempts.get(number.checked_sub(1)? as usize)
    }

    /// Whether a drop was sent for the current round.
    pub fn drop_sent(&self) -> bool {
        self.round_attempts().any(|a| *a.purpose() == Purpose::Drop)
    }

    /// Whether it ended and nothing about it is open (it may be archived).
    pub fn is_settled_final(&self) -> bool {
        self.status.is_final()
            && self.reorg_since_us.is_none()
            && self.awaiting.is_none()
            && (self.status != Status::Completed || self.audited)
    }
}

wire_struct! {
    /// A vault and its slot counter.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Vault {
        pub params: VaultParams,
        pub enabled: bool,
        /// The next slot a withdrawal gets (ordered chains: the nonce, counter or position).
        pub next_slot: u64,
    }
}

wire_struct! {
    /// Totals for metrics and audits.
    #[derive(Clone, PartialEq, Eq, Debug, Default)]
    pub struct Counters {
        /// Every request (accepted or refused).
        pub requests: u64,
        /// Requests that did not become withdrawals, and commands rejected, by code.
        pub refused: BTreeMap<RefuseCode, u64>,
        /// Operations refused, by code (they are also in their withdrawal's records).
        pub operations_refused: BTreeMap<RefuseCode, u64>,
        pub operations_applied: u64,
        /// Results of effects no longer awaited (duplicates after a failover, late answers).
        pub results_ignored: u64,
        /// Chain webhooks for hashes that are not ours (or archived).
        pub webhooks_foreign: u64,
        /// The same chain report again.
        pub webhooks_duplicate: u64,
        /// Broadcast effects emitted (first sends, replacements, re-sends).
        pub broadcasts: u64,
        /// Re-sends of a signed payload already sent.
        pub resends: u64,
        pub lookups: u64,
        /// Answers overdue: asked again (or a replacement given up).
        pub answers_overdue: u64,
        /// Alerts opened (the open ones are `State::alerts`).
        pub alerts: u64,
        /// Settlements reversed after a reorg took the transaction for good.
        pub reversals: u64,
        /// Ledger intents refused (settlement or reversal; the withdrawal waits and retries).
        pub ledger_refusals: u64,
        pub archived: u64,
        /// Timers handled.
        pub timers: u64,
    }
}

wire_struct! {
    /// The whole primary state.
    #[derive(Clone, PartialEq, Eq, Debug, Default)]
    pub struct State {
        /// Highest seq applied: entries at or below it are ignored (idempotent by seq).
        pub seq_applied: u64,
        pub now_us: u64,
        pub settings: Settings,
        pub chains: BTreeMap<ChainId, ChainParams>,
        pub assets: BTreeMap<AssetId, AssetParams>,
        pub vaults: BTreeMap<VaultId, Vault>,
        /// Per chain, the vault the round-robin chose last.
        pub rr_cursor: BTreeMap<ChainId, VaultId>,
        /// Boxed: a withdrawal is taken out and put back at every change, and a pointer moves
        /// cheaper than the row.
        pub withdrawals: BTreeMap<WithdrawalId, Box<Withdrawal>>,
        /// Requests refused before they became withdrawals (bounded, oldest forgotten first).
        pub refusals: BTreeMap<WithdrawalId, Refusal>,
        /// Raw signatures by digest, with the seq they were cached at (bounded).
        pub raw_cache: BTreeMap<Digest, (u64, Blob)>,
        pub counters: Counters,
        /// Commands rejected as a whole (malformed, unknown withdrawal ...), by seq.
        pub rejections_recent: Vec<(u64, Refusal)>,
        /// The open operator alerts (see `alert`): derived from state, replicated with it.
        pub alerts: BTreeMap<AlertKey, OpenAlert>,
        /// The last alert id handed out.
        pub alert_id_last: u64,
    }
}
