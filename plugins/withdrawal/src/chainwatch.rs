//! What the chain says: a node's answer to a broadcast, the monitor's webhooks (in a block, at
//! a depth, reorged away) and the answers to lookups (the stale monitor, validity and reorg
//! checks, an ambiguous broadcast) — and what each means for the withdrawal (§3.2.1).
//!
//! A lookup asks about **every hash of the slot** (the original and its replacements) and, on
//! ordered chains, how many of the vault's slots the chain has used. From one answer:
//! * one of ours mined with success ⇒ CONFIRMING (a webhook was missed: alert), COMPLETED at
//!   the chain's threshold; our drop mined at the threshold ⇒ CANCELLED;
//! * ours mined with status 0 ⇒ FAILED (alert, "manual decision"), the hold released;
//! * the slot used and none of ours mined ⇒ another transaction took it: FAILED (or, for a
//!   COMPLETED one, reorged away for good: reversed);
//! * the signature's validity passed before the lookup was even sent and nothing is mined ⇒
//!   nothing can confirm: FAILED;
//! * otherwise (pending, or unknown with the slot free) ⇒ STALE (alert; the vault gets no new
//!   transaction), and an unknown transaction is sent again — the same signed payload, which
//!   is harmless: a node that has it answers "already known".

use rtgs_chain_sim::answer::{BroadcastOutcome, Receipt, ReceiptStatus};

use crate::alert::AlertKind;
use crate::command::*;
use crate::limits::*;
use crate::operation::Refusal;
use crate::plugin::{Ctx, WithdrawalPlugin};
use crate::records::*;
use crate::state::*;
use crate::status::{Cause, Status};
use crate::types::*;

/// A block holding a transaction, as reported.
#[derive(Copy, Clone, Debug)]
struct InBlock {
    hash: TxHash,
    height: u64,
    depth: u32,
}

/// One lookup's answer, read against the withdrawal's current round.
#[derive(Default, Debug)]
struct ChainView {
    /// Ours mined with success: the attempt, its receipt, its depth.
    payment_mined: Option<(u32, Receipt, u32)>,
    drop_mined: Option<(u32, Receipt, u32)>,
    reverted: Option<u32>,
    pending: bool,
    slot_used_elsewhere: bool,
    expired: bool,
}

impl WithdrawalPlugin {
    pub(crate) fn on_broadcast_result(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        r: &BroadcastResult,
    ) -> Result<(), Refusal> {
        let Some(mut w) = self.take(r.withdrawal) else { return self.ignore_result() };
        let Some(a) = crate::lifecycle::awaits(&w, &[AwaitKind::Broadcast], r.effect_id) else {
            self.put(w);
            return self.ignore_result();
        };
        let Some(attempt) = w.attempt(a.attempt).cloned() else {
            self.put(w);
            return self.ignore_result();
        };
        if *attempt.tx_hash() != r.tx_hash {
            self.put(w);
            return self.ignore_result();
        }
        w.awaiting = None;
        let result = match r.outcome {
            BroadcastOutcome::Accepted => {
                self.outcome(cx, &mut w, a.attempt, AttemptOutcome::Submitted, None);
                w.slot_unsent = false;
                w.watch_since_us = cx.now;
                Ok(())
            }
            BroadcastOutcome::Rejected(code) => {
                self.outcome(cx, &mut w, a.attempt, AttemptOutcome::Rejected, Some(code.code()));
                self.rejected(cx, &mut w, &attempt, code)
            }
            BroadcastOutcome::Ambiguous(code) => {
                self.outcome(cx, &mut w, a.attempt, AttemptOutcome::Ambiguous, Some(code.code()));
                self.ask(cx, &mut w, AwaitKind::Check, a.attempt);
                Ok(())
            }
        };
        let chain = w.chain;
        self.put(w);
        self.dispatch_chain(cx, chain, DISPATCH_PER_TICK_MAX);
        result
    }

