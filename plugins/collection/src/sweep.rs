//! Balance results, skip rules and the batch lifecycle.
//!
//! ```text
//! PENDING ──accepted──▶ BROADCASTING ──webhook / receipt: success──▶ CONFIRMED
//!    │  └─ambiguous─▶ (chain check) ─pending─▶ BROADCASTING   ├──revert──▶ FAILED
//!    └─certain rejection / nonce used elsewhere ─▶ FAILED      └──no receipt──▶ STALE
//! STALE ──receipt success──▶ CONFIRMED        STALE ──operator──▶ FAILED (nonce cancelled)
//! FAILED (nonce cancelled) ──one of its hashes mined after all──▶ CONFIRMED (alert)
//! ```
//!
//! **The race fix.** The seed marks COLLECTED *every* QUEUED row of the wallet when the webhook
//! arrives, including deposits that landed after the balance was read (their funds were not
//! swept). Here a batch remembers `read_height`, the block at which its balance was read, and on
//! confirmation collects exactly the QUEUED rows included at or below it — also rows whose
//! confirmation reached the journal after the batch was created, whose funds *were* swept. Rows
//! above stay QUEUED, and their funds stay in the wallet for the next run. A group's next read is
//! trusted only at or above the block of its last sweep (`last_sweep_height`), so a balance can
//! never count funds already swept.

use crate::alert::{AlertKind, AlertSubject};
use crate::command::*;
use crate::effect::{CancelTx, CollectionEffect, EffectSink};
use crate::nonce::NonceFate;
use crate::plugin::CollectionPlugin;
use crate::settings::Effective;
use crate::state::*;
use crate::types::*;

/// USD value (micro-USD) of `balance_minor` of a token with `decimals`, priced per whole token.
/// Integer only; precision is shed (never overflow) for absurdly large products.
pub fn usd_micros(balance_minor: u128, price_usd_micros: u64, decimals: u8) -> u128 {
    let scale = 10u128.pow(u32::from(decimals.min(crate::limits::TOKEN_DECIMALS_MAX)));
    let price = u128::from(price_usd_micros);
    let whole = (balance_minor / scale).saturating_mul(price);
    let (mut frac, mut div) = (balance_minor % scale, scale);
    // frac < div, so this ends by div = 1 and frac = 0 at the latest.
    let part = loop {
        if let Some(p) = frac.checked_mul(price) {
            break p / div;
        }
        frac /= 10;
        div /= 10;
    };
    whole.saturating_add(part)
}

/// The skip rules of seed 4-2 step 2, in its order. `None`: sweep.
pub fn skip_reason(
    rules: &Effective,
    row: &BalanceRow,
    balance_usd_micros: u128,
    gas_estimate_usd_micros: u64,
) -> Option<SkipReason> {
    if row.balance_minor == 0 {
        return Some(SkipReason::ZeroBalance);
    }
    if balance_usd_micros < u128::from(rules.min_amount_usd_micros) {
        return Some(SkipReason::BelowMinimum);
    }
    // gas / balance > ratio_ppm / 10^6, without division.
    let gas_scaled = u128::from(gas_estimate_usd_micros) * 1_000_000;
    if gas_scaled > u128::from(rules.gas_threshold_ratio_ppm).saturating_mul(balance_usd_micros) {
        return Some(SkipReason::GasTooHigh);
    }
    if row.allowance_minor < row.balance_minor {
        return Some(SkipReason::ApprovalNotReady);
    }
    None
}

impl CollectionPlugin {
    pub(crate) fn on_balances_read(&mut self, r: &BalancesRead) -> Result<(), RejectKind> {
        if r.rows.iter().any(|row| row.decimals > crate::limits::TOKEN_DECIMALS_MAX) {
            return Err(RejectKind::InvalidResult);
        }
        let mut matched = false;
        for row in &r.rows {
            let key = GroupKey { wallet: row.wallet, chain: r.chain, token: row.token };
            let awaited =
                self.st.groups.get(&key).and_then(|g| g.read).is_some_and(|p| p.effect_id == r.effect_id);
            if awaited {
                self.set_read(key, None);
                self.evaluate(key, r, row);
                matched = true;
            }
        }
        if !matched {
            self.st.counters.results_ignored += 1;
        }
        Ok(())
    }

