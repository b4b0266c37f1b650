//! Timers, driven by `Tick` entries only: scheduled batch runs and the stale monitor.
//!
//! **Scheduled runs** (seed 4-2): when a partner's run is due, every group of its wallets with
//! QUEUED rows and no open batch gets its balance read. Reads go out in `ReadBalances` effects of
//! up to [`READ_GROUPS_PER_EFFECT_MAX`] groups of one chain (one multicall at one block); the
//! amount to sweep is decided from that answer, never from the queued amounts.
//!
//! **Stale monitor** (seed 10): every `stale_tx.check_interval_minutes`, each BROADCASTING batch
//! whose latest transaction (its first broadcast or a gas bump) went out more than
//! `stale_tx.threshold_minutes` ago, and each STALE batch (to notice a late receipt), gets
//! a receipt lookup for every hash sent for its nonce; so does each batch whose nonce an operator
//! gave up, until the chain has used that nonce. The same pass re-asks any question whose answer
//! never came (a lost result must not hold a nonce LOCKED forever).
//!
//! **Alerts** (`alert`): every tick closes event alerts past their hold time and opens
//! `pending_too_long` for PENDING batches that waited longer than `collection.pending_alert_minutes`
//! for a relayer.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use crate::effect::{CollectionEffect, EffectSink, LookupReceipts, ReadBalances};
use crate::limits::{READ_GROUPS_PER_EFFECT_MAX, STALE_LOOKUPS_PER_TICK_MAX};
use crate::plugin::CollectionPlugin;
use crate::settings::Effective;
use crate::state::{AwaitKind, Awaiting, BatchStatus, PendingRead};
use crate::types::{BatchId, ChainId, GroupKey, PartnerId};

impl CollectionPlugin {
    pub(crate) fn on_tick(&mut self, out: &mut EffectSink<'_>) {
        self.run_due_schedules(out);
        self.run_stale_monitor(out);
        self.tick_alerts();
    }

    /// Partners whose run is due; their next run moves to the following boundary (missed runs
    /// are not made up: one run reads everything that is queued).
    fn take_due_partners(&mut self) -> BTreeSet<PartnerId> {
        let now = self.st.now_us;
        let global = self.st.settings;
        let mut due = BTreeSet::new();
        for (id, p) in self.st.partners.iter_mut() {
            if p.next_run_us <= now {
                due.insert(*id);
                p.next_run_us = Effective::of(&global, Some(p)).next_boundary_us(now);
            }
        }
        due
    }

    /// `RunNow`: the partner's (or every partner's) run happens in this entry; the next
    /// scheduled run does not move.
    pub(crate) fn run_now(&mut self, partner: Option<PartnerId>, out: &mut EffectSink<'_>) {
        let due: BTreeSet<PartnerId> =
            self.st.partners.keys().copied().filter(|p| partner.is_none_or(|q| q == *p)).collect();
        self.run_for(&due, out);
    }

    fn run_due_schedules(&mut self, out: &mut EffectSink<'_>) {
        let due = self.take_due_partners();
        self.run_for(&due, out);
    }

    fn run_for(&mut self, due: &BTreeSet<PartnerId>, out: &mut EffectSink<'_>) {
        if due.is_empty() {
            return;
        }
        // Groups in key order, per chain: the same on every center.
        let mut per_chain: BTreeMap<ChainId, Vec<GroupKey>> = BTreeMap::new();
        for key in self.ix.queued.keys() {
            // One batch at a time per group, and none while a given-up nonce may still sweep it.
            if self.ix.open_batch.contains_key(key) || self.ix.fenced.contains_key(key) {
                continue;
            }
            if self.st.groups.get(key).is_some_and(|g| due.contains(&g.partner)) {
                per_chain.entry(key.chain).or_default().push(*key);
            }
        }
        for (chain, keys) in per_chain {
            for chunk in keys.chunks(READ_GROUPS_PER_EFFECT_MAX) {
                self.emit_read(chain, chunk, out);
            }
        }
    }

    /// One balance read for a chunk of groups. A read still pending from an earlier run is
    /// superseded (its late answer names an effect no longer awaited and is ignored).
    fn emit_read(&mut self, chain: ChainId, keys: &[GroupKey], out: &mut EffectSink<'_>) {
        if !out.has_room(1) {
            self.st.counters.reads_deferred += keys.len() as u64;
            return;
        }
        let groups = keys.iter().map(|k| (k.wallet, k.token)).collect();
        let effect_id = out.emit(&CollectionEffect::ReadBalances(ReadBalances { chain, groups }));
        let read = PendingRead { effect_id, since_us: self.st.now_us };
        for key in keys {
            self.set_read(*key, Some(read));
        }
    }