    /// A node refused an attempt for certain: the round fails if that was all of it that was
    /// out (its first send, or a re-send whose validity passed); a refused replacement leaves
    /// the original where it is.
    fn rejected(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        w: &mut Withdrawal,
        attempt: &BroadcastAttempt,
        code: rtgs_chain_sim::answer::RejectCode,
    ) -> Result<(), Refusal> {
        use rtgs_chain_sim::answer::RejectCode;
        let payment = *attempt.purpose() != Purpose::Drop;
        let expired = code == RejectCode::Expired;
        if w.status == Status::Completed {
            // A re-send after a reorg refused as expired: it cannot come back.
            return if expired { self.reorged_away(cx, w) } else { Ok(()) };
        }
        let cause = if expired { Cause::ValidityPassed } else { Cause::BroadcastRejected };
        if payment && (w.slot_unsent || expired) {
            return self.fail(cx, w, cause, Some(AlertKind::BroadcastRejected));
        }
        w.watch_since_us = cx.now;
        Ok(())
    }

    pub(crate) fn on_receipts(&mut self, cx: &mut Ctx<'_, '_>, r: &ReceiptsLooked) -> Result<(), Refusal> {
        let Some(mut w) = self.take(r.withdrawal) else { return self.ignore_result() };
        let kinds = [AwaitKind::Check, AwaitKind::Lookup, AwaitKind::ReorgLookup];
        let Some(a) = crate::lifecycle::awaits(&w, &kinds, r.effect_id) else {
            self.put(w);
            return self.ignore_result();
        };
        w.awaiting = None;
        w.watch_since_us = cx.now;
        let view = self.view(&w, r, a.since_us);
        let result =
            if a.kind == AwaitKind::Check { self.checked(cx, &mut w, a.attempt, &view) } else { Ok(()) };
        let result = result.and_then(|_| match a.kind {
            AwaitKind::Check if w.awaiting.is_some() || w.slot_unsent => Ok(()),
            _ => self.apply_view(cx, &mut w, &view, r.tip_height),
        });
        let chain = w.chain;
        self.put(w);
        self.dispatch_chain(cx, chain, DISPATCH_PER_TICK_MAX);
        result
    }

    /// After an ambiguous answer: out (pending or mined) ⇒ as if accepted; unknown with the
    /// slot free and time left ⇒ the same payload again; else the view decides.
    fn checked(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        w: &mut Withdrawal,
        attempt: u32,
        v: &ChainView,
    ) -> Result<(), Refusal> {
        let out = v.pending || v.payment_mined.is_some() || v.drop_mined.is_some() || v.reverted.is_some();
        if out {
            self.outcome(cx, w, attempt, AttemptOutcome::Submitted, None);
            w.slot_unsent = false;
            return Ok(());
        }
        if v.slot_used_elsewhere {
            // Nothing of it is out and nothing can be: the view fails it.
            w.slot_unsent = false;
            return Ok(());
        }
        if v.expired {
            // Never out and never will be: its slot stays unsent, so failing gives it back.
            return Ok(());
        }
        self.resend(cx, w, attempt);
        Ok(())
    }

    /// Reads a lookup's answer against the current round (see the module docs).
    fn view(&self, w: &Withdrawal, r: &ReceiptsLooked, asked_at_us: u64) -> ChainView {
        let mut v = ChainView::default();
        for a in w.round_attempts() {
            let Some((_, status)) = r.receipts.iter().find(|(h, _)| h == a.tx_hash()) else { continue };
            match status {
                ReceiptStatus::Mined(rc) if rc.success => {
                    let depth =
                        u32::try_from(r.tip_height.saturating_sub(rc.block_height) + 1).unwrap_or(u32::MAX);
                    let slot =
                        if *a.purpose() == Purpose::Drop { &mut v.drop_mined } else { &mut v.payment_mined };
                    *slot = Some((*a.number(), *rc, depth));
                }
                ReceiptStatus::Mined(_) => v.reverted = Some(*a.number()),
                ReceiptStatus::Pending => v.pending = true,
                ReceiptStatus::Unknown => {}
            }
        }
        let mined = v.payment_mined.is_some() || v.drop_mined.is_some() || v.reverted.is_some();
        let ordered = self.chain_of(w).is_some_and(|c| c.family.ordered_slots());
        v.slot_used_elsewhere =
            !mined && ordered && matches!((r.slots_used, w.slot), (Some(used), Some(slot)) if used > slot);
        // Only a lookup sent after the validity passed proves nothing can be mined any more.
        v.expired = !mined && !v.pending && w.chain_validity_expires_at_us.is_some_and(|e| asked_at_us > e);
        v
    }