    /// Skip (recorded, rows stay QUEUED) or create a PENDING batch for the whole balance.
    fn evaluate(&mut self, key: GroupKey, r: &BalancesRead, row: &BalanceRow) {
        if self.ix.open_batch.contains_key(&key) {
            return; // Reads are only sent for groups without an open batch.
        }
        let Some(g) = self.st.groups.get(&key) else { return };
        let rules = self.effective_settings(g.partner);
        let usd = usd_micros(row.balance_minor, row.price_usd_micros, row.decimals);
        let reason = if r.block_height < g.last_sweep_height {
            Some(SkipReason::ReadBelowLastSweep)
        } else {
            skip_reason(&rules, row, usd, r.gas_estimate_usd_micros)
        };
        let skip = SkipRecord {
            at_us: self.st.now_us,
            reason: SkipReason::ZeroBalance,
            balance_minor: row.balance_minor,
            balance_usd_micros: usd,
            gas_estimate_usd_micros: r.gas_estimate_usd_micros,
            block_height: r.block_height,
        };
        match reason {
            Some(reason) => self.record_skip(key, SkipRecord { reason, ..skip }),
            None => self.create_batch(key, r, row, usd),
        }
    }

    pub(crate) fn record_skip(&mut self, key: GroupKey, skip: SkipRecord) {
        if let Some(g) = self.st.groups.get_mut(&key) {
            g.last_skip = Some(skip);
            g.skips_total += 1;
        }
        *self.st.counters.skipped.entry(skip.reason).or_default() += 1;
    }

    fn create_batch(&mut self, key: GroupKey, r: &BalancesRead, row: &BalanceRow, usd: u128) {
        let Some(g) = self.st.groups.get(&key) else { return };
        self.st.batch_id_last += 1;
        let id = BatchId(self.st.batch_id_last);
        let batch = Batch {
            id,
            key,
            partner: g.partner,
            read_height: r.block_height,
            amount_minor: row.balance_minor,
            balance_usd_micros: usd,
            estimated_gas_usd_micros: r.gas_estimate_usd_micros,
            gas_price_wei: r.gas_price_wei,
            status: BatchStatus::Pending,
            relayer: None,
            nonce: None,
            tx_hashes: Vec::new(),
            awaiting: None,
            created_at_us: self.st.now_us,
            broadcast_at_us: None,
            sent_last_at_us: None,
            finished_at_us: None,
            receipt: None,
            fail_reason: None,
            deposits: Vec::new(),
            nonce_unsettled: false,
        };
        self.st.batches.insert(id, batch);
        self.ix.open_batch.insert(key, id);
        self.ix.open.insert(id);
        self.ix.waiting.insert((key.chain, id));
    }

    pub(crate) fn on_balances_read_failed(&mut self, r: &BalancesReadFailed) {
        let keys: Vec<GroupKey> =
            self.ix.reads.get(&r.effect_id).map(|s| s.iter().copied().collect()).unwrap_or_default();
        if keys.is_empty() {
            self.st.counters.results_ignored += 1;
        }
        for key in keys {
            self.set_read(key, None);
            let skip = SkipRecord {
                at_us: self.st.now_us,
                reason: SkipReason::ReadFailed,
                balance_minor: 0,
                balance_usd_micros: 0,
                gas_estimate_usd_micros: 0,
                block_height: 0,
            };
            self.record_skip(key, skip);
        }
    }

    // ----- broadcast results -----

