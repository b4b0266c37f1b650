//! Whole-state checkpoint, state hash, derived indexes and the invariants between them.
//!
//! Only primary data ([`State`]) is encoded; the lookup indexes ([`Index`]) are rebuilt from it
//! on decode and must then equal what the running plugin maintained incrementally — that
//! comparison *is* the invariant check (`CollectionPlugin::check_invariants`). Decoding checks a
//! checkpoint as thoroughly as encoding wrote it: a state whose indexes cannot be rebuilt
//! consistently is refused.

use std::collections::{BTreeMap, BTreeSet};

use crate::state::*;
use crate::types::*;
pub use crate::wire::CheckpointError;
use crate::wire::{check, hash_checkpoint, read_checkpoint, write_checkpoint, Sink};

/// Checkpoint format version.
/// 2: open alerts, a batch's latest send time.
pub const CHECKPOINT_VERSION: u8 = 2;
const STATE_HASH_SEED: u64 = 0xC011_EC71_0000_0001;

/// Lookup structures derived from [`State`]; never encoded.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Index {
    /// Every wallet seen, with its partner (a wallet belongs to one partner).
    pub wallets: BTreeMap<WalletId, PartnerId>,
    /// QUEUED rows per group, ordered by inclusion height (only non-empty sets are kept).
    pub queued: BTreeMap<GroupKey, BTreeSet<(u64, DepositId)>>,
    /// The one open (PENDING / BROADCASTING / STALE) batch of a group.
    pub open_batch: BTreeMap<GroupKey, BatchId>,
    /// All open batches (the stale monitor walks them).
    pub open: BTreeSet<BatchId>,
    /// Every hash any batch sent.
    pub tx_index: BTreeMap<TxHash, BatchId>,
    /// PENDING batches waiting for a relayer, per chain, oldest first.
    pub waiting: BTreeSet<(ChainId, BatchId)>,
    /// STALE batches and given-up nonces not yet used, per relayer: such a relayer gets no new
    /// transactions.
    pub relayer_paused: BTreeMap<RelayerId, BTreeSet<BatchId>>,
    /// FAILED batches whose given-up nonce the chain has not used yet (`nonce_unsettled`).
    pub watched: BTreeSet<BatchId>,
    /// Their groups: no new batch until the nonce is settled.
    pub fenced: BTreeMap<GroupKey, BatchId>,
    pub chain_relayers: BTreeMap<ChainId, BTreeSet<RelayerId>>,
    /// Groups per balance-read effect in flight.
    pub reads: BTreeMap<u64, BTreeSet<GroupKey>>,
    /// CONFIRMED batches per group by read height: where a deposit confirmed late belongs.
    pub swept: BTreeMap<GroupKey, BTreeSet<(u64, BatchId)>>,
}

impl Index {
    /// Rebuilds every index from primary data, checking the relations they rely on.
    pub fn build(st: &State) -> Result<Index, &'static str> {
        let mut ix = Index::default();
        ix.index_rows(st)?;
        ix.index_groups(st)?;
        ix.index_batches(st)?;
        ix.index_relayers(st)?;
        check_alerts(st)?;
        Ok(ix)
    }

    fn index_rows(&mut self, st: &State) -> Result<(), &'static str> {
        for (id, row) in &st.deposits {
            check(row.deposit == *id, "row key")?;
            check(row.amount_minor > 0, "row amount")?;
            let known = self.wallets.insert(row.key.wallet, row.partner);
            check(known.is_none_or(|p| p == row.partner), "wallet with two partners")?;
            let group = st.groups.get(&row.key).ok_or("row without group")?;
            check(group.partner == row.partner, "group partner")?;
            match row.status {
                RowStatus::Queued => {
                    check(row.collected_at_us.is_none(), "queued row with collection time")?;
                    self.queued.entry(row.key).or_default().insert((row.block_height, *id));
                }
                RowStatus::Collected(b) => {
                    let batch = st.batches.get(&b).ok_or("row collected by unknown batch")?;
                    check(batch.status == BatchStatus::Confirmed, "row collected by unconfirmed batch")?;
                    check(batch.key == row.key, "row collected by another group's batch")?;
                    check(row.block_height <= batch.read_height, "row collected above read height")?;
                    check(batch.deposits.contains(id), "batch does not list its row")?;
                }
            }
        }
        Ok(())
    }

    fn index_groups(&mut self, st: &State) -> Result<(), &'static str> {
        for (key, g) in &st.groups {
            check(st.partners.contains_key(&g.partner), "group of unknown partner")?;
            if let Some(read) = g.read {
                self.reads.entry(read.effect_id).or_default().insert(*key);
            }
        }
        Ok(())
    }

    fn index_batches(&mut self, st: &State) -> Result<(), &'static str> {
        for (id, b) in &st.batches {
            check(b.id == *id && id.0 >= 1 && id.0 <= st.batch_id_last, "batch id")?;
            check(st.groups.contains_key(&b.key), "batch without group")?;
            check_batch_shape(b)?;
            for h in &b.tx_hashes {
                check(self.tx_index.insert(*h, *id).is_none(), "hash sent by two batches")?;
            }
            for d in &b.deposits {
                let row = st.deposits.get(d).ok_or("batch lists unknown deposit")?;
                check(row.status == RowStatus::Collected(*id), "batch lists a row it did not collect")?;
            }
            if b.status == BatchStatus::Confirmed {
                self.swept.entry(b.key).or_default().insert((b.read_height, *id));
            }
            if b.status.is_open() {
                check(self.open_batch.insert(b.key, *id).is_none(), "two open batches in a group")?;
                self.open.insert(*id);
            }
            if b.status == BatchStatus::Pending && b.relayer.is_none() {
                self.waiting.insert((b.key.chain, *id));
            }
            if let (BatchStatus::Stale, Some(r)) = (b.status, b.relayer) {
                self.relayer_paused.entry(r).or_default().insert(*id);
            }
            if b.nonce_unsettled {
                let r = b.relayer.ok_or("given-up nonce without relayer")?;
                self.relayer_paused.entry(r).or_default().insert(*id);
                self.watched.insert(*id);
                check(self.fenced.insert(b.key, *id).is_none(), "two given-up nonces in a group")?;
            }
        }
        Ok(())
    }

    fn index_relayers(&mut self, st: &State) -> Result<(), &'static str> {
        for (id, r) in &st.relayers {
            check(r.id == *id, "relayer key")?;
            self.chain_relayers.entry(r.chain).or_default().insert(*id);
            if let Some(lock) = r.lock {
                let b = st.batches.get(&lock.batch).ok_or("lock of unknown batch")?;
                check(b.status == BatchStatus::Pending, "lock of a batch past PENDING")?;
                check(b.relayer == Some(*id) && b.nonce == Some(lock.nonce), "lock and batch disagree")?;
            }
        }
        // Every PENDING batch holding a relayer holds its lock.
        for b in st.batches.values().filter(|b| b.status == BatchStatus::Pending) {
            if let Some(r) = b.relayer {
                let rel = st.relayers.get(&r).ok_or("batch of unknown relayer")?;
                check(rel.lock.is_some_and(|l| l.batch == b.id), "pending batch without its lock")?;
            }
        }
        Ok(())
    }
}

