//! Status changes and money, and the answers of the screener, the approvers and the signer.
//!
//! **Every status change goes through [`WithdrawalPlugin::move_to`]**, which checks the one
//! table (`status::check`) and records the transition; a move the table does not have changes
//! nothing and is answered with `TransitionNotAllowed`.
//!
//! **Money** (mission.md §3.2.1) moves only through ledger intents, in the seq of the change:
//! held when the request is accepted (`intake`), released on CANCELLED, REJECTED, BLOCKED and
//! every FAILED (a FAILED is only declared when nothing of the withdrawal can confirm any more:
//! before broadcast, or once the chain proves it — a revert, its slot used by another
//! transaction, its validity passed), settled to the asset's settlement account on COMPLETED,
//! reversed (a `Reverse` posting) when a reorg takes a COMPLETED transaction away for good.
//! A settlement or reversal the ledger refuses is not a state change: the withdrawal stays
//! where it is, an alert opens (`alert`), and the next check tries again.

use rtgs_core::ledger::LedgerIntent;

use crate::alert::AlertKind;
use crate::command::*;
use crate::effect::*;
use crate::limits::*;
use crate::operation::{Refusal, RefuseCode};
use crate::plugin::{Ctx, WithdrawalPlugin};
use crate::records::*;
use crate::settings::SettingKey;
use crate::state::*;
use crate::status::{self, Cause, Status};
use crate::types::*;
use crate::wire::to_vec;

/// Moves `w` to `to` at `(seq, now)` if the table allows it, recording the transition.
fn move_at(seq: u64, now: u64, w: &mut Withdrawal, to: Status, cause: Cause) -> Result<(), Refusal> {
    status::check(Some(w.status), to).map_err(|_| Refusal::of(RefuseCode::TransitionNotAllowed))?;
    assert!(w.transitions.len() < TRANSITIONS_PER_WITHDRAWAL_MAX, "transitions of {:?} unbounded", w.id);
    w.transitions.push(TransitionRecord::new(seq, now, Some(w.status), to, cause));
    w.status = to;
    w.status_since_us = now;
    w.status_seq = seq;
    w.finished_at_us = to.is_final().then_some(now);
    Ok(())
}

/// Whether `w` waits for exactly this answer.
pub(crate) fn awaits(w: &Withdrawal, kinds: &[AwaitKind], effect_id: u64) -> Option<Awaiting> {
    w.awaiting.filter(|a| a.effect_id == effect_id && kinds.contains(&a.kind))
}

impl WithdrawalPlugin {
    // ----- status -----

    /// Moves `w` to `to` if the table allows it, recording the transition.
    pub(crate) fn move_to(
        &mut self,
        cx: &Ctx<'_, '_>,
        w: &mut Withdrawal,
        to: Status,
        cause: Cause,
    ) -> Result<(), Refusal> {
        move_at(cx.seq, cx.now, w, to, cause)
    }

    /// The transition table's probe (tests only): moves withdrawal `id` to `to` through the
    /// table's check and nothing else — no money, no effects, no slot. A pair the table does
    /// not have is refused and changes nothing.
    #[doc(hidden)]
    pub fn probe_transition(&mut self, id: WithdrawalId, to: Status, cause: Cause) -> Result<(), Refusal> {
        let Some(mut w) = self.take(id) else { return Err(RefuseCode::UnknownWithdrawal.into()) };
        let (seq, now) = (self.st.seq_applied, self.st.now_us);
        let result = move_at(seq, now, &mut w, to, cause);
        self.put(w);
        result
    }

    /// FAILED for `cause`: the hold released, an unsent slot given back, an alert if asked.
    pub(crate) fn fail(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        w: &mut Withdrawal,
        cause: Cause,
        alert: Option<AlertKind>,
    ) -> Result<(), Refusal> {
        if w.status == Status::Completed {
            // Its settlement stands until reversed: a COMPLETED one fails only reorged away.
            return self.reorged_away(cx, w);
        }
        self.move_to(cx, w, Status::Failed, cause)?;
        w.fail_cause = Some(cause);
        w.awaiting = None;
        w.pending_raw = None;
        self.release(cx, w);
        self.give_back_slot(w);
        if let Some(kind) = alert {
            self.alert(cx, w, kind);
        }
        Ok(())
    }

    /// CANCELLED: the hold released, an unsent slot given back, the cancellation complete.
    pub(crate) fn cancelled(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        w: &mut Withdrawal,
        cause: Cause,
    ) -> Result<(), Refusal> {
        self.move_to(cx, w, Status::Cancelled, cause)?;
        w.awaiting = None;
        w.pending_raw = None;
        self.release(cx, w);
        self.give_back_slot(w);
        // A cancelled withdrawal never leaves CANCELLED, so this is its first and only time.
        let _ = w.cancel_completed_at_us.set(cx.now);
        Ok(())
    }