    pub(crate) fn on_broadcast_result(&mut self, r: &BroadcastResult, out: &mut EffectSink<'_>) {
        let awaiting = self.st.batches.get(&r.batch).and_then(|b| b.awaiting);
        match awaiting {
            Some(a) if a.effect_id == r.effect_id && a.kind == AwaitKind::Broadcast => {
                self.on_first_broadcast(r, out)
            }
            Some(a) if a.effect_id == r.effect_id && a.kind == AwaitKind::Bump => {
                self.on_bump_result(r, a, out)
            }
            Some(a) if a.effect_id == r.effect_id && a.kind == AwaitKind::Cancel => {
                self.on_cancel_result(r.batch)
            }
            _ => self.st.counters.results_ignored += 1,
        }
    }

    /// The answer to a batch's own broadcast (its nonce is LOCKED).
    fn on_first_broadcast(&mut self, r: &BroadcastResult, out: &mut EffectSink<'_>) {
        match r.outcome {
            BroadcastOutcome::Accepted => {
                self.record_hash(r.batch, r.tx_hash);
                self.mark_broadcasting(r.batch);
            }
            // Certain: the transaction is nowhere, the nonce can be reused.
            BroadcastOutcome::Rejected(code) => {
                self.fail_batch(r.batch, FailReason::BroadcastRejected(code), NonceFate::Unused)
            }
            // Unknown: keep the nonce LOCKED and ask the chain.
            BroadcastOutcome::Ambiguous(_) => {
                self.record_hash(r.batch, r.tx_hash);
                self.emit_lookup(r.batch, AwaitKind::Check, out);
            }
        }
    }

    /// A replacement's answer. Its nonce is already used (confirmed), so nothing is released.
    /// A replacement that went out restarts the stale age (it may be mined any block now).
    fn on_bump_result(&mut self, r: &BroadcastResult, a: Awaiting, out: &mut EffectSink<'_>) {
        let now = self.st.now_us;
        let Some(b) = self.st.batches.get_mut(&r.batch) else { return };
        b.awaiting = None;
        match r.outcome {
            BroadcastOutcome::Accepted => {
                b.gas_price_wei = b.gas_price_wei.max(a.gas_price_wei);
                b.sent_last_at_us = Some(now);
                self.record_hash(r.batch, r.tx_hash);
            }
            // It may be out (a next bump must beat it), and "nonce too low" may mean one of our
            // hashes is mined: look now rather than at the next stale check.
            BroadcastOutcome::Ambiguous(_) => {
                b.gas_price_wei = b.gas_price_wei.max(a.gas_price_wei);
                b.sent_last_at_us = Some(now);
                self.record_hash(r.batch, r.tx_hash);
                self.emit_lookup(r.batch, AwaitKind::Lookup, out);
            }
            BroadcastOutcome::Rejected(_) => {}
        }
    }

    fn record_hash(&mut self, id: BatchId, hash: TxHash) {
        let Some(b) = self.st.batches.get_mut(&id) else { return };
        if b.tx_hashes.contains(&hash) || b.tx_hashes.len() >= crate::limits::BATCH_TX_HASHES_MAX {
            return;
        }
        // A hash is a signed transaction: it belongs to exactly one batch.
        if self.ix.tx_index.contains_key(&hash) {
            return;
        }
        b.tx_hashes.push(hash);
        self.ix.tx_index.insert(hash, id);
    }

    /// The node has the transaction: the nonce is used (confirmed), the batch is BROADCASTING.
    fn mark_broadcasting(&mut self, id: BatchId) {
        let now = self.st.now_us;
        let Some(b) = self.st.batches.get_mut(&id) else { return };
        b.status = BatchStatus::Broadcasting;
        b.broadcast_at_us = Some(now);
        b.sent_last_at_us = Some(now);
        b.awaiting = None;
        self.unlock_nonce(id, NonceFate::Used);
    }

    // ----- webhooks and receipts -----