/// Fields each status requires.
fn check_batch_shape(b: &Batch) -> Result<(), &'static str> {
    check(b.tx_hashes.len() <= crate::limits::BATCH_TX_HASHES_MAX, "too many hashes")?;
    let sent = b.relayer.is_some() && b.nonce.is_some();
    match b.status {
        BatchStatus::Pending => {
            check(b.relayer.is_some() == b.nonce.is_some(), "pending relayer/nonce")?;
            check(b.relayer.is_none() || b.awaiting.is_some(), "pending with relayer awaits nothing")?;
        }
        BatchStatus::Broadcasting | BatchStatus::Stale => {
            check(sent && !b.tx_hashes.is_empty(), "in-flight batch without transaction")?;
            check(b.broadcast_at_us.is_some(), "in-flight batch without broadcast time")?;
            check(b.sent_last_at_us >= b.broadcast_at_us, "in-flight batch sent before its broadcast")?;
        }
        BatchStatus::Confirmed => {
            check(b.receipt.is_some_and(|r| r.success), "confirmed without receipt")?;
            check(b.awaiting.is_none(), "finished batch awaits")?;
        }
        BatchStatus::Failed => {
            check(b.fail_reason.is_some(), "failed without reason")?;
            // Only a given-up nonce is still asked about (lookups, cancellations).
            check(b.awaiting.is_none() || b.nonce_unsettled, "finished batch awaits")?;
        }
    }
    if b.nonce_unsettled {
        check(
            b.status == BatchStatus::Failed && b.fail_reason == Some(FailReason::Operator),
            "unsettled nonce",
        )?;
        check(sent, "unsettled nonce never sent")?;
    }
    Ok(())
}

/// Open alerts: keyed by their own kind and subject, ids unique and issued, conditions that hold.
fn check_alerts(st: &State) -> Result<(), &'static str> {
    use crate::alert::{AlertKind, AlertSubject};
    let mut ids = BTreeSet::new();
    for (key, a) in &st.alerts {
        check(key.kind == a.kind && key.subject == a.subject, "alert key")?;
        check(a.id >= 1 && a.id <= st.alert_id_last && ids.insert(a.id), "alert id")?;
        check(a.kind.is_condition() == a.closes_at_us.is_none(), "alert end")?;
        let batch = match a.subject {
            AlertSubject::Batch(b) => Some(st.batches.get(&b).ok_or("alert about unknown batch")?),
            AlertSubject::Chain(_) => None,
        };
        match (a.kind, batch) {
            (AlertKind::StuckTx, Some(b)) => check(b.status == BatchStatus::Stale, "stuck_tx not STALE")?,
            (AlertKind::PendingTooLong, Some(b)) => check(
                b.status == BatchStatus::Pending && b.relayer.is_none(),
                "pending_too_long not waiting",
            )?,
            (AlertKind::NoRelayer, None) => check(
                !st.relayers.values().any(|r| AlertSubject::Chain(r.chain) == a.subject),
                "no_relayer with a relayer",
            )?,
            (AlertKind::NoRelayer, Some(_)) => return Err("no_relayer about a batch"),
            (_, None) => return Err("batch alert about a chain"),
            _ => {}
        }
    }
    Ok(())
}

/// Writes the checkpoint (version byte, then the state) into any sink.
pub fn write_state(st: &State, sink: &mut dyn Sink) {
    write_checkpoint(CHECKPOINT_VERSION, st, sink);
}

/// Reads a checkpoint and rebuilds its indexes.
pub fn read_state(buf: &[u8]) -> Result<(State, Index), CheckpointError> {
    let st: State = read_checkpoint(CHECKPOINT_VERSION, buf)?;
    let ix = Index::build(&st).map_err(CheckpointError::Inconsistent)?;
    Ok((st, ix))
}

/// Hash of the whole state: the checkpoint's bytes, folded without materialising them.
pub fn hash_state(st: &State) -> u64 {
    hash_checkpoint(STATE_HASH_SEED, CHECKPOINT_VERSION, st)
}
