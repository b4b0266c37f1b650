//! The relayer nonce manager (seed 9) and the dispatch of PENDING batches to relayers.
//!
//! * **acquire** — a batch takes the relayer's `next_nonce` (LOCKED); one lock per relayer at a
//!   time, so other batches wait PENDING for a free relayer (FIFO per chain).
//! * **confirm** — the node accepted the transaction: the nonce is used, `next_nonce` moves on.
//! * **release** — only on a *certain* failure (the node refused it): `next_nonce` stays.
//! * An *ambiguous* failure (timeout, "nonce too low") neither confirms nor releases: the lock is
//!   held until a chain check (receipts + mined nonce) says which it was (see `sweep`).
//! * A batch that waits for a relayer longer than `collection.pending_alert_minutes` stays
//!   PENDING, in its place in the queue, and opens a `pending_too_long` alert (see `alert`) that
//!   closes when a relayer takes it. Failing it instead would gain nothing: the next run would
//!   create the same batch again, at the back of the same queue. Only an operator can help —
//!   register a relayer, or resolve the STALE batch that pauses one.
//! * A relayer with a STALE batch, or with a nonce an operator gave up that the chain has not
//!   used yet, gets no new transaction (it would only queue behind the hole).

use crate::alert::{AlertKind, AlertSubject};
use crate::effect::EffectSink;
use crate::plugin::CollectionPlugin;
use crate::state::{AwaitKind, FailReason, NonceLock};
use crate::types::{BatchId, ChainId, RelayerId};

/// What became of a locked nonce.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum NonceFate {
    /// Used by our transaction (accepted, mined, or reverted).
    Used,
    /// Certainly not used: release it.
    Unused,
    /// Used by someone else; the chain has mined this many.
    UsedUpTo(u64),
}

impl CollectionPlugin {
    /// Confirms or releases the batch's lock, if it holds one.
    pub(crate) fn unlock_nonce(&mut self, id: BatchId, fate: NonceFate) {
        let Some(rid) = self.st.batches.get(&id).and_then(|b| b.relayer) else { return };
        let Some(r) = self.st.relayers.get_mut(&rid) else { return };
        let chain = r.chain;
        match (r.lock, fate) {
            (Some(lock), NonceFate::Used) if lock.batch == id => {
                r.next_nonce = r.next_nonce.max(lock.nonce.saturating_add(1));
                r.lock = None;
            }
            (Some(lock), NonceFate::Unused) if lock.batch == id => r.lock = None,
            (Some(lock), NonceFate::UsedUpTo(n)) if lock.batch == id => {
                r.next_nonce = r.next_nonce.max(n);
                r.lock = None;
            }
            // Not locked by this batch: only learn how far the chain is.
            (None, NonceFate::UsedUpTo(n)) => r.next_nonce = r.next_nonce.max(n),
            _ => {}
        }
        if r.lock.is_none() {
            self.mark_maybe_free(chain, rid);
        }
    }

    /// The relayer may be available now (see `CollectionPlugin::maybe_free`).
    pub(crate) fn mark_maybe_free(&mut self, chain: ChainId, id: RelayerId) {
        self.maybe_free.entry(chain).or_default().insert(id);
    }

    /// The lowest-numbered relayer of the chain that may take a transaction now. Candidates
    /// come from `maybe_free` (a superset of the available ones); busy ones found there are
    /// dropped from it until something frees them.
    fn free_relayer(&mut self, chain: ChainId) -> Option<RelayerId> {
        loop {
            let id = *self.maybe_free.get(&chain)?.first()?;
            if self.relayer_available(id) {
                return Some(id);
            }
            if let Some(set) = self.maybe_free.get_mut(&chain) {
                set.remove(&id);
            }
        }
    }

    /// Hands free relayers to waiting batches, oldest batch first, chain by chain.
    pub(crate) fn dispatch_waiting(&mut self, out: &mut EffectSink<'_>) {
        let mut chain = match self.ix.waiting.first() {
            Some((c, _)) => *c,
            None => return,
        };
        loop {
            self.dispatch_chain(chain, out);
            // Next chain with waiting batches.
            let next = ChainId(chain.0.saturating_add(1));
            match self.ix.waiting.range((next, BatchId(0))..).next() {
                Some((c, _)) if chain.0 < u32::MAX => chain = *c,
                _ => return,
            }
        }
    }

    fn dispatch_chain(&mut self, chain: ChainId, out: &mut EffectSink<'_>) {
        if self.ix.chain_relayers.get(&chain).is_none_or(|s| s.is_empty()) {
            self.fail_unservable(chain);
            return;
        }
        loop {
            let Some(&(c, id)) = self.ix.waiting.range((chain, BatchId(0))..).next() else { return };
            if c != chain || !out.has_room(1) {
                return;
            }
            let Some(rid) = self.free_relayer(chain) else { return };
            self.ix.waiting.remove(&(c, id));
            self.acquire(rid, id);
            let gas = self.st.batches.get(&id).map_or(0, |b| b.gas_price_wei);
            self.emit_broadcast(id, AwaitKind::Broadcast, gas, out);
        }
    }

    /// No relayer exists for the chain at all (seed: "No available relayer" → FAILED); the
    /// rows stay QUEUED for the next run.
    fn fail_unservable(&mut self, chain: ChainId) {
        let ids: Vec<BatchId> = self
            .ix
            .waiting
            .range((chain, BatchId(0))..)
            .take_while(|(c, _)| *c == chain)
            .map(|(_, b)| *b)
            .collect();
        for id in ids {
            self.fail_batch(id, FailReason::NoRelayer, NonceFate::Unused);
        }
        // Open until a relayer for the chain registers.
        self.raise(AlertKind::NoRelayer, AlertSubject::Chain(chain), None);
    }

    /// acquire: the batch takes the relayer's next nonce, LOCKED until confirmed or released.
    fn acquire(&mut self, rid: RelayerId, id: BatchId) {
        let Some(r) = self.st.relayers.get_mut(&rid) else { return };
        let nonce = r.next_nonce;
        r.lock = Some(NonceLock { nonce, batch: id });
        if let Some(b) = self.st.batches.get_mut(&id) {
            b.relayer = Some(rid);
            b.nonce = Some(nonce);
        }
        // It no longer waits for a relayer.
        self.close(AlertKind::PendingTooLong, AlertSubject::Batch(id));
    }
}
