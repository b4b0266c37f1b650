//! Operations (the table is in `operation`): checked against the actor, the state (§3.2.1) and
//! the withdrawal's own conditions, then applied; every one — applied or refused with its
//! code — is appended to the withdrawal's `withdrawal_operations`.

use crate::command::{Operate, RequestKind};
use crate::effect::RawTx;
use crate::limits::*;
use crate::operation::{ActorKind, OpParams, OperationKind, Refusal, RefuseCode};
use crate::plugin::{Ctx, WithdrawalPlugin};
use crate::records::*;
use crate::state::*;
use crate::status::{Cause, Status};
use crate::types::*;

impl WithdrawalPlugin {
    pub(crate) fn on_operate(&mut self, cx: &mut Ctx<'_, '_>, o: &Operate) -> Result<(), Refusal> {
        let Some(mut w) = self.take(o.withdrawal) else { return Err(RefuseCode::UnknownWithdrawal.into()) };
        if w.operations.len() >= OPERATIONS_PER_WITHDRAWAL_MAX {
            self.put(w);
            *self.st.counters.operations_refused.entry(RefuseCode::TooManyOperations).or_default() += 1;
            return Ok(());
        }
        let result = self.operate(cx, &mut w, o);
        match result {
            Ok(()) => self.st.counters.operations_applied += 1,
            Err(r) => *self.st.counters.operations_refused.entry(r.code).or_default() += 1,
        }
        w.operations.push(OperationRecord::new(
            cx.seq,
            cx.now,
            o.operation,
            o.actor,
            o.params.clone(),
            result.err(),
        ));
        let chain = w.chain;
        self.put(w);
        self.dispatch_chain(cx, chain, DISPATCH_PER_TICK_MAX);
        Ok(())
    }

    /// Checks, then applies (nothing changes when it is refused).
    fn operate(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal, o: &Operate) -> Result<(), Refusal> {
        if o.actor.kind == ActorKind::Participant {
            if !o.operation.participant_may() {
                return Err(RefuseCode::OperatorOnly.into());
            }
            if w.created_by.id != o.actor.id {
                return Err(RefuseCode::NotOwner.into());
            }
        }
        if !o.operation.allowed_states().contains(&w.status) {
            return Err(RefuseCode::StateNotAllowed.into());
        }
        match o.operation {
            OperationKind::Cancel => self.op_cancel(cx, w),
            OperationKind::Drop | OperationKind::Boost => self.op_replace(cx, w, o.operation, &o.params),
            OperationKind::Retry => self.op_retry(cx, w),
            OperationKind::RescreenAml => self.op_rescreen(cx, w),
            OperationKind::BypassAml => self.op_bypass(cx, w, &o.params),
            OperationKind::Dismiss => {
                if !w.alert_open {
                    return Err(RefuseCode::NoAlert.into());
                }
                w.alert_open = false;
                self.acknowledge(w.id);
                Ok(())
            }
            OperationKind::EditNotes => {
                if o.params.notes.as_ref().is_some_and(|n| n.len() > NOTES_BYTES_MAX) {
                    return Err(RefuseCode::InvalidText.into());
                }
                w.notes = o.params.notes.clone();
                Ok(())
            }
        }
    }

    /// Before broadcast: CANCELLED, the hold released; a pending signature is abandoned (its
    /// answer will be ignored) and its slot given back.
    fn op_cancel(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal) -> Result<(), Refusal> {
        w.cancel_attempted_at_us = Some(cx.now);
        self.cancelled(cx, w, Cause::Cancel)
    }