    fn apply_view(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        w: &mut Withdrawal,
        v: &ChainView,
        tip: u64,
    ) -> Result<(), Refusal> {
        if let Some((n, rc, depth)) = v.payment_mined {
            return self.mined(cx, w, n, rc, depth, tip);
        }
        if let Some(n) = v.reverted {
            self.outcome(cx, w, n, AttemptOutcome::Reverted, None);
            if w.status == Status::Completed {
                return self.reorged_away(cx, w);
            }
            return self.fail(cx, w, Cause::Reverted, Some(AlertKind::Reverted));
        }
        if let Some((n, rc, depth)) = v.drop_mined {
            self.record_block(cx, w, n, rc.block_height, depth, tip);
            return self.drop_confirmed(cx, w, depth);
        }
        if v.slot_used_elsewhere || v.expired {
            if w.status == Status::Completed {
                return self.reorged_away(cx, w);
            }
            let (cause, alert) = if v.expired {
                self.give_back_expired_slot(w);
                (Cause::ValidityPassed, AlertKind::ValidityPassed)
            } else {
                (Cause::SlotUsedElsewhere, AlertKind::SlotUsedElsewhere)
            };
            return self.fail(cx, w, cause, Some(alert));
        }
        self.not_mined(cx, w, v.pending)
    }

    /// A sent transaction whose validity passed unmined left its slot unused: on ordered
    /// chains with validity windows (Tezos, Polkadot) a vault has one slot in flight, so it is
    /// the vault's last and is given back — no gap for the next one.
    fn give_back_expired_slot(&mut self, w: &mut Withdrawal) {
        if w.slot_unsent {
            return; // `fail` gives it back
        }
        let (Some(v), Some(slot)) = (w.vault, w.slot) else { return };
        let ordered = self.chain_of(w).is_some_and(|c| c.family.ordered_slots());
        if let (true, Some(vault)) = (ordered, self.st.vaults.get_mut(&v)) {
            if slot + 1 == vault.next_slot {
                vault.next_slot = slot;
                w.slot = None;
            }
        }
    }

    /// Nothing of it in a block: STALE from BROADCASTING; an unknown transaction sent again.
    fn not_mined(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal, pending: bool) -> Result<(), Refusal> {
        if w.status == Status::Signed {
            // The customer has not sent it (yet); its validity decides.
            return Ok(());
        }
        if w.status == Status::Completed && w.reorg_since_us.is_none() {
            // Not in a block any more, and no reorg was reported: its report was lost.
            w.reorg_since_us = Some(cx.now);
            self.alert(cx, w, AlertKind::MissedWebhook);
        }
        if w.status == Status::Broadcasting {
            self.move_to(cx, w, Status::Stale, Cause::NoReceipt)?;
            self.alert(cx, w, AlertKind::Stale);
        }
        if !pending {
            if let Some(last) = w.round_attempts().last().map(|a| *a.number()) {
                self.resend(cx, w, last);
            }
        }
        Ok(())
    }

    /// Our payment in a block at `depth`: CONFIRMING, COMPLETED at the threshold.
    fn mined(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        w: &mut Withdrawal,
        n: u32,
        rc: Receipt,
        depth: u32,
        tip: u64,
    ) -> Result<(), Refusal> {
        self.record_block(cx, w, n, rc.block_height, depth, tip);
        w.slot_unsent = false;
        match w.status {
            Status::Broadcasting | Status::Signed => {
                let cause = if w.status == Status::Signed { Cause::Included } else { Cause::MissedWebhook };
                self.move_to(cx, w, Status::Confirming, cause)?;
                if cause == Cause::MissedWebhook {
                    self.alert(cx, w, AlertKind::MissedWebhook);
                }
            }
            Status::Stale => self.move_to(cx, w, Status::Confirming, Cause::ReceiptAppeared)?,
            _ => {}
        }
        self.reached_depth(cx, w, depth)
    }

