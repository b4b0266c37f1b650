//! Read-only operator queries over the plugin's state: STALE batches, QUEUED rows per wallet,
//! skipped groups with their reasons, and the settings with every partner's overrides. Nothing
//! here changes state; the operator endpoints (`rtgs-api`) and `rtgs ops` read through these.

use crate::plugin::CollectionPlugin;
use crate::settings::PartnerState;
use crate::state::{Batch, BatchStatus, Group, QueueRow, Relayer, SkipRecord};
use crate::types::{GroupKey, PartnerId, WalletId};

/// One group's QUEUED rows (one wallet, one token on one chain).
#[derive(Clone, Debug)]
pub struct QueuedGroup<'a> {
    pub key: GroupKey,
    pub partner: PartnerId,
    /// In inclusion-height order.
    pub rows: Vec<&'a QueueRow>,
    /// Σ of the rows' amounts (the sweep itself moves the on-chain balance).
    pub amount_minor: u128,
}

/// A group whose last scheduled run skipped it, and why.
#[derive(Copy, Clone, Debug)]
pub struct SkippedGroup<'a> {
    pub key: GroupKey,
    pub group: &'a Group,
    pub skip: SkipRecord,
    /// Its rows still QUEUED (a skip leaves them QUEUED).
    pub queued_count: usize,
}

impl CollectionPlugin {
    /// Every STALE batch, by id.
    pub fn stale_batches(&self) -> impl Iterator<Item = &Batch> {
        self.st.batches.values().filter(|b| b.status == BatchStatus::Stale)
    }

    /// QUEUED rows grouped by wallet and token, one wallet's only when `wallet` is given.
    pub fn queued_by_group(&self, wallet: Option<WalletId>) -> Vec<QueuedGroup<'_>> {
        let mut out = Vec::new();
        for (key, set) in &self.ix.queued {
            if wallet.is_some_and(|w| w != key.wallet) {
                continue;
            }
            let rows: Vec<&QueueRow> = set.iter().filter_map(|(_, d)| self.st.deposits.get(d)).collect();
            let Some(first) = rows.first() else { continue };
            let amount_minor = rows.iter().fold(0u128, |s, r| s.saturating_add(r.amount_minor));
            out.push(QueuedGroup { key: *key, partner: first.partner, rows, amount_minor });
        }
        out
    }

    /// Groups whose last run was a skip and that still have QUEUED rows, with the reason.
    pub fn skipped_groups(&self) -> Vec<SkippedGroup<'_>> {
        self.st
            .groups
            .iter()
            .filter_map(|(key, group)| {
                let skip = group.last_skip?;
                let queued_count = self.ix.queued.get(key).map_or(0, |s| s.len());
                (queued_count > 0).then_some(SkippedGroup { key: *key, group, skip, queued_count })
            })
            .collect()
    }

    /// Every relayer, by id.
    pub fn relayers(&self) -> impl Iterator<Item = &Relayer> {
        self.st.relayers.values()
    }

    /// Every partner with its own settings state (overrides and next scheduled run).
    pub fn partners(&self) -> impl Iterator<Item = (PartnerId, &PartnerState)> {
        self.st.partners.iter().map(|(id, p)| (*id, p))
    }
}