    /// COMPLETED: the hold paid to the settlement account (raw signing moves no money). A
    /// refused settlement leaves it where it is, with an alert.
    pub(crate) fn complete(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        w: &mut Withdrawal,
        cause: Cause,
    ) -> Result<(), Refusal> {
        status::check(Some(w.status), Status::Completed)
            .map_err(|_| Refusal::of(RefuseCode::TransitionNotAllowed))?;
        if w.money == Money::Held {
            let to = self.asset_of(w).map(|a| a.settlement_account.account_id());
            let settled = match to {
                Some(to) => cx.intents(&[LedgerIntent::Settle { id: w.id.0, to }]).is_ok(),
                None => false,
            };
            if !settled {
                self.st.counters.ledger_refusals += 1;
                self.alert(cx, w, AlertKind::LedgerRefused);
                return Ok(());
            }
            w.money = Money::Settled;
        }
        self.move_to(cx, w, Status::Completed, cause)?;
        w.awaiting = None;
        w.reorg_since_us = None;
        // A raw signature has no transaction a reorg could take.
        w.audited = matches!(w.kind, RequestKind::Raw(_));
        w.watch_since_us = cx.now;
        Ok(())
    }

    /// A COMPLETED withdrawal whose transaction the chain took away for good: the settlement
    /// reversed (money back on the customer's account), FAILED, an alert.
    pub(crate) fn reorged_away(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal) -> Result<(), Refusal> {
        status::check(Some(w.status), Status::Failed)
            .map_err(|_| Refusal::of(RefuseCode::TransitionNotAllowed))?;
        let settlement = self.asset_of(w).map(|a| a.settlement_account.account_id());
        let reversed = match settlement {
            Some(s) => cx
                .intents(&[LedgerIntent::Reverse {
                    from: w.account.account_id(),
                    to: s,
                    amount_minor: w.amount_minor,
                }])
                .is_ok(),
            None => false,
        };
        if !reversed {
            self.st.counters.ledger_refusals += 1;
            self.alert(cx, w, AlertKind::LedgerRefused);
            return Ok(());
        }
        w.money = Money::Reversed;
        w.reorg_since_us = None;
        self.st.counters.reversals += 1;
        self.move_to(cx, w, Status::Failed, Cause::ReorgedAway)?;
        w.fail_cause = Some(Cause::ReorgedAway);
        w.awaiting = None;
        self.alert(cx, w, AlertKind::ReorgedAway);
        Ok(())
    }

    // ----- money -----

    /// Holds the amount on the customer's account (hold id = withdrawal id).
    pub(crate) fn hold(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal) -> Result<(), Refusal> {
        let intent =
            LedgerIntent::Hold { id: w.id.0, account: w.account.account_id(), amount_minor: w.amount_minor };
        cx.intents(&[intent])
            .map_err(|e| Refusal { code: RefuseCode::LedgerRefused, ledger_reason: Some(e.reason as u16) })?;
        w.money = Money::Held;
        Ok(())
    }

    /// Releases the hold, if the withdrawal holds one.
    pub(crate) fn release(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal) {
        if w.money != Money::Held {
            return;
        }
        // The hold is this plugin's and live (money = Held says so): a refusal is a bug.
        let released = cx.intents(&[LedgerIntent::Release { id: w.id.0 }]);
        assert!(released.is_ok(), "release of {:?}'s own hold refused: {released:?}", w.id);
        w.money = Money::Released;
    }

    // ----- slots -----

    /// Gives back a slot nothing was sent with: on ordered chains it is the vault's last (one
    /// unsent slot per vault at a time), so the next withdrawal reuses it and no gap is left.
    pub(crate) fn give_back_slot(&mut self, w: &mut Withdrawal) {
        if !w.slot_unsent {
            return;
        }
        w.slot_unsent = false;
        // It never held the slot for anything: the next withdrawal takes it.
        let (Some(v), Some(slot)) = (w.vault, w.slot.take()) else { return };
        let ordered = self.chain_of(w).is_some_and(|c| c.family.ordered_slots());
        if let (true, Some(vault)) = (ordered, self.st.vaults.get_mut(&v)) {
            assert_eq!(slot + 1, vault.next_slot, "an unsent slot that is not the vault's last");
            vault.next_slot = slot;
        }
    }

    // ----- effects -----

    /// Emits the effect `kind` stands for and waits for its answer.
    pub(crate) fn ask(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal, kind: AwaitKind, attempt: u32) {
        let Some(effect) = crate::pending::effect_of(w, kind, attempt, &self.st) else { return };
        match &effect {
            WithdrawalEffect::Broadcast(_) => self.st.counters.broadcasts += 1,
            WithdrawalEffect::Lookup(_) => self.st.counters.lookups += 1,
            _ => {}
        }
        let effect_id = cx.emit(&effect);
        w.awaiting = Some(Awaiting { kind, effect_id, since_us: cx.now, attempt });
    }