    /// Applies kept webhooks whose hash is now recorded (see `State::webhooks_early`).
    pub(crate) fn apply_early_webhooks(&mut self) {
        if self.st.webhooks_early.is_empty() {
            return;
        }
        let (ready, kept): (Vec<TxWebhook>, Vec<TxWebhook>) = std::mem::take(&mut self.st.webhooks_early)
            .into_iter()
            .partition(|w| self.ix.tx_index.contains_key(&w.tx_hash));
        self.st.webhooks_early = kept;
        for w in &ready {
            self.on_webhook(w);
        }
    }

    pub(crate) fn on_webhook(&mut self, w: &TxWebhook) {
        let Some(&id) = self.ix.tx_index.get(&w.tx_hash) else {
            self.st.counters.webhooks_foreign += 1;
            let early = &mut self.st.webhooks_early;
            if !early.contains(w) {
                if early.len() >= crate::limits::EARLY_WEBHOOKS_MAX {
                    early.remove(0);
                }
                early.push(*w);
            }
            return;
        };
        let Some(status) = self.st.batches.get(&id).map(|b| b.status) else { return };
        match (status, w.receipt.success) {
            (BatchStatus::Confirmed, true) => self.st.counters.results_ignored += 1,
            // A given-up nonce used by our own (reverted) transaction: nothing moved.
            (BatchStatus::Failed, false) => self.settle_nonce(id),
            (BatchStatus::Confirmed, false) => {
                self.raise_event(AlertKind::ConflictingReceipt, id, Some(w.tx_hash))
            }
            (_, true) => self.confirm_batch(id, w.receipt, w.tx_hash),
            (_, false) => self.revert_batch(id, w.receipt),
        }
    }

    pub(crate) fn on_receipts(&mut self, r: &ReceiptsLooked, out: &mut EffectSink<'_>) {
        let Some(b) = self.st.batches.get_mut(&r.batch) else {
            self.st.counters.results_ignored += 1;
            return;
        };
        let kind = match b.awaiting {
            Some(a)
                if a.effect_id == r.effect_id && matches!(a.kind, AwaitKind::Check | AwaitKind::Lookup) =>
            {
                a.kind
            }
            _ => {
                self.st.counters.results_ignored += 1;
                return;
            }
        };
        let awaiting = b.awaiting.take();
        let ours = |h: &TxHash| b.tx_hashes.contains(h);
        let mined = r.receipts.iter().find_map(|(h, s)| match s {
            ReceiptStatus::Mined(rc) if ours(h) => Some((*h, *rc)),
            _ => None,
        });
        let pending = r.receipts.iter().any(|(h, s)| ours(h) && *s == ReceiptStatus::Pending);
        let nonce = b.nonce.unwrap_or(u64::MAX);
        if b.status == BatchStatus::Failed {
            self.settle_given_up(r.batch, mined, !pending && r.nonce_mined > nonce, out);
            return;
        }
        match mined {
            Some((hash, rc)) if rc.success => {
                self.confirm_batch(r.batch, rc, hash);
                if kind == AwaitKind::Lookup {
                    self.raise_event(AlertKind::MissedWebhook, r.batch, Some(hash));
                }
            }
            Some((_, rc)) => self.revert_batch(r.batch, rc),
            // The nonce is mined, but by none of our hashes: ours can never be mined.
            None if !pending && r.nonce_mined > nonce => {
                self.fail_batch(
                    r.batch,
                    FailReason::NonceConsumedElsewhere,
                    NonceFate::UsedUpTo(r.nonce_mined),
                );
                self.raise_event(AlertKind::NonceConsumedElsewhere, r.batch, None);
            }
            None => self.on_unresolved(r.batch, kind, pending, awaiting, out),
        }
    }

