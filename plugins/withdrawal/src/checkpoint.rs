//! Whole-state checkpoint, state hash, derived indexes and the invariants between them.
//!
//! Only primary data ([`State`]) is encoded; the lookup indexes ([`Index`]) are rebuilt from it
//! on decode and must then equal what the running plugin maintained incrementally — that
//! comparison *is* the invariant check (`WithdrawalPlugin::check_invariants`). Decoding checks a
//! checkpoint as thoroughly as encoding wrote it: rows that break the plugin's rules (money
//! that does not match the status, a hash sent by two withdrawals, two withdrawals signing for
//! one ordered vault at once) are refused.

use std::collections::{BTreeMap, BTreeSet};

use crate::records::Purpose;
use crate::state::*;
use crate::status::Status;
use crate::types::*;
pub use crate::wire::CheckpointError;
use crate::wire::{check, hash_checkpoint, read_checkpoint, write_checkpoint, Sink};

/// Checkpoint format version.
/// 2: open alerts (`State::alerts`), the alert hold setting.
pub const CHECKPOINT_VERSION: u8 = 2;
const STATE_HASH_SEED: u64 = 0x3D1D_4A7A_0000_0001;

/// Lookup structures derived from [`State`]; never encoded.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Index {
    pub by_status: BTreeMap<Status, BTreeSet<WithdrawalId>>,
    /// SUBMITTED, oldest first (intake).
    pub submitted: BTreeSet<WithdrawalId>,
    /// QUEUED per chain, first come first served (by the seq they were queued at).
    pub queued: BTreeSet<(ChainId, u64, WithdrawalId)>,
    /// When each withdrawal's timer is due.
    pub timers: BTreeSet<(u64, WithdrawalId)>,
    /// Every hash any withdrawal signed, with the attempt. Attempts never change, so unlike
    /// the other indexes this one is not taken out and put back with its withdrawal: an
    /// attempt's hash goes in when the attempt is recorded, and out when its withdrawal is
    /// archived.
    pub tx_index: BTreeMap<TxHash, (WithdrawalId, u32)>,
    /// Slots in flight per vault (the chain's in-flight limit).
    pub vault_in_flight: BTreeMap<VaultId, u32>,
    /// Withdrawals between slot and broadcast, per vault (ordered chains: at most one).
    pub vault_unsent: BTreeMap<VaultId, BTreeSet<WithdrawalId>>,
    /// STALE withdrawals per vault: such a vault gets no new transaction.
    pub vault_stale: BTreeMap<VaultId, BTreeSet<WithdrawalId>>,
    /// Withdrawals accepted and not final, per chain (Solana's workspace limit).
    pub chain_open: BTreeMap<ChainId, u32>,
    /// Final withdrawals with nothing open, by when they ended (archiving).
    pub finished: BTreeSet<(u64, WithdrawalId)>,
    pub chain_vaults: BTreeMap<ChainId, BTreeSet<VaultId>>,
}

fn inc<K: Ord>(m: &mut BTreeMap<K, u32>, k: K) {
    *m.entry(k).or_default() += 1;
}

fn dec<K: Ord + Copy>(m: &mut BTreeMap<K, u32>, k: K) {
    if let Some(n) = m.get_mut(&k) {
        *n -= 1;
        if *n == 0 {
            m.remove(&k);
        }
    }
}

fn set_insert<K: Ord, V: Ord>(m: &mut BTreeMap<K, BTreeSet<V>>, k: K, v: V) {
    m.entry(k).or_default().insert(v);
}

fn set_remove<K: Ord + Copy, V: Ord>(m: &mut BTreeMap<K, BTreeSet<V>>, k: K, v: &V) {
    if let Some(s) = m.get_mut(&k) {
        s.remove(v);
        if s.is_empty() {
            m.remove(&k);
        }
    }
}

/// Whether a withdrawal in `status` holds a slot of its vault in flight.
pub(crate) fn holds_slot(w: &Withdrawal, st: &State) -> bool {
    let confirming = st.chains.get(&w.chain).is_some_and(|c| c.family.confirming_in_flight());
    w.vault.is_some()
        && match w.status {
            Status::PendingSignature | Status::Broadcasting | Status::Stale | Status::Signed => true,
            Status::Confirming => confirming,
            _ => false,
        }
}

impl Index {
    /// Adds a withdrawal's entries.
    pub fn add(&mut self, w: &Withdrawal, st: &State) {
        set_insert(&mut self.by_status, w.status, w.id);
        match w.status {
            Status::Submitted => {
                self.submitted.insert(w.id);
            }
            Status::Queued => {
                self.queued.insert((w.chain, w.status_seq, w.id));
            }
            _ => {}
        }
        if let Some(t) = w.timer_us {
            self.timers.insert((t, w.id));
        }
        if let Some(v) = w.vault {
            if holds_slot(w, st) {
                inc(&mut self.vault_in_flight, v);
            }
            if w.slot_unsent {
                set_insert(&mut self.vault_unsent, v, w.id);
            }
            if w.status == Status::Stale {
                set_insert(&mut self.vault_stale, v, w.id);
            }
        }
        if !w.status.is_final() {
            inc(&mut self.chain_open, w.chain);
        }
        if let (true, Some(at)) = (w.is_settled_final(), w.finished_at_us) {
            self.finished.insert((at, w.id));
        }
    }