    /// Sets or clears a group's pending read, keeping the effect → groups index.
    pub(crate) fn set_read(&mut self, key: GroupKey, read: Option<PendingRead>) {
        let Some(g) = self.st.groups.get_mut(&key) else { return };
        if let Some(old) = g.read {
            if let Some(set) = self.ix.reads.get_mut(&old.effect_id) {
                set.remove(&key);
                if set.is_empty() {
                    self.ix.reads.remove(&old.effect_id);
                }
            }
        }
        g.read = read;
        if let Some(new) = read {
            self.ix.reads.entry(new.effect_id).or_default().insert(key);
        }
    }

    fn run_stale_monitor(&mut self, out: &mut EffectSink<'_>) {
        let now = self.st.now_us;
        let interval_us = self.st.settings.stale_check_interval_us();
        if self.st.stale_check_next_us == 0 {
            // The first tick arms the timer.
            self.st.stale_check_next_us = now.saturating_add(interval_us);
            return;
        }
        if now < self.st.stale_check_next_us {
            return;
        }
        let from = self.st.stale_cursor.map_or(Bound::Unbounded, Bound::Excluded);
        let range = (from, Bound::Unbounded);
        // Open batches and given-up nonces, in id order.
        let mut ids: Vec<BatchId> =
            self.ix.open.range(range).chain(self.ix.watched.range(range)).copied().collect();
        ids.sort_unstable();
        ids.truncate(STALE_LOOKUPS_PER_TICK_MAX);
        for id in &ids {
            if !out.has_room(2) {
                self.st.stale_cursor = Some(*id);
                return;
            }
            self.stale_check_one(*id, out);
        }
        match ids.last() {
            Some(last) if ids.len() == STALE_LOOKUPS_PER_TICK_MAX => self.st.stale_cursor = Some(*last),
            _ => {
                self.st.stale_cursor = None;
                self.st.stale_check_next_us = now.saturating_add(interval_us);
            }
        }
    }

    fn stale_check_one(&mut self, id: BatchId, out: &mut EffectSink<'_>) {
        let now = self.st.now_us;
        let threshold_us = self.st.settings.stale_threshold_us();
        let Some(b) = self.st.batches.get(&id) else { return };
        let expired = b.awaiting.map(|a| now.saturating_sub(a.since_us) >= threshold_us);
        match (b.status, b.awaiting, expired) {
            // Waiting for a relayer, or for an answer that may still come.
            (_, _, Some(false)) | (BatchStatus::Pending, None, _) => {}
            // A broadcast or chain check that never got its answer: ask again. Re-sending the
            // same signed transaction is harmless.
            (BatchStatus::Pending, Some(a), Some(true)) => match a.kind {
                AwaitKind::Broadcast => self.emit_broadcast(id, AwaitKind::Broadcast, a.gas_price_wei, out),
                _ => self.emit_lookup(id, AwaitKind::Check, out),
            },
            // The age counts from the latest send: a gas bump starts it again.
            (BatchStatus::Broadcasting, _, _) => {
                let age = b.sent_last_at_us.map_or(0, |t| now.saturating_sub(t));
                if age >= threshold_us {
                    self.emit_lookup(id, AwaitKind::Lookup, out);
                }
            }
            (BatchStatus::Stale, _, _) => self.emit_lookup(id, AwaitKind::Lookup, out),
            // A given-up nonce: has the chain used it yet?
            (BatchStatus::Failed, _, _) if b.nonce_unsettled => self.emit_lookup(id, AwaitKind::Lookup, out),
            _ => {}
        }
    }

    /// Asks for the receipt of every hash the batch sent for its nonce.
    pub(crate) fn emit_lookup(&mut self, id: BatchId, kind: AwaitKind, out: &mut EffectSink<'_>) {
        let now = self.st.now_us;
        let Some(b) = self.st.batches.get_mut(&id) else { return };
        let (Some(relayer), Some(nonce)) = (b.relayer, b.nonce) else { return };
        let lookup =
            LookupReceipts { batch: id, chain: b.key.chain, relayer, nonce, hashes: b.tx_hashes.clone() };
        let effect_id = out.emit(&CollectionEffect::LookupReceipts(lookup));
        let gas_price_wei = b.awaiting.map_or(b.gas_price_wei, |a| a.gas_price_wei);
        b.awaiting = Some(Awaiting { kind, effect_id, since_us: now, gas_price_wei });
    }
}