    // ----- answers -----

    pub(crate) fn on_screened(&mut self, cx: &mut Ctx<'_, '_>, s: &Screened) -> Result<(), Refusal> {
        let Some(mut w) = self.take(s.withdrawal) else { return self.ignore_result() };
        if awaits(&w, &[AwaitKind::Screen], s.effect_id).is_none() || w.status != Status::PendingAmlScreening
        {
            self.put(w);
            return self.ignore_result();
        }
        w.awaiting = None;
        w.aml_case = Some(s.case_ref);
        w.aml_unanswered = 0;
        let result = match s.verdict {
            AmlVerdict::Accept => {
                self.move_to(cx, &mut w, Status::PendingAuthorization, Cause::ScreenPassed).map(|_| {
                    self.ask(cx, &mut w, AwaitKind::Authorize, 0);
                })
            }
            AmlVerdict::Alert => {
                // A human decides: rescreen-aml, bypass-aml or cancel. The `aml_alert` condition
                // stays open in the state until one of them does (a failover loses nothing).
                w.watch_since_us = cx.now;
                self.alert(cx, &mut w, AlertKind::AmlAlert);
                Ok(())
            }
            AmlVerdict::Reject | AmlVerdict::Freeze => {
                let cause =
                    if s.verdict == AmlVerdict::Reject { Cause::ScreenRejected } else { Cause::ScreenFrozen };
                self.move_to(cx, &mut w, Status::Rejected, cause).map(|_| {
                    w.reject_cause = Some(cause);
                    self.release(cx, &mut w);
                    if s.verdict == AmlVerdict::Freeze {
                        self.alert(cx, &mut w, AlertKind::AmlFrozen);
                    }
                })
            }
        };
        self.put(w);
        result
    }

    pub(crate) fn on_decided(&mut self, cx: &mut Ctx<'_, '_>, d: &Decided) -> Result<(), Refusal> {
        let Some(mut w) = self.take(d.withdrawal) else { return self.ignore_result() };
        if awaits(&w, &[AwaitKind::Authorize], d.effect_id).is_none()
            || w.status != Status::PendingAuthorization
        {
            self.put(w);
            return self.ignore_result();
        }
        w.awaiting = None;
        let result = match d.blocked_by_rule {
            Some(rule) => self.move_to(cx, &mut w, Status::Blocked, Cause::PolicyBlocked).map(|_| {
                w.blocked_by_rule = Some(rule);
                self.release(cx, &mut w);
            }),
            None => self.authorized(cx, &mut w),
        };
        let chain = w.chain;
        let queued = w.status == Status::Queued;
        self.put(w);
        if queued {
            self.dispatch_chain(cx, chain, DISPATCH_PER_TICK_MAX);
        }
        result
    }

    /// Approved: raw signing is signed at once; a transaction gets a vault slot and is signed,
    /// or waits QUEUED behind the ones already waiting for a slot of its chain.
    fn authorized(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal) -> Result<(), Refusal> {
        if matches!(w.kind, RequestKind::Raw(_)) {
            self.move_to(cx, w, Status::PendingSignature, Cause::Authorized)?;
            self.ask(cx, w, AwaitKind::SignRaw, 0);
            return Ok(());
        }
        if !self.chain_has_queue(w.chain) {
            if let Some(choice) = self.choose_vault(w.chain) {
                self.move_to(cx, w, Status::PendingSignature, Cause::Authorized)?;
                self.assign_slot(cx, w, choice);
                return Ok(());
            }
        }
        self.move_to(cx, w, Status::Queued, Cause::Authorized)
    }

    pub(crate) fn on_signature(&mut self, cx: &mut Ctx<'_, '_>, s: &SignatureResult) -> Result<(), Refusal> {
        let Some(mut w) = self.take(s.withdrawal) else { return self.ignore_result() };
        let kinds = [AwaitKind::Sign, AwaitKind::SignReplacement, AwaitKind::SignRaw];
        let Some(a) = awaits(&w, &kinds, s.effect_id) else {
            self.put(w);
            return self.ignore_result();
        };
        let result = match (&s.outcome, a.kind) {
            (
                SignOutcome::Signed { signed_payload, tx_hash },
                AwaitKind::Sign | AwaitKind::SignReplacement,
            ) => self.signed(cx, &mut w, signed_payload, *tx_hash),
            (SignOutcome::RawSigned { signature }, AwaitKind::SignRaw) => {
                self.raw_signed(cx, &mut w, signature.clone())
            }
            (SignOutcome::Refused { .. }, AwaitKind::SignReplacement) => {
                // The original is still out; only the replacement did not happen.
                w.awaiting = None;
                w.pending_raw = None;
                Ok(())
            }
            (SignOutcome::Refused { .. }, _) => self.fail(cx, &mut w, Cause::SignatureRefused, None),
            // An answer of the wrong shape for what was asked: a signer bug, ignored.
            _ => {
                self.st.counters.results_ignored += 1;
                Ok(())
            }
        };
        let chain = w.chain;
        self.put(w);
        self.dispatch_chain(cx, chain, DISPATCH_PER_TICK_MAX);
        result
    }