    /// Removes a withdrawal's entries (exactly what [`Index::add`] added for it).
    pub fn remove(&mut self, w: &Withdrawal, st: &State) {
        set_remove(&mut self.by_status, w.status, &w.id);
        self.submitted.remove(&w.id);
        self.queued.remove(&(w.chain, w.status_seq, w.id));
        if let Some(t) = w.timer_us {
            self.timers.remove(&(t, w.id));
        }
        if let Some(v) = w.vault {
            if holds_slot(w, st) {
                dec(&mut self.vault_in_flight, v);
            }
            if w.slot_unsent {
                set_remove(&mut self.vault_unsent, v, &w.id);
            }
            if w.status == Status::Stale {
                set_remove(&mut self.vault_stale, v, &w.id);
            }
        }
        if !w.status.is_final() {
            dec(&mut self.chain_open, w.chain);
        }
        if let Some(at) = w.finished_at_us {
            self.finished.remove(&(at, w.id));
        }
    }

    /// Rebuilds every index from primary data, checking the relations they rely on.
    pub fn build(st: &State) -> Result<Index, &'static str> {
        let mut ix = Index::default();
        for (id, v) in &st.vaults {
            check(v.params.vault == *id, "vault key")?;
            check(st.chains.contains_key(&v.params.chain), "vault of unknown chain")?;
            ix.chain_vaults.entry(v.params.chain).or_default().insert(*id);
        }
        for (id, a) in &st.assets {
            check(a.asset == *id && st.chains.contains_key(&a.chain), "asset key or chain")?;
        }
        for (id, w) in &st.withdrawals {
            check(w.id == *id, "withdrawal key")?;
            check_withdrawal(w, st)?;
            for a in &w.attempts {
                let again = ix.tx_index.insert(*a.tx_hash(), (w.id, *a.number()));
                check(again.is_none(), "a hash sent by two attempts")?;
            }
            ix.add(w, st);
        }
        for (v, ids) in &ix.vault_unsent {
            let ordered = st
                .vaults
                .get(v)
                .and_then(|v| st.chains.get(&v.params.chain))
                .is_some_and(|c| c.family.ordered_slots());
            check(!ordered || ids.len() <= 1, "two unsent slots on an ordered vault")?;
        }
        crate::alert::check_alerts(st)?;
        Ok(ix)
    }
}

/// The rules one withdrawal's row must follow.
fn check_withdrawal(w: &Withdrawal, st: &State) -> Result<(), &'static str> {
    check(st.chains.contains_key(&w.chain) && st.assets.contains_key(&w.asset), "unknown chain or asset")?;
    check(w.round >= 1 && w.retry_count + 1 == w.round, "round and retries")?;
    check(w.transitions.last().map(|t| *t.to()) == Some(w.status), "status is the last transition's")?;
    check_money(w)?;
    if let Some(v) = w.vault {
        let vault = st.vaults.get(&v).ok_or("withdrawal of unknown vault")?;
        check(vault.params.chain == w.chain, "vault of another chain")?;
        let ordered = st.chains.get(&w.chain).is_some_and(|c| c.family.ordered_slots());
        check(!ordered || w.slot.is_none_or(|s| s < vault.next_slot), "slot at or above the vault's next")?;
    }
    if w.status.on_chain() {
        check(w.vault.is_some() && w.slot.is_some(), "on chain without a slot")?;
        check(w.round_attempts().any(|a| *a.purpose() != Purpose::Drop), "on chain without an attempt")?;
    }
    if w.slot_unsent {
        check(w.vault.is_some(), "unsent slot without a vault")?;
        check(matches!(w.status, Status::PendingSignature | Status::Broadcasting), "unsent slot status")?;
    }
    if w.status == Status::PendingSignature || w.status == Status::Queued {
        check(w.awaiting.is_none_or(|a| a.kind != AwaitKind::Lookup), "lookup before broadcast")?;
    }
    check(w.cancel_completed_at_us.is_set() == (w.status == Status::Cancelled), "cancel time")?;
    check(w.attempts.len() <= crate::limits::ATTEMPTS_MAX, "too many attempts")?;
    check(w.operations.len() <= crate::limits::OPERATIONS_PER_WITHDRAWAL_MAX, "too many operations")?;
    for (i, a) in w.attempts.iter().enumerate() {
        check(*a.number() as usize == i + 1, "attempt numbers")?;
    }
    Ok(())
}

/// Money follows the status: held while anything can still happen, settled when COMPLETED,
/// returned (released or reversed) when it ended otherwise; raw signing moves none.
fn check_money(w: &Withdrawal) -> Result<(), &'static str> {
    if matches!(w.kind, crate::command::RequestKind::Raw(_)) {
        return check(w.money == Money::None, "raw signing with money");
    }
    let ok = match w.status {
        Status::Completed => w.money == Money::Settled,
        Status::Cancelled | Status::Blocked | Status::Rejected => w.money == Money::Released,
        Status::Failed => matches!(w.money, Money::Released | Money::Reversed),
        _ => w.money == Money::Held,
    };
    check(ok, "money does not match the status")
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
