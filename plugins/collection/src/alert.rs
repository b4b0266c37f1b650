//! Operator alerts, **derived from state**: the plugin state holds the set of open alerts, so
//! every center holds the same set (it is in the checkpoint and the state hash), a failover
//! loses none, and whoever reads them — each node's `/metrics` and status, Prometheus, then
//! Alertmanager — delivers them at least once. Nothing is sent by the plugin: there is no alert
//! effect.
//!
//! An alert is keyed by its kind and subject (at most one open per pair) and carries a stable id
//! (`1, 2, 3 ...` in journal order, the same on every center) and the journal time it opened.
//!
//! * **Conditions** stay open while their condition holds and close when it ends:
//!   `StuckTx` (a batch is STALE: closed when it is CONFIRMED or FAILED), `PendingTooLong` (a
//!   PENDING batch has waited for a relayer longer than `collection.pending_alert_minutes`:
//!   closed when a relayer takes it), `NoRelayer` (a chain's batches failed for want of any
//!   registered relayer: closed when one registers).
//! * **Events** (a missed webhook, a revert, a nonce used elsewhere, a late success, a
//!   conflicting receipt) have no end of their own: they stay open for
//!   `collection.alert_hold_minutes` of journal time, closed by the first `Tick` after that —
//!   long enough for any scrape and rule evaluation to see them.

use crate::plugin::CollectionPlugin;
use crate::types::{BatchId, ChainId, RelayerId, TxHash};
use crate::wire::{DecodeError, Reader, Wire, Writer};

code_enum! {
    /// What an operator alert is about.
    pub enum AlertKind {
        /// A receipt showed success but no webhook came: investigate the monitor.
        MissedWebhook = 1,
        /// No receipt long after the latest broadcast: the batch is STALE and its relayer paused.
        StuckTx = 2,
        /// The sweep reverted; its deposits stay queued.
        Reverted = 3,
        /// The batch's nonce was used by a transaction that is not ours.
        NonceConsumedElsewhere = 4,
        /// A batch already FAILED was mined successfully after all; it is CONFIRMED now.
        LateSuccess = 5,
        /// A revert was reported for a batch already CONFIRMED (a reorg beyond the depth?).
        ConflictingReceipt = 6,
        /// A PENDING batch waits for a relayer (all busy or paused) beyond the bound.
        PendingTooLong = 7,
        /// No relayer is registered for a chain that has something to sweep.
        NoRelayer = 8,
    }
}

impl AlertKind {
    /// The name in series labels and the status (`kind="stuck_tx"`).
    pub fn name(self) -> &'static str {
        match self {
            AlertKind::MissedWebhook => "missed_webhook",
            AlertKind::StuckTx => "stuck_tx",
            AlertKind::Reverted => "reverted",
            AlertKind::NonceConsumedElsewhere => "nonce_consumed_elsewhere",
            AlertKind::LateSuccess => "late_success",
            AlertKind::ConflictingReceipt => "conflicting_receipt",
            AlertKind::PendingTooLong => "pending_too_long",
            AlertKind::NoRelayer => "no_relayer",
        }
    }

    /// Closed when its condition ends (not after the hold time).
    pub fn is_condition(self) -> bool {
        matches!(self, AlertKind::StuckTx | AlertKind::PendingTooLong | AlertKind::NoRelayer)
    }

    /// Every kind's name, in code order.
    pub const NAMES: [&'static str; 8] = [
        "missed_webhook",
        "stuck_tx",
        "reverted",
        "nonce_consumed_elsewhere",
        "late_success",
        "conflicting_receipt",
        "pending_too_long",
        "no_relayer",
    ];
}

/// What an alert is about.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum AlertSubject {
    Batch(BatchId),
    Chain(ChainId),
}

impl std::fmt::Display for AlertSubject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AlertSubject::Batch(b) => write!(f, "batch:{}", b.0),
            AlertSubject::Chain(c) => write!(f, "chain:{}", c.0),
        }
    }
}

