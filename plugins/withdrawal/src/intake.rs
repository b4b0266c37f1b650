//! Requests: checked, held, and made withdrawals — or refused before they become one.
//!
//! A request is accepted when it is well-formed for its asset's chain and the ledger holds its
//! amount on the customer's account (the hold's id is the withdrawal id, the request's seq).
//! Refused requests never become withdrawals (no state, no transition): the refusal is kept by
//! request id for a while (`REFUSALS_KEPT_MAX`) for the requester's answer, and counted.
//!
//! **Decided** (the seed is silent): a withdrawal names the customer's *ledger account*
//! directly — the account the participant's API key owns, as for a transfer's debtor — and an
//! *asset*, which maps to one token of one chain and to a ledger currency (`AssetParams`):
//! the amount is in that currency's minor units and scales to token units by
//! `10^scale_exp`. Sign-only needs a validity window and unordered slots (Solana, Algorand): a
//! signed nonce the customer may never send would block the vault behind it.

use crate::chain::ChainFamily;
use crate::command::*;
use crate::limits::*;
use crate::operation::{Refusal, RefuseCode};
use crate::plugin::{Ctx, WithdrawalPlugin};
use crate::records::*;
use crate::state::*;
use crate::status::{self, Cause, Status};
use crate::types::*;

impl WithdrawalPlugin {
    pub(crate) fn on_create(&mut self, cx: &mut Ctx<'_, '_>, c: &CreateWithdrawal) {
        let id = WithdrawalId(cx.seq);
        match self.accept(cx, id, c) {
            Ok(w) => self.put(Box::new(w)),
            Err(refusal) => self.refuse_request(id, refusal),
        }
    }

    fn refuse_request(&mut self, id: WithdrawalId, refusal: Refusal) {
        self.st.counters.requests += 1;
        *self.st.counters.refused.entry(refusal.code).or_default() += 1;
        if self.st.refusals.len() >= REFUSALS_KEPT_MAX {
            self.st.refusals.pop_first();
        }
        self.st.refusals.insert(id, refusal);
    }

    /// The request as a new withdrawal (held, in SUBMITTED or PENDING_AML_SCREENING), or why not.
    fn accept(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        id: WithdrawalId,
        c: &CreateWithdrawal,
    ) -> Result<Withdrawal, Refusal> {
        let asset = self.st.assets.get(&c.asset).cloned().ok_or(Refusal::of(RefuseCode::UnknownAsset))?;
        let chain = self.st.chains.get(&asset.chain).cloned().ok_or(Refusal::of(RefuseCode::UnknownChain))?;
        check_shape(c, chain.family)?;
        let amount_chain = if matches!(c.kind, RequestKind::Raw(_)) {
            0
        } else {
            if c.amount_minor > rtgs_core::limits::AMOUNT_MINOR_MAX {
                return Err(RefuseCode::AmountTooLarge.into());
            }
            asset.to_chain_units(c.amount_minor).ok_or(Refusal::of(RefuseCode::AmountTooLarge))?
        };
        let open = self.ix.chain_open.get(&chain.chain).copied().unwrap_or(0);
        if chain.workspace_in_flight_max > 0 && open >= chain.workspace_in_flight_max {
            return Err(RefuseCode::WorkspaceLimit.into());
        }
        let to = if c.aml { Status::PendingAmlScreening } else { Status::Submitted };
        status::check(None, to).map_err(|_| Refusal::of(RefuseCode::TransitionNotAllowed))?;
        let mut w = new_row(id, c, asset.chain, amount_chain, to, cx);
        if !matches!(c.kind, RequestKind::Raw(_)) {
            self.hold(cx, &mut w)?;
        }
        self.st.counters.requests += 1;
        if c.aml {
            self.ask(cx, &mut w, AwaitKind::Screen, 0);
        }
        Ok(w)
    }
}

/// The request's fields for its kind and chain.
fn check_shape(c: &CreateWithdrawal, family: ChainFamily) -> Result<(), Refusal> {
    let text_ok = |t: &Option<Text>, max: usize| t.as_ref().is_none_or(|t| t.len() <= max);
    if !text_ok(&c.destination, DESTINATION_BYTES_MAX)
        || !text_ok(&c.memo, MEMO_BYTES_MAX)
        || !text_ok(&c.notes, NOTES_BYTES_MAX)
    {
        return Err(RefuseCode::InvalidText.into());
    }
    match c.kind {
        RequestKind::Raw(_) => {
            if c.amount_minor != 0 || c.aml || c.destination.is_some() {
                return Err(RefuseCode::KindNotAllowed.into());
            }
        }
        RequestKind::Standard | RequestKind::SignOnly => {
            if c.destination.is_none() {
                return Err(RefuseCode::KindNotAllowed.into());
            }
            if c.amount_minor == 0 {
                return Err(RefuseCode::AmountZero.into());
            }
            if c.kind == RequestKind::SignOnly && (!family.has_validity_window() || family.ordered_slots()) {
                return Err(RefuseCode::KindNotAllowed.into());
            }
        }
    }
    Ok(())
}

fn new_row(
    id: WithdrawalId,
    c: &CreateWithdrawal,
    chain: ChainId,
    amount_chain: u128,
    status: Status,
    cx: &Ctx<'_, '_>,
) -> Withdrawal {
    let mut transitions = AppendOnly::default();
    transitions.push(TransitionRecord::new(cx.seq, cx.now, None, status, Cause::Created));
    Withdrawal {
        id,
        account: c.account,
        asset: c.asset,
        chain,
        amount_minor: if matches!(c.kind, RequestKind::Raw(_)) { 0 } else { c.amount_minor },
        amount_chain,
        destination_type: c.destination_type,
        destination: c.destination.clone(),
        memo: c.memo.clone(),
        kind: c.kind,
        aml: c.aml,
        created_by: c.actor,
        created_at_us: cx.now,
        status,
        status_since_us: cx.now,
        status_seq: cx.seq,
        notes: c.notes.clone(),
        retry_count: 0,
        round: 1,
        vault: None,
        slot: None,
        slot_unsent: false,
        fee: 0,
        chain_validity_expires_at_us: None,
        last_boost_at_us: None,
        cancel_attempted_at_us: None,
        cancel_completed_at_us: SetOnce::default(),
        awaiting: None,
        pending_raw: None,
        timer_us: None,
        watch_since_us: cx.now,
        money: Money::None,
        fail_cause: None,
        reject_cause: None,
        blocked_by_rule: None,
        alert_open: false,
        aml_case: None,
        aml_unanswered: 0,
        raw_signature: SetOnce::default(),
        reorg_since_us: None,
        audited: false,
        finished_at_us: None,
        transitions,
        attempts: AppendOnly::default(),
        outcomes: AppendOnly::default(),
        confirmations: AppendOnly::default(),
        operations: AppendOnly::default(),
        vault_choices: AppendOnly::default(),
    }
}
