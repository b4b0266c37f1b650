//! What the plugin still waits for, re-derived from its state ([`Plugin::pending_effects`]), and
//! its report figures.
//!
//! Every effect that expects an answer leaves its id in the state until the answer is journaled:
//! a group's `read` (balance reads) or a batch's `awaiting` (broadcast, bump, chain check,
//! receipt lookup, cancellation). From those, the effects are rebuilt exactly as emitted — same
//! id, same body — so a new owner re-executing them sends the *same* signed transactions.
//! Alerts are not effects at all: they are open in the state (`crate::alert`), on every center.
//!
//! [`Plugin::pending_effects`]: rtgs_core::plugin::Plugin::pending_effects

use std::collections::BTreeMap;

use rtgs_core::entry::PluginKind;
use rtgs_core::plugin::Effect;

use crate::effect::{CancelTx, CollectionEffect, LookupReceipts, ReadBalances, SweepTx};
use crate::limits::{CANCEL_GAS_LIMIT, SWEEP_GAS_LIMIT};
use crate::plugin::CollectionPlugin;
use crate::state::{AwaitKind, Batch, BatchStatus, RowStatus};
use crate::types::ChainId;

pub(crate) fn pending_effects(p: &CollectionPlugin, out: &mut Vec<Effect>) {
    // Reads: the groups of one effect, in key order (the order they were emitted in).
    let mut reads: BTreeMap<u64, ReadBalances> = BTreeMap::new();
    for (key, g) in &p.st.groups {
        if let Some(r) = g.read {
            reads
                .entry(r.effect_id)
                .or_insert_with(|| ReadBalances { chain: key.chain, groups: Vec::new() })
                .groups
                .push((key.wallet, key.token));
        }
    }
    let mut all: BTreeMap<u64, CollectionEffect> =
        reads.into_iter().map(|(id, r)| (id, CollectionEffect::ReadBalances(r))).collect();
    for b in p.st.batches.values() {
        if let Some((id, e)) = awaited(b) {
            all.insert(id, e);
        }
    }
    for (effect_id, e) in all {
        let (op, body) = e.encode();
        out.push(Effect { plugin: PluginKind::Collection, effect_id, op, body });
    }
}

/// The effect a batch waits on, rebuilt.
fn awaited(b: &Batch) -> Option<(u64, CollectionEffect)> {
    let a = b.awaiting?;
    let (relayer, nonce) = (b.relayer?, b.nonce?);
    let chain: ChainId = b.key.chain;
    let e = match a.kind {
        AwaitKind::Broadcast | AwaitKind::Bump => CollectionEffect::Broadcast(SweepTx {
            batch: b.id,
            chain,
            relayer,
            nonce,
            wallet: b.key.wallet,
            token: b.key.token,
            amount_minor: b.amount_minor,
            gas_price_wei: a.gas_price_wei,
            gas_limit: SWEEP_GAS_LIMIT,
        }),
        AwaitKind::Check | AwaitKind::Lookup => CollectionEffect::LookupReceipts(LookupReceipts {
            batch: b.id,
            chain,
            relayer,
            nonce,
            hashes: b.tx_hashes.clone(),
        }),
        AwaitKind::Cancel => CollectionEffect::Cancel(CancelTx {
            batch: b.id,
            chain,
            relayer,
            nonce,
            gas_price_wei: a.gas_price_wei,
            gas_limit: CANCEL_GAS_LIMIT,
        }),
    };
    Some((a.effect_id, e))
}

pub(crate) fn figures(p: &CollectionPlugin, out: &mut Vec<(&'static str, u64)>) {
    let st = &p.st;
    let (mut queued, mut collected) = (0u64, 0u64);
    for r in st.deposits.values() {
        match r.status {
            RowStatus::Queued => queued += 1,
            RowStatus::Collected(_) => collected += 1,
        }
    }
    let (mut confirmed, mut failed, mut stale, mut pending, mut broadcasting) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut swept_minor: u128 = 0;
    for b in st.batches.values() {
        match b.status {
            BatchStatus::Confirmed => {
                confirmed += 1;
                swept_minor = swept_minor.saturating_add(b.amount_minor);
            }
            BatchStatus::Failed => failed += 1,
            BatchStatus::Stale => stale += 1,
            BatchStatus::Pending => pending += 1,
            BatchStatus::Broadcasting => broadcasting += 1,
        }
    }
    let skips: u64 = st.counters.skipped.values().sum();
    let groups_skipped =
        p.ix.queued
            .keys()
            .filter(|k| !p.ix.open_batch.contains_key(k))
            .filter(|k| st.groups.get(k).is_some_and(|g| g.last_skip.is_some()))
            .count() as u64;
    let rejected: u64 = st.counters.rejected.values().sum();
    out.extend([
        ("collection_deposits", st.deposits.len() as u64),
        ("collection_rows_queued", queued),
        ("collection_rows_collected", collected),
        ("collection_batches", st.batches.len() as u64),
        ("collection_batches_confirmed", confirmed),
        ("collection_batches_failed", failed),
        ("collection_batches_stale", stale),
        ("collection_batches_open", pending + broadcasting),
        ("collection_batches_pending", pending),
        // PENDING without a relayer: waiting for one to be free.
        ("collection_batches_waiting", p.ix.waiting.len() as u64),
        ("collection_batches_broadcasting", broadcasting),
        // Groups with QUEUED rows and no open batch that a run has skipped (the last skip is kept).
        ("collection_groups_skipped", groups_skipped),
        ("collection_swept_minor", u64::try_from(swept_minor).unwrap_or(u64::MAX)),
        ("collection_skips", skips),
        ("collection_commands_rejected", rejected),
        ("collection_results_ignored", st.counters.results_ignored),
        ("collection_alerts_raised", st.counters.alerts_raised.values().sum()),
        ("collection_alerts_open", st.alerts.len() as u64),
    ]);
}