    /// A lookup found our transaction pending, or nothing while the nonce is unused.
    fn on_unresolved(
        &mut self,
        id: BatchId,
        kind: AwaitKind,
        pending: bool,
        awaiting: Option<Awaiting>,
        out: &mut EffectSink<'_>,
    ) {
        let status = self.st.batches.get(&id).map(|b| b.status);
        match (kind, pending, status) {
            // After an ambiguous broadcast: it is out after all.
            (AwaitKind::Check, true, _) => self.mark_broadcasting(id),
            // It never got out: send the same signed transaction again (same nonce, same hash).
            (AwaitKind::Check, false, _) => {
                let gas = awaiting.map_or(0, |a| a.gas_price_wei);
                self.emit_broadcast(id, AwaitKind::Broadcast, gas, out);
            }
            // No receipt long after the latest send. (A lookup after an ambiguous bump comes
            // sooner: the threshold, from that bump, still decides.)
            (_, _, Some(BatchStatus::Broadcasting)) => {
                let now = self.st.now_us;
                let threshold_us = self.st.settings.stale_threshold_us();
                let sent_us = self.st.batches.get(&id).and_then(|b| b.sent_last_at_us).unwrap_or(now);
                if now.saturating_sub(sent_us) >= threshold_us {
                    self.mark_stale(id);
                }
            }
            _ => {}
        }
    }

    /// STALE: its relayer is paused and `stuck_tx` is open until it is CONFIRMED or FAILED.
    fn mark_stale(&mut self, id: BatchId) {
        let Some(b) = self.st.batches.get_mut(&id) else { return };
        b.status = BatchStatus::Stale;
        if let Some(r) = b.relayer {
            self.ix.relayer_paused.entry(r).or_default().insert(id);
        }
        self.raise(AlertKind::StuckTx, AlertSubject::Batch(id), None);
    }

    /// CONFIRMED: record the gas cost and collect exactly the rows the swept balance contained.
    /// Also from FAILED when a success shows up after all (the chain is the source of truth,
    /// and its funds are gone from the wallet: its rows must not stay QUEUED forever).
    fn confirm_batch(&mut self, id: BatchId, receipt: Receipt, hash: TxHash) {
        let now = self.st.now_us;
        let Some(b) = self.st.batches.get_mut(&id) else { return };
        let prev = b.status;
        b.status = BatchStatus::Confirmed;
        b.receipt = Some(receipt);
        b.finished_at_us = Some(now);
        b.fail_reason = None;
        b.awaiting = None;
        let (key, read_height) = (b.key, b.read_height);
        self.leave_open(id, prev, NonceFate::Used);
        self.ix.swept.entry(key).or_default().insert((read_height, id));
        self.collect_rows(id, key, read_height);
        if let Some(g) = self.st.groups.get_mut(&key) {
            g.last_sweep_height = g.last_sweep_height.max(receipt.block_height);
        }
        if prev == BatchStatus::Failed {
            self.settle_nonce(id);
            self.raise_event(AlertKind::LateSuccess, id, Some(hash));
        }
    }

    /// Every QUEUED row of the group included at or below `read_height` (the race fix).
    fn collect_rows(&mut self, id: BatchId, key: GroupKey, read_height: u64) {
        let now = self.st.now_us;
        let Some(queued) = self.ix.queued.get_mut(&key) else { return };
        let upper = (read_height, DepositId(u64::MAX));
        let rows: Vec<(u64, DepositId)> = queued.range(..=upper).copied().collect();
        for r in &rows {
            queued.remove(r);
        }
        if queued.is_empty() {
            self.ix.queued.remove(&key);
        }
        let mut collected = Vec::with_capacity(rows.len());
        for (_, d) in rows {
            if let Some(row) = self.st.deposits.get_mut(&d) {
                row.status = RowStatus::Collected(id);
                row.collected_at_us = Some(now);
                collected.push(d);
            }
        }
        if let Some(b) = self.st.batches.get_mut(&id) {
            b.deposits.extend(collected);
        }
    }