    /// A transaction signed: recorded whole as an attempt, then broadcast — unless its
    /// signature would expire before it could be (§3.2: never broadcast), or it is sign-only.
    fn signed(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        w: &mut Withdrawal,
        payload: &Blob,
        hash: TxHash,
    ) -> Result<(), Refusal> {
        let Some(raw) = w.pending_raw.take() else { return self.ignore_result() };
        if self.ix.tx_index.contains_key(&hash) || w.attempts.iter().any(|a| *a.tx_hash() == hash) {
            // A signer that hands out a hash twice: refused, the request stays awaited.
            w.pending_raw = Some(raw);
            self.st.counters.results_ignored += 1;
            return Ok(());
        }
        w.awaiting = None;
        let number = w.attempts.len() as u32 + 1;
        let sign_only = w.kind == RequestKind::SignOnly && raw.purpose == Purpose::Payment;
        let node = self.chain_of(w).map(|c| c.node.clone());
        let margin = self.st.settings.us(SettingKey::BroadcastMargin);
        let expired = raw.valid_until_us.is_some_and(|v| cx.now.saturating_add(margin) >= v);
        let sent = !(expired || sign_only);
        self.ix.tx_index.insert(hash, (w.id, number));
        w.attempts.push(BroadcastAttempt::new(
            number,
            w.round,
            raw.purpose,
            raw.vault,
            raw.slot,
            raw.fee,
            raw.valid_until_us,
            Blob(to_vec(&raw)),
            payload.clone(),
            hash,
            if sent { node } else { None },
            sent.then_some(cx.now),
            cx.now,
            cx.seq,
        ));
        if raw.purpose != Purpose::Payment {
            w.fee = w.fee.max(raw.fee);
        }
        if expired {
            self.outcome(cx, w, number, AttemptOutcome::Expired, None);
            if raw.purpose == Purpose::Payment {
                return self.fail(cx, w, Cause::SignatureExpired, Some(AlertKind::SignatureExpired));
            }
            return Ok(());
        }
        if sign_only {
            self.move_to(cx, w, Status::Signed, Cause::SignedOnly)?;
            // The customer has it: nothing more of ours will be sent for this slot.
            w.slot_unsent = false;
            w.watch_since_us = cx.now;
            return Ok(());
        }
        if raw.purpose == Purpose::Payment {
            self.move_to(cx, w, Status::Broadcasting, Cause::SignedAndBroadcast)?;
        }
        self.ask(cx, w, AwaitKind::Broadcast, number);
        Ok(())
    }

    fn raw_signed(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        w: &mut Withdrawal,
        signature: Blob,
    ) -> Result<(), Refusal> {
        status::check(Some(w.status), Status::Completed)
            .map_err(|_| Refusal::of(RefuseCode::TransitionNotAllowed))?;
        if let RequestKind::Raw(digest) = w.kind {
            self.cache_raw(cx.seq, digest, signature.clone());
        }
        // First and only signature of this request: it completes with it.
        let _ = w.raw_signature.set(signature);
        w.awaiting = None;
        self.complete(cx, w, Cause::RawSigned)
    }

    /// Remembers a raw signature by digest (bounded: the oldest is forgotten first).
    fn cache_raw(&mut self, seq: u64, digest: Digest, signature: Blob) {
        if self.st.raw_cache.len() >= RAW_SIGNATURE_CACHE_MAX && !self.st.raw_cache.contains_key(&digest) {
            let oldest = self.st.raw_cache.iter().min_by_key(|(_, (s, _))| *s).map(|(d, _)| *d);
            if let Some(d) = oldest {
                self.st.raw_cache.remove(&d);
            }
        }
        self.st.raw_cache.insert(digest, (seq, signature));
    }

    /// Appends an attempt's outcome.
    pub(crate) fn outcome(
        &mut self,
        cx: &Ctx<'_, '_>,
        w: &mut Withdrawal,
        attempt: u32,
        outcome: AttemptOutcome,
        detail: Option<u8>,
    ) {
        if w.outcomes.len() < OUTCOMES_PER_WITHDRAWAL_MAX {
            w.outcomes.push(OutcomeRecord::new(attempt, outcome, detail, cx.now, cx.seq));
        }
    }
}