    /// COMPLETED once the chain's threshold is reached (a COMPLETED one back after a reorg:
    /// the question is closed, "it completes again" — its settlement stands).
    fn reached_depth(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal, depth: u32) -> Result<(), Refusal> {
        let threshold = self.chain_of(w).map_or(u32::MAX, |c| c.confirmations);
        if depth < threshold {
            return Ok(());
        }
        match w.status {
            Status::Confirming => self.complete(cx, w, Cause::Threshold),
            Status::Completed => {
                w.reorg_since_us = None;
                w.audited |= depth >= threshold.saturating_mul(2);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Our drop at `depth`: CANCELLED at the threshold (§3.2.1: "only when the drop confirms").
    fn drop_confirmed(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        w: &mut Withdrawal,
        depth: u32,
    ) -> Result<(), Refusal> {
        let threshold = self.chain_of(w).map_or(u32::MAX, |c| c.confirmations);
        w.slot_unsent = false;
        if depth < threshold {
            return Ok(());
        }
        match w.status {
            Status::Broadcasting | Status::Stale => self.cancelled(cx, w, Cause::DropConfirmed),
            // Our payment was in a block, then reorged away, and the drop took the slot.
            Status::Confirming => {
                self.fail(cx, w, Cause::SlotUsedElsewhere, Some(AlertKind::SlotUsedElsewhere))
            }
            Status::Completed => self.reorged_away(cx, w),
            _ => Ok(()),
        }
    }

    /// Records a block holding attempt `n` (once per block and depth), with its outcome.
    fn record_block(
        &mut self,
        cx: &Ctx<'_, '_>,
        w: &mut Withdrawal,
        n: u32,
        height: u64,
        depth: u32,
        tip: u64,
    ) {
        let Some(hash) = w.attempt(n).map(|a| *a.tx_hash()) else { return };
        let known = w
            .confirmations
            .iter()
            .any(|c| c.is_live() && *c.tx_hash() == hash && *c.block_height() == height);
        if !known {
            // A lookup names no block hash; the block is named by its height and the tip seen.
            let block_hash = TxHash::of(height ^ (tip << 32), &hash.0);
            self.confirm_row(cx, w, n, hash, InBlock { hash: block_hash, height, depth });
        }
    }

    /// Appends a confirmation row for attempt `n` in block `b` (its first marks the attempt
    /// mined and the round's others replaced).
    fn confirm_row(&mut self, cx: &Ctx<'_, '_>, w: &mut Withdrawal, n: u32, hash: TxHash, b: InBlock) {
        if w.confirmations.len() >= CONFIRMATIONS_PER_WITHDRAWAL_MAX {
            return;
        }
        if !w.confirmations.iter().any(|c| c.is_live() && *c.tx_hash() == hash) {
            self.outcome(cx, w, n, AttemptOutcome::Mined, None);
            let others: Vec<u32> = w.round_attempts().map(|a| *a.number()).filter(|m| *m != n).collect();
            for m in others {
                self.outcome(cx, w, m, AttemptOutcome::Replaced, None);
            }
        }
        w.confirmations.push(Confirmation::new(
            n,
            hash,
            b.hash,
            b.height,
            b.depth,
            cx.now,
            SetOnce::default(),
        ));
    }

    /// Sends attempt `n`'s signed payload again (harmless: the same transaction).
    pub(crate) fn resend(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal, n: u32) {
        self.st.counters.resends += 1;
        self.outcome(cx, w, n, AttemptOutcome::Resent, None);
        self.ask(cx, w, AwaitKind::Broadcast, n);
    }

    // ----- webhooks -----

    pub(crate) fn on_chain_event(&mut self, cx: &mut Ctx<'_, '_>, e: &ChainEvent) {
        let Some((id, n)) = self.ix.tx_index.get(&e.tx_hash).copied() else {
            self.st.counters.webhooks_foreign += 1;
            return;
        };
        let Some(mut w) = self.take(id) else { return };
        if w.chain != e.chain {
            self.st.counters.webhooks_foreign += 1;
            self.put(w);
            return;
        }
        // Webhooks are news, whatever the withdrawal awaits; a refused move is a late report.
        let _ = match e.event {
            ChainEventKind::Included { block_hash, height } => {
                self.included(cx, &mut w, n, block_hash, height, 1)
            }
            ChainEventKind::Confirmed { block_hash, height, depth, success } => {
                self.confirmed(cx, &mut w, n, block_hash, height, depth, success)
            }
            ChainEventKind::Reorged { height } => {
                self.reorged(cx, &mut w, &e.tx_hash, height);
                Ok(())
            }
        };
        let chain = w.chain;
        self.put(w);
        self.dispatch_chain(cx, chain, DISPATCH_PER_TICK_MAX);
    }

    /// Whether the chain reported this block (and depth) for this hash already.
    fn reported(w: &Withdrawal, hash: &TxHash, block_hash: &TxHash, depth: u32) -> bool {
        w.confirmations.iter().any(|c| {
            c.is_live() && c.tx_hash() == hash && c.block_hash() == block_hash && *c.depth() >= depth
        })
    }

    fn included(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        w: &mut Withdrawal,
        n: u32,
        block_hash: TxHash,
        height: u64,
        depth: u32,
    ) -> Result<(), Refusal> {
        let Some(a) = w.attempt(n).cloned() else { return Ok(()) };
        if *a.round() != w.round {
            // A transaction of an earlier round cannot be mined: its slot was used or expired.
            self.st.counters.webhooks_foreign += 1;
            return Ok(());
        }
        if Self::reported(w, a.tx_hash(), &block_hash, depth) {
            self.st.counters.webhooks_duplicate += 1;
            return Ok(());
        }
        self.confirm_row(cx, w, n, *a.tx_hash(), InBlock { hash: block_hash, height, depth });
        w.slot_unsent = false;
        w.watch_since_us = cx.now;
        if *a.purpose() == Purpose::Drop {
            return Ok(());
        }
        match w.status {
            Status::Broadcasting | Status::Signed => self.move_to(cx, w, Status::Confirming, Cause::Included),
            Status::Stale => self.move_to(cx, w, Status::Confirming, Cause::ReceiptAppeared),
            _ => Ok(()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn confirmed(
        &mut self,
        cx: &mut Ctx<'_, '_>,
        w: &mut Withdrawal,
        n: u32,
        block_hash: TxHash,
        height: u64,
        depth: u32,
        success: bool,
    ) -> Result<(), Refusal> {
        let Some(a) = w.attempt(n).cloned() else { return Ok(()) };
        if Self::reported(w, a.tx_hash(), &block_hash, depth) {
            self.st.counters.webhooks_duplicate += 1;
            return Ok(());
        }
        if !success {
            self.confirm_row(cx, w, n, *a.tx_hash(), InBlock { hash: block_hash, height, depth });
            self.outcome(cx, w, n, AttemptOutcome::Reverted, None);
            return match w.status {
                Status::Completed | Status::Failed | Status::Cancelled => Ok(()),
                _ => self.fail(cx, w, Cause::Reverted, Some(AlertKind::Reverted)),
            };
        }
        self.included(cx, w, n, block_hash, height, depth)?;
        if *a.purpose() == Purpose::Drop {
            return self.drop_confirmed(cx, w, depth);
        }
        self.reached_depth(cx, w, depth)
    }

    /// Blocks from `height` up left the chain: their rows get `reorged_at` (once). A COMPLETED
    /// withdrawal's question opens: it comes back (completes again) or is gone for good.
    fn reorged(&mut self, cx: &Ctx<'_, '_>, w: &mut Withdrawal, hash: &TxHash, height: u64) {
        let marked = w.confirmations.mark_reorged(hash, height, cx.now);
        if marked == 0 {
            self.st.counters.webhooks_duplicate += 1;
            return;
        }
        w.watch_since_us = cx.now;
        if w.status == Status::Completed && w.confirmations.live_depth(hash).is_none() {
            w.reorg_since_us = Some(cx.now);
        }
    }
}