    /// Mined with status 0: FAILED, rows stay QUEUED, the nonce is consumed (seed 9-1).
    fn revert_batch(&mut self, id: BatchId, receipt: Receipt) {
        if let Some(b) = self.st.batches.get_mut(&id) {
            b.receipt = Some(receipt);
        }
        self.fail_batch(id, FailReason::Reverted, NonceFate::Used);
        self.raise_event(AlertKind::Reverted, id, None);
    }

    /// FAILED: rows stay QUEUED and are retried by the next run.
    pub(crate) fn fail_batch(&mut self, id: BatchId, reason: FailReason, fate: NonceFate) {
        let now = self.st.now_us;
        let Some(b) = self.st.batches.get_mut(&id) else { return };
        let prev = b.status;
        if !prev.is_open() {
            return;
        }
        b.status = BatchStatus::Failed;
        b.fail_reason = Some(reason);
        b.finished_at_us = Some(now);
        b.awaiting = None;
        self.leave_open(id, prev, fate);
    }

    /// Index bookkeeping when a batch leaves PENDING / BROADCASTING / STALE.
    fn leave_open(&mut self, id: BatchId, prev: BatchStatus, fate: NonceFate) {
        let Some(b) = self.st.batches.get(&id) else { return };
        let (key, relayer) = (b.key, b.relayer);
        if self.ix.open_batch.get(&key) == Some(&id) {
            self.ix.open_batch.remove(&key);
        }
        self.ix.open.remove(&id);
        self.ix.waiting.remove(&(key.chain, id));
        if prev == BatchStatus::Stale {
            self.unpause(relayer, id);
        }
        // The batch's conditions end with it.
        self.close(AlertKind::StuckTx, AlertSubject::Batch(id));
        self.close(AlertKind::PendingTooLong, AlertSubject::Batch(id));
        self.unlock_nonce(id, fate);
    }

    fn unpause(&mut self, relayer: Option<RelayerId>, id: BatchId) {
        let Some(r) = relayer else { return };
        if let Some(chain) = self.st.relayers.get(&r).map(|x| x.chain) {
            self.mark_maybe_free(chain, r);
        }
        if let Some(set) = self.ix.relayer_paused.get_mut(&r) {
            set.remove(&id);
            if set.is_empty() {
                self.ix.relayer_paused.remove(&r);
            }
        }
    }

    // ----- given-up nonces -----

    /// After an operator failed a STALE batch: fence its group and pause its relayer until the
    /// chain shows its nonce used. Until then any of its hashes may still be mined, and a new
    /// batch of the group could sweep the same funds again.
    pub(crate) fn hold_nonce(&mut self, id: BatchId) {
        let Some(b) = self.st.batches.get_mut(&id) else { return };
        b.nonce_unsettled = true;
        let (key, relayer) = (b.key, b.relayer);
        self.ix.watched.insert(id);
        self.ix.fenced.insert(key, id);
        if let Some(r) = relayer {
            self.ix.relayer_paused.entry(r).or_default().insert(id);
        }
    }

    /// The chain used the nonce (or our hash was mined): lift the fence and the pause.
    fn settle_nonce(&mut self, id: BatchId) {
        let Some(b) = self.st.batches.get_mut(&id) else { return };
        if !b.nonce_unsettled {
            return;
        }
        b.nonce_unsettled = false;
        b.awaiting = None;
        let (key, relayer) = (b.key, b.relayer);
        self.ix.watched.remove(&id);
        if self.ix.fenced.get(&key) == Some(&id) {
            self.ix.fenced.remove(&key);
        }
        self.unpause(relayer, id);
    }