impl Wire for AlertSubject {
    const BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer<'_>) {
        match self {
            AlertSubject::Batch(b) => {
                w.bytes(&[1]);
                b.put(w);
            }
            AlertSubject::Chain(c) => {
                w.bytes(&[2]);
                c.put(w);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.array::<1>()?[0] {
            1 => Ok(AlertSubject::Batch(BatchId::get(r)?)),
            2 => Ok(AlertSubject::Chain(ChainId::get(r)?)),
            _ => Err(DecodeError::Invalid("alert subject")),
        }
    }
}

wire_struct! {
    /// At most one alert is open per kind and subject.
    #[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
    pub struct AlertKey {
        pub kind: AlertKind,
        pub subject: AlertSubject,
    }
}

wire_struct! {
    /// One open alert.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct OpenAlert {
        /// Stable: assigned when it opens (1, 2, 3 ... in journal order), the same on every center.
        pub id: u64,
        pub kind: AlertKind,
        pub subject: AlertSubject,
        /// Journal time it opened.
        pub since_us: u64,
        /// Events: the journal time it closes; conditions: none (closed when they end).
        pub closes_at_us: Option<u64>,
        /// The relayer and the latest transaction concerned, when there are.
        pub relayer: Option<RelayerId>,
        pub tx_hash: Option<TxHash>,
    }
}

impl CollectionPlugin {
    /// Opens an alert (a condition that starts, or an event). Already open: a condition stays as
    /// it is; an event is held open for the hold time from now.
    pub(crate) fn raise(&mut self, kind: AlertKind, subject: AlertSubject, hash: Option<TxHash>) {
        let now = self.st.now_us;
        let closes_at_us =
            (!kind.is_condition()).then(|| now.saturating_add(self.st.settings.alert_hold_us()));
        let key = AlertKey { kind, subject };
        if let Some(open) = self.st.alerts.get_mut(&key) {
            open.closes_at_us = closes_at_us;
            return;
        }
        let batch = match subject {
            AlertSubject::Batch(b) => self.st.batches.get(&b),
            AlertSubject::Chain(_) => None,
        };
        let relayer = batch.and_then(|b| b.relayer);
        let tx_hash = hash.or_else(|| batch.and_then(|b| b.tx_hashes.last().copied()));
        self.st.alert_id_last += 1;
        let alert = OpenAlert {
            id: self.st.alert_id_last,
            kind,
            subject,
            since_us: now,
            closes_at_us,
            relayer,
            tx_hash,
        };
        self.st.alerts.insert(key, alert);
        *self.st.counters.alerts_raised.entry(kind).or_default() += 1;
    }

    /// An event about a batch.
    pub(crate) fn raise_event(&mut self, kind: AlertKind, batch: BatchId, hash: Option<TxHash>) {
        self.raise(kind, AlertSubject::Batch(batch), hash);
    }

    /// A condition ended (nothing if it was not open).
    pub(crate) fn close(&mut self, kind: AlertKind, subject: AlertSubject) {
        self.st.alerts.remove(&AlertKey { kind, subject });
    }

    /// On every `Tick`: events past their hold time close; PENDING batches that waited for a
    /// relayer beyond the bound open `PendingTooLong`.
    pub(crate) fn tick_alerts(&mut self) {
        let now = self.st.now_us;
        self.st.alerts.retain(|_, a| a.closes_at_us.is_none_or(|t| now < t));
        let bound_us = self.st.settings.pending_alert_us();
        // Per chain, waiting batches are in id order, which is creation order: the first one
        // not overdue ends that chain's scan (those before it are overdue and already alerted).
        let mut overdue = Vec::new();
        let mut from = self.ix.waiting.first().map(|(c, _)| *c);
        while let Some(chain) = from {
            let mut queue = self.ix.waiting.range((chain, BatchId(0))..).take_while(|(c, _)| *c == chain);
            for &(_, id) in queue.by_ref() {
                let created = self.st.batches.get(&id).map_or(now, |b| b.created_at_us);
                if now.saturating_sub(created) < bound_us {
                    break;
                }
                overdue.push(id);
            }
            let next = chain.0.checked_add(1).map(ChainId);
            from = next.and_then(|n| self.ix.waiting.range((n, BatchId(0))..).next().map(|(c, _)| *c));
        }
        for id in overdue {
            self.raise(AlertKind::PendingTooLong, AlertSubject::Batch(id), None);
        }
    }

    /// The open alerts, by kind and subject.
    pub fn alerts_open(&self) -> impl Iterator<Item = &OpenAlert> {
        self.st.alerts.values()
    }

    /// The open alert of this kind about this subject.
    pub fn alert(&self, kind: AlertKind, subject: AlertSubject) -> Option<&OpenAlert> {
        self.st.alerts.get(&AlertKey { kind, subject })
    }
}