    /// A replacement for the slot: the payment at a higher fee (boost), or nothing to the vault
    /// itself (drop) — signed first, then broadcast; the chain decides which one is mined.
    fn op_replace(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        w: &mut Withdrawal,
        op: OperationKind,
        p: &OpParams,
    ) -> Result<(), Refusal> {
        let chain = self.chain_of(w).cloned().ok_or(Refusal::of(RefuseCode::UnknownChain))?;
        let min = chain.family.replacement_fee_min(w.fee).ok_or(Refusal::of(RefuseCode::NotReplaceable))?;
        if w.awaiting.is_some() {
            return Err(RefuseCode::AnswerAwaited.into());
        }
        if w.round_attempts().count() >= ATTEMPTS_PER_ROUND_MAX {
            return Err(RefuseCode::TooManyAttempts.into());
        }
        let fee = match (op, p.fee) {
            (_, Some(fee)) => fee,
            (OperationKind::Drop, None) => min,
            _ => return Err(RefuseCode::FeeTooLow.into()),
        };
        if fee < min {
            return Err(RefuseCode::FeeTooLow.into());
        }
        let (Some(vault), Some(slot)) = (w.vault, w.slot) else {
            return Err(RefuseCode::StateNotAllowed.into());
        };
        let vault_address = self.st.vaults.get(&vault).map_or(0, |v| v.params.address);
        let token = self.asset_of(w).map_or(TokenId(0), |a| a.token);
        let drop = op == OperationKind::Drop;
        if drop {
            w.cancel_attempted_at_us = Some(cx.now);
        } else {
            w.last_boost_at_us = Some(cx.now);
        }
        w.pending_raw = Some(RawTx {
            withdrawal: w.id,
            round: w.round,
            attempt: w.attempts.len() as u32 + 1,
            purpose: if drop { Purpose::Drop } else { Purpose::Boost },
            chain: w.chain,
            family: chain.family,
            vault,
            vault_address,
            slot,
            destination: if drop { None } else { w.destination.clone() },
            memo: if drop { None } else { w.memo.clone() },
            token,
            amount_chain: if drop { 0 } else { w.amount_chain },
            fee,
            valid_until_us: None,
        });
        self.ask(cx, w, AwaitKind::SignReplacement, 0);
        Ok(())
    }

    /// A new round (nothing of the old one can confirm: every FAILED is declared only then):
    /// held again, QUEUED for a new vault slot.
    fn op_retry(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal) -> Result<(), Refusal> {
        if matches!(w.kind, RequestKind::Raw(_)) {
            return Err(RefuseCode::KindNotAllowed.into());
        }
        if w.retry_count >= RETRIES_MAX {
            return Err(RefuseCode::TooManyRetries.into());
        }
        if w.awaiting.is_some() || w.slot_unsent {
            return Err(RefuseCode::ChainNotSettled.into());
        }
        self.hold(cx, w)?;
        self.move_to(cx, w, Status::Queued, Cause::Retry)?;
        w.retry_count += 1;
        w.round += 1;
        w.vault = None;
        w.slot = None;
        w.fee = 0;
        w.chain_validity_expires_at_us = None;
        w.fail_cause = None;
        w.alert_open = false;
        self.acknowledge(w.id);
        Ok(())
    }

    /// Screened again: from PENDING_AML_SCREENING the question is sent anew; from REJECTED (by
    /// AML only) the amount is held again first.
    fn op_rescreen(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal) -> Result<(), Refusal> {
        if w.status == Status::Rejected {
            if !matches!(w.reject_cause, Some(Cause::ScreenRejected | Cause::ScreenFrozen)) {
                return Err(RefuseCode::NotAmlRejection.into());
            }
            self.hold(cx, w)?;
            self.move_to(cx, w, Status::PendingAmlScreening, Cause::AmlRescreened)?;
            w.reject_cause = None;
        }
        w.aml_unanswered = 0;
        w.alert_open = false;
        self.acknowledge(w.id);
        self.ask(cx, w, AwaitKind::Screen, 0);
        Ok(())
    }

    /// The operator takes the AML decision (a reason is required): authorization asked.
    fn op_bypass(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal, p: &OpParams) -> Result<(), Refusal> {
        if p.reason.is_none() {
            return Err(RefuseCode::ReasonRequired.into());
        }
        self.move_to(cx, w, Status::PendingAuthorization, Cause::AmlBypassed)?;
        w.alert_open = false;
        self.acknowledge(w.id);
        self.ask(cx, w, AwaitKind::Authorize, 0);
        Ok(())
    }
}