    /// A zero-value self-transfer with the given-up nonce, 20 % above every price sent for it.
    pub(crate) fn emit_cancel(&mut self, id: BatchId, out: &mut EffectSink<'_>) {
        let now = self.st.now_us;
        let Some(b) = self.st.batches.get_mut(&id) else { return };
        let (Some(relayer), Some(nonce)) = (b.relayer, b.nonce) else { return };
        let gas_price_wei = b.gas_price_wei.saturating_add(b.gas_price_wei / 5).saturating_add(1);
        let cancel = CancelTx {
            batch: id,
            chain: b.key.chain,
            relayer,
            nonce,
            gas_price_wei,
            gas_limit: crate::limits::CANCEL_GAS_LIMIT,
        };
        let effect_id = out.emit(&CollectionEffect::Cancel(cancel));
        // It may be out whatever the answer: the next one must beat it.
        b.gas_price_wei = gas_price_wei;
        b.awaiting = Some(Awaiting { kind: AwaitKind::Cancel, effect_id, since_us: now, gas_price_wei });
    }

    /// Whatever the node said, the next stale check looks at the chain; a refused cancellation
    /// is re-sent from there, higher.
    fn on_cancel_result(&mut self, id: BatchId) {
        if let Some(b) = self.st.batches.get_mut(&id) {
            b.awaiting = None;
        }
    }

    /// A lookup for a given-up nonce.
    fn settle_given_up(
        &mut self,
        id: BatchId,
        mined: Option<(TxHash, Receipt)>,
        used: bool,
        out: &mut EffectSink<'_>,
    ) {
        match mined {
            // The operator was wrong: it was mined after all (CONFIRMED, alert).
            Some((hash, rc)) if rc.success => self.confirm_batch(id, rc, hash),
            // Mined and reverted: no funds moved, the nonce is used.
            Some((_, rc)) => {
                if let Some(b) = self.st.batches.get_mut(&id) {
                    b.receipt = Some(rc);
                }
                self.settle_nonce(id);
            }
            // Used by another transaction (our cancellation): none of ours can be mined.
            None if used => self.settle_nonce(id),
            // Still open: cancel (again, higher).
            None => self.emit_cancel(id, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usd_value_is_exact_for_ordinary_values_and_never_overflows() {
        // 1.8 USDT (6 decimals) at 1.000000 USD.
        assert_eq!(usd_micros(1_800_000, 1_000_000, 6), 1_800_000);
        // 0.5 ETH (18 decimals) at 3,000 USD.
        assert_eq!(usd_micros(500_000_000_000_000_000, 3_000_000_000, 18), 1_500_000_000);
        assert_eq!(usd_micros(0, 1, 18), 0);
        assert_eq!(usd_micros(u128::MAX, u64::MAX, 38), usd_micros(u128::MAX, u64::MAX, 38));
        assert!(usd_micros(u128::MAX, u64::MAX, 0) == u128::MAX);
        assert!(usd_micros(u128::MAX, u64::MAX, 38) > 0);
    }

    #[test]
    fn skip_rules_in_seed_order() {
        let rules = Effective {
            schedule_interval_hours: 1,
            gas_threshold_ratio_ppm: 100_000,
            min_amount_usd_micros: 1_000_000,
        };
        let row = |balance, allowance| BalanceRow {
            wallet: WalletId(1),
            token: TokenId(1),
            balance_minor: balance,
            allowance_minor: allowance,
            price_usd_micros: 1_000_000,
            decimals: 6,
        };
        assert_eq!(skip_reason(&rules, &row(0, 0), 0, 0), Some(SkipReason::ZeroBalance));
        assert_eq!(skip_reason(&rules, &row(999_999, u128::MAX), 999_999, 0), Some(SkipReason::BelowMinimum));
        // 10 % exactly is allowed, above is not.
        assert_eq!(skip_reason(&rules, &row(2_000_000, u128::MAX), 2_000_000, 200_000), None);
        assert_eq!(
            skip_reason(&rules, &row(2_000_000, u128::MAX), 2_000_000, 200_001),
            Some(SkipReason::GasTooHigh)
        );
        assert_eq!(
            skip_reason(&rules, &row(2_000_000, 1_999_999), 2_000_000, 0),
            Some(SkipReason::ApprovalNotReady)
        );
    }
}
