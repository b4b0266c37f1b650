//! The ledger: deterministic apply of journal entries to accounts, per center.
//!
//! Same journal prefix ⇒ same accounts, same outcomes, same state hash in every center. Money is
//! `u64` minor units; no floating point anywhere. A rejected transfer is a normal [`Outcome`], not
//! an error. The only way money enters is `AccountFund`; it never leaves (a closed account must be
//! empty and hold nothing).
//!
//! **Holds.** Plugins move money only through [`LedgerIntent`]s (mission.md §3.4), applied by
//! [`Ledger::apply_intents`] in the seq of the plugin step that returned them, all of a group or
//! none. A hold moves an amount from an account's balance into a named hold (`(plugin, id)`), from
//! which it is released back or settled to another account. Holds are ledger state: in the
//! checkpoint, in the stored rows, and — through the plugin host's step digest, which folds every
//! intent applied — in the state hash. **Architecture Invariant: conservation** is
//! `Σ balances + Σ holds = Σ funded` per currency at every seq ([`Ledger::check_conservation`]).
//!
//! Applying seq `n` when the ledger is not at `n - 1` is a programmer error and stops the node.

use crate::entry::*;
use crate::hash::{chain, IntBuild};
use crate::limits::{AMOUNT_MINOR_MAX, LEDGER_DENSE_IDS};
use std::collections::{BTreeMap, HashMap};

mod intents;
pub use intents::{HoldKey, IntentRejected, LedgerIntent};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    pub id: AccountId,
    pub currency: Currency,
    /// Available balance (what transfers may debit): holds are not part of it.
    pub balance_minor: u64,
    /// Σ of the holds on this account (derived from the holds; restored from them).
    pub held_minor: u64,
    pub closed: bool,
}

/// An amount reserved from an account by a plugin (see the module docs).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    pub account: AccountId,
    pub currency: Currency,
    pub amount_minor: u64,
}

/// The result of applying one entry: what a center acks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub seq: Seq,
    pub outcome: Outcome,
    /// The running state hash after this entry.
    pub state_hash: u64,
}

/// Account id → place in `Ledger::accounts`: ids below [`LEDGER_DENSE_IDS`] in an array
/// (`u32::MAX`: none), the others in a hash map. Looked up only by id, never iterated, so the
/// split changes nothing the ledger decides or hashes.
#[derive(Clone, Debug, Default)]
struct AccountIndex {
    dense: Vec<u32>,
    sparse: HashMap<AccountId, u32, IntBuild>,
}

impl AccountIndex {
    #[inline]
    fn get(&self, id: &AccountId) -> Option<&u32> {
        if id.0 < LEDGER_DENSE_IDS {
            self.dense.get(id.0 as usize).filter(|&&i| i != u32::MAX)
        } else {
            self.sparse.get(id)
        }
    }

    fn contains_key(&self, id: &AccountId) -> bool {
        self.get(id).is_some()
    }

    /// Inserts `id → i`; the place it had before, if any.
    fn insert(&mut self, id: AccountId, i: u32) -> Option<u32> {
        if id.0 < LEDGER_DENSE_IDS {
            let at = id.0 as usize;
            if at >= self.dense.len() {
                self.dense.resize(at + 1, u32::MAX);
            }
            let old = std::mem::replace(&mut self.dense[at], i);
            (old != u32::MAX).then_some(old)
        } else {
            self.sparse.insert(id, i)
        }
    }
}

#[derive(Clone, Debug)]
pub struct Ledger {
    accounts: Vec<Account>,
    index: AccountIndex,
    /// Money brought in per currency (sorted by currency; a handful of entries).
    funded: Vec<(Currency, u64)>,
    /// Live holds, in key order (deterministic encoding and hashing).
    holds: BTreeMap<HoldKey, Hold>,
    seq_applied: Seq,
    state_hash: u64,
    /// Timestamp of the last applied entry: the ledger's "now".
    timestamp_us: u64,
    /// Indices of accounts and keys of holds changed since the last `take_changed` (only when
    /// tracking is on: stores that write balances per batch need them; the embedded engine
    /// does not).
    changed: Option<Changed>,
}

#[derive(Clone, Debug, Default)]
struct Changed {
    accounts: Vec<u32>,
    holds: Vec<HoldKey>,
}

/// Equal state; the change-tracking bookkeeping is not state.
impl PartialEq for Ledger {
    fn eq(&self, other: &Self) -> bool {
        self.accounts == other.accounts
            && self.funded == other.funded
            && self.holds == other.holds
            && self.seq_applied == other.seq_applied
            && self.state_hash == other.state_hash
            && self.timestamp_us == other.timestamp_us
    }
}

impl Eq for Ledger {}

impl Default for Ledger {
    fn default() -> Self {
        Self::new()
    }
}

/// Conservation broken: an invariant violation, never an input error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("money not conserved in {currency:?}: balances and holds {balances_minor}, funded {funded_minor}")]
pub struct ConservationError {
    pub currency: Currency,
    pub balances_minor: u128,
    pub funded_minor: u128,
}

/// A checkpoint that does not decode.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ledger checkpoint is malformed")]
pub struct LedgerDecodeError;

/// Changes since the last [`Ledger::take_changed`]: accounts (each once, as they are now), holds
/// (each once: `Some` as it is now, `None` if it no longer exists) and the funded totals.
#[derive(Default, Debug)]
pub struct ChangedRows {
    pub accounts: Vec<Account>,
    pub holds: Vec<(HoldKey, Option<Hold>)>,
}

impl Ledger {
    pub fn new() -> Self {
        Ledger {
            accounts: Vec::new(),
            index: AccountIndex::default(),
            funded: Vec::new(),
            holds: BTreeMap::new(),
            seq_applied: 0,
            state_hash: 0,
            timestamp_us: 0,
            changed: None,
        }
    }

    /// Rebuilds a ledger from stored parts (a database row set, or a decoded checkpoint — the one
    /// place both are checked): unique account ids, currencies of funded totals sorted and
    /// unique, holds (`key, account, amount`) on existing accounts and not empty, money
    /// conserved. The accounts' `held_minor` and the holds' currency are derived (what was
    /// stored for `held_minor` is ignored).
    pub fn restore(
        accounts: Vec<Account>,
        funded: Vec<(Currency, u64)>,
        holds: Vec<(HoldKey, AccountId, u64)>,
        seq_applied: Seq,
        state_hash: u64,
        timestamp_us: u64,
    ) -> Result<Ledger, LedgerDecodeError> {
        let mut l = Ledger::new();
        for w in funded.windows(2) {
            if w[0].0 >= w[1].0 {
                return Err(LedgerDecodeError);
            }
        }
        l.funded = funded;
        for (i, mut a) in accounts.into_iter().enumerate() {
            let i = u32::try_from(i).ok().filter(|&i| i != u32::MAX).ok_or(LedgerDecodeError)?;
            if l.index.insert(a.id, i).is_some() {
                return Err(LedgerDecodeError);
            }
            a.held_minor = 0;
            l.accounts.push(a);
        }
        for (key, account, amount_minor) in holds {
            let &i = l.index.get(&account).ok_or(LedgerDecodeError)?;
            let a = &mut l.accounts[i as usize];
            let held = a.held_minor.checked_add(amount_minor).filter(|h| *h <= AMOUNT_MINOR_MAX);
            if amount_minor == 0 {
                return Err(LedgerDecodeError);
            }
            a.held_minor = held.ok_or(LedgerDecodeError)?;
            let hold = Hold { account, currency: a.currency, amount_minor };
            if l.holds.insert(key, hold).is_some() {
                return Err(LedgerDecodeError);
            }
        }
        l.seq_applied = seq_applied;
        l.state_hash = state_hash;
        l.timestamp_us = timestamp_us;
        l.check_conservation().map_err(|_| LedgerDecodeError)?;
        Ok(l)
    }

    /// Starts (or stops) recording which accounts and holds change, for [`Ledger::take_changed`].
    pub fn track_changes(&mut self, on: bool) {
        self.changed = on.then(Changed::default);
    }

    /// The accounts and holds changed since the last call (each once), and the funded totals.
    pub fn take_changed(&mut self, out: &mut ChangedRows) -> &[(Currency, u64)] {
        if let Some(changed) = self.changed.as_mut() {
            changed.accounts.sort_unstable();
            changed.accounts.dedup();
            out.accounts.extend(changed.accounts.drain(..).map(|i| self.accounts[i as usize].clone()));
            changed.holds.sort_unstable();
            changed.holds.dedup();
            out.holds.extend(changed.holds.drain(..).map(|k| (k, self.holds.get(&k).copied())));
        }
        &self.funded
    }

    fn mark_changed(&mut self, i: usize) {
        if let Some(changed) = self.changed.as_mut() {
            changed.accounts.push(i as u32);
        }
    }

    fn mark_hold_changed(&mut self, key: HoldKey) {
        if let Some(changed) = self.changed.as_mut() {
            changed.holds.push(key);
        }
    }

    pub fn seq_applied(&self) -> Seq {
        self.seq_applied
    }
    pub fn state_hash(&self) -> u64 {
        self.state_hash
    }
    /// Folds a digest of the plugins' step at the entry just applied into the state hash, so
    /// that the applied-ack vouches for plugin state (and the intents it applied) too; returns
    /// the new hash (the ack's).
    pub fn fold(&mut self, digest: u64) -> u64 {
        self.state_hash = crate::hash::fold(self.state_hash, digest);
        self.state_hash
    }
    pub fn timestamp_us(&self) -> u64 {
        self.timestamp_us
    }
    /// A hint, nothing else: `payload` will be applied soon (a transfer's two accounts are
    /// fetched into the cache while the entries before it are applied).
    #[inline]
    pub fn prefetch(&self, payload: &Payload) {
        if let Payload::Transfer(t) = payload {
            for id in [t.debtor, t.creditor] {
                if let Some(&i) = self.index.get(&id) {
                    crate::hint::prefetch(self.accounts.as_ptr().wrapping_add(i as usize));
                }
            }
        }
    }

    pub fn account(&self, id: AccountId) -> Option<&Account> {
        self.index.get(&id).map(|&i| &self.accounts[i as usize])
    }
    pub fn accounts(&self) -> &[Account] {
        &self.accounts
    }
    pub fn hold(&self, key: HoldKey) -> Option<&Hold> {
        self.holds.get(&key)
    }
    /// Every live hold, in key order.
    pub fn holds(&self) -> impl Iterator<Item = (&HoldKey, &Hold)> + '_ {
        self.holds.iter()
    }
    pub fn funded(&self) -> &[(Currency, u64)] {
        &self.funded
    }

    /// Σ balances over all accounts (all currencies), for reports.
    pub fn balance_total_minor(&self) -> u128 {
        self.accounts.iter().map(|a| u128::from(a.balance_minor)).sum()
    }
    /// Σ holds over all accounts (all currencies), for reports.
    pub fn held_total_minor(&self) -> u128 {
        self.accounts.iter().map(|a| u128::from(a.held_minor)).sum()
    }
    /// Σ funded over all currencies.
    pub fn funded_total_minor(&self) -> u128 {
        self.funded.iter().map(|(_, m)| u128::from(*m)).sum()
    }

    /// Applies the next entry. Panics if `entry.seq != seq_applied + 1` (a broken invariant).
    pub fn apply(&mut self, entry: &Entry) -> Applied {
        assert_eq!(
            entry.seq,
            self.seq_applied + 1,
            "ledger at seq {} was handed seq {}",
            self.seq_applied,
            entry.seq
        );
        let outcome = match &entry.payload {
            Payload::Transfer(t) => self.transfer(t),
            Payload::AccountOpen { account, currency } => self.open(*account, *currency),
            Payload::AccountFund { account, amount_minor } => self.fund(*account, *amount_minor),
            Payload::AccountClose { account } => self.close(*account),
            // Ticks and plugin commands change no account themselves; the plugins they reach
            // may, through ledger intents (plugin host), in this same seq.
            Payload::Tick | Payload::Plugin(_) => Ok(()),
        };
        let outcome = match outcome {
            Ok(()) => Outcome::Accepted,
            Err(reason) => Outcome::Rejected(reason),
        };
        self.seq_applied = entry.seq;
        self.timestamp_us = self.timestamp_us.max(entry.timestamp_us);
        self.state_hash = chain(self.state_hash, entry.seq, outcome.code());
        Applied { seq: entry.seq, outcome, state_hash: self.state_hash }
    }

    fn live(&self, id: AccountId) -> Result<usize, RejectReason> {
        let &i = self.index.get(&id).ok_or(RejectReason::UnknownAccount)?;
        if self.accounts[i as usize].closed {
            return Err(RejectReason::ClosedAccount);
        }
        Ok(i as usize)
    }

    /// Checks a movement of `amount` from the balance of `d` to the balance of `c`.
    fn check_move(&self, d: usize, c: usize, amount: u64, currency: Currency) -> Result<(), RejectReason> {
        if d == c {
            return Err(RejectReason::SameAccount);
        }
        if amount == 0 {
            return Err(RejectReason::ZeroAmount);
        }
        if amount > AMOUNT_MINOR_MAX {
            return Err(RejectReason::AmountTooLarge);
        }
        if self.accounts[d].currency != currency || self.accounts[c].currency != currency {
            return Err(RejectReason::CurrencyMismatch);
        }
        if self.accounts[d].balance_minor < amount {
            return Err(RejectReason::InsufficientFunds);
        }
        Ok(())
    }

    fn transfer(&mut self, t: &Transfer) -> Result<(), RejectReason> {
        let d = self.live(t.debtor)?;
        let c = self.live(t.creditor)?;
        self.check_move(d, c, t.amount_minor, t.currency)?;
        self.move_balance(d, c, t.amount_minor);
        Ok(())
    }

    /// Cannot overflow: every balance is part of a funded total that fits `AMOUNT_MINOR_MAX`.
    fn move_balance(&mut self, d: usize, c: usize, amount: u64) {
        self.accounts[d].balance_minor -= amount;
        self.accounts[c].balance_minor += amount;
        self.mark_changed(d);
        self.mark_changed(c);
    }

    fn open(&mut self, id: AccountId, currency: Currency) -> Result<(), RejectReason> {
        if self.index.contains_key(&id) {
            return Err(RejectReason::AccountExists);
        }
        // `u32::MAX` is the index's "none".
        let i = u32::try_from(self.accounts.len())
            .ok()
            .filter(|&i| i != u32::MAX)
            .ok_or(RejectReason::AmountTooLarge)?;
        self.accounts.push(Account { id, currency, balance_minor: 0, held_minor: 0, closed: false });
        self.index.insert(id, i);
        self.mark_changed(i as usize);
        Ok(())
    }

    fn fund(&mut self, id: AccountId, amount_minor: u64) -> Result<(), RejectReason> {
        let i = self.live(id)?;
        if amount_minor == 0 {
            return Err(RejectReason::ZeroAmount);
        }
        let currency = self.accounts[i].currency;
        let pos = match self.funded.binary_search_by_key(&currency, |(c, _)| *c) {
            Ok(p) => p,
            Err(p) => {
                self.funded.insert(p, (currency, 0));
                p
            }
        };
        let total = self.funded[pos].1.checked_add(amount_minor).filter(|t| *t <= AMOUNT_MINOR_MAX);
        let Some(total) = total else {
            return Err(RejectReason::AmountTooLarge);
        };
        self.funded[pos].1 = total;
        self.accounts[i].balance_minor += amount_minor;
        self.mark_changed(i);
        Ok(())
    }

    fn close(&mut self, id: AccountId) -> Result<(), RejectReason> {
        let i = self.live(id)?;
        if self.accounts[i].balance_minor != 0 || self.accounts[i].held_minor != 0 {
            return Err(RejectReason::BalanceNotZero);
        }
        self.accounts[i].closed = true;
        self.mark_changed(i);
        Ok(())
    }

    /// Σ balances + Σ holds = Σ funded, per currency; and each account's `held_minor` is the sum
    /// of its holds.
    pub fn check_conservation(&self) -> Result<(), ConservationError> {
        let mut sums: Vec<(Currency, u128)> = self.funded.iter().map(|(c, _)| (*c, 0)).collect();
        for a in &self.accounts {
            let total = u128::from(a.balance_minor) + u128::from(a.held_minor);
            match sums.binary_search_by_key(&a.currency, |(c, _)| *c) {
                Ok(p) => sums[p].1 += total,
                Err(p) => sums.insert(p, (a.currency, total)),
            }
        }
        for (currency, balances_minor) in &sums {
            let funded_minor =
                self.funded.iter().find(|(c, _)| c == currency).map_or(0, |(_, m)| u128::from(*m));
            if *balances_minor != funded_minor {
                return Err(ConservationError {
                    currency: *currency,
                    balances_minor: *balances_minor,
                    funded_minor,
                });
            }
        }
        let mut held: HashMap<AccountId, u128, IntBuild> = HashMap::default();
        for h in self.holds.values() {
            *held.entry(h.account).or_default() += u128::from(h.amount_minor);
        }
        for a in &self.accounts {
            if held.get(&a.id).copied().unwrap_or(0) != u128::from(a.held_minor) {
                return Err(ConservationError {
                    currency: a.currency,
                    balances_minor: u128::from(a.held_minor),
                    funded_minor: held.get(&a.id).copied().unwrap_or(0),
                });
            }
        }
        Ok(())
    }

    /// Appends a checkpoint of the whole ledger (checked again by [`Ledger::decode`]).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.seq_applied.to_le_bytes());
        out.extend_from_slice(&self.state_hash.to_le_bytes());
        out.extend_from_slice(&self.timestamp_us.to_le_bytes());
        out.extend_from_slice(&(self.funded.len() as u32).to_le_bytes());
        for (c, m) in &self.funded {
            out.extend_from_slice(&c.as_bytes());
            out.extend_from_slice(&m.to_le_bytes());
        }
        out.extend_from_slice(&(self.accounts.len() as u32).to_le_bytes());
        for a in &self.accounts {
            out.extend_from_slice(&a.id.0.to_le_bytes());
            out.extend_from_slice(&a.currency.as_bytes());
            out.extend_from_slice(&a.balance_minor.to_le_bytes());
            out.push(u8::from(a.closed));
        }
        out.extend_from_slice(&(self.holds.len() as u32).to_le_bytes());
        for (k, h) in &self.holds {
            out.push(k.plugin as u8);
            out.extend_from_slice(&k.id.to_le_bytes());
            out.extend_from_slice(&h.account.0.to_le_bytes());
            out.extend_from_slice(&h.amount_minor.to_le_bytes());
        }
    }

    /// Reads back [`Ledger::encode`]; returns the ledger and the bytes used.
    pub fn decode(buf: &[u8]) -> Result<(Ledger, usize), LedgerDecodeError> {
        Self::decode_with(buf, true)
    }

    /// [`Ledger::decode`] of a checkpoint written before holds existed (no holds section).
    pub fn decode_without_holds(buf: &[u8]) -> Result<(Ledger, usize), LedgerDecodeError> {
        Self::decode_with(buf, false)
    }

    fn decode_with(buf: &[u8], with_holds: bool) -> Result<(Ledger, usize), LedgerDecodeError> {
        let mut r = Cursor { buf, at: 0 };
        let seq_applied = r.u64()?;
        let state_hash = r.u64()?;
        let timestamp_us = r.u64()?;
        let n = r.u32()? as usize;
        if n.saturating_mul(11) > buf.len() {
            return Err(LedgerDecodeError);
        }
        let mut funded = Vec::with_capacity(n);
        for _ in 0..n {
            let c = Currency::new(r.take(3)?).map_err(|_| LedgerDecodeError)?;
            funded.push((c, r.u64()?));
        }
        let n = r.u32()? as usize;
        if n.saturating_mul(20) > buf.len() {
            return Err(LedgerDecodeError);
        }
        let mut accounts = Vec::with_capacity(n);
        for _ in 0..n {
            let id = AccountId(r.u64()?);
            let currency = Currency::new(r.take(3)?).map_err(|_| LedgerDecodeError)?;
            let balance_minor = r.u64()?;
            let closed = match r.take(1)?[0] {
                0 => false,
                1 => true,
                _ => return Err(LedgerDecodeError),
            };
            accounts.push(Account { id, currency, balance_minor, held_minor: 0, closed });
        }
        let mut holds = Vec::new();
        if with_holds {
            let n = r.u32()? as usize;
            if n.saturating_mul(25) > buf.len() {
                return Err(LedgerDecodeError);
            }
            for _ in 0..n {
                let plugin = PluginKind::from_u8(r.take(1)?[0]).ok_or(LedgerDecodeError)?;
                let id = r.u64()?;
                let account = AccountId(r.u64()?);
                holds.push((HoldKey { plugin, id }, account, r.u64()?));
            }
        }
        // Checked after reading back, as before writing: the same checks as any restore.
        let ledger = Ledger::restore(accounts, funded, holds, seq_applied, state_hash, timestamp_us)?;
        Ok((ledger, r.at))
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], LedgerDecodeError> {
        let s = self.buf.get(self.at..self.at + n).ok_or(LedgerDecodeError)?;
        self.at += n;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, LedgerDecodeError> {
        let mut a = [0; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, LedgerDecodeError> {
        let mut a = [0; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn eur() -> Currency {
        Currency::new(b"EUR").unwrap_or_else(|_| unreachable!())
    }
    fn usd() -> Currency {
        Currency::new(b"USD").unwrap_or_else(|_| unreachable!())
    }

    struct Feed {
        ledger: Ledger,
        seq: u64,
    }
    impl Feed {
        fn new() -> Self {
            Feed { ledger: Ledger::new(), seq: 0 }
        }
        fn apply(&mut self, payload: Payload) -> Outcome {
            self.seq += 1;
            let e = Entry {
                seq: self.seq,
                epoch: 1,
                timestamp_us: self.seq,
                origin: CenterId(1),
                bmi: Bmi::numbered("L", self.seq).unwrap_or_else(|_| unreachable!()),
                payload,
            };
            self.ledger.apply(&e).outcome
        }
        fn xfer(&mut self, d: u64, c: u64, amount: u64, cur: Currency) -> Outcome {
            self.apply(Payload::Transfer(Transfer {
                debtor: AccountId(d),
                creditor: AccountId(c),
                amount_minor: amount,
                currency: cur,
            }))
        }
    }

    fn rejected(r: RejectReason) -> Outcome {
        Outcome::Rejected(r)
    }

    #[test]
    fn accounts_on_both_sides_of_the_dense_id_bound_are_one_ledger() {
        // Ids in the array (0, 1, the last one below the bound) and in the map (the bound,
        // u64::MAX) behave alike: found, refused twice, unknown when never opened.
        let ids = [0, 1, LEDGER_DENSE_IDS - 1, LEDGER_DENSE_IDS, u64::MAX];
        let mut f = Feed::new();
        for &id in &ids {
            let open = Payload::AccountOpen { account: AccountId(id), currency: eur() };
            assert_eq!(f.apply(open.clone()), Outcome::Accepted, "open {id}");
            assert_eq!(f.apply(open), rejected(RejectReason::AccountExists), "open {id} again");
            assert_eq!(
                f.apply(Payload::AccountFund { account: AccountId(id), amount_minor: 10 }),
                Outcome::Accepted
            );
        }
        for w in ids.windows(2) {
            assert_eq!(f.xfer(w[0], w[1], 10, eur()), Outcome::Accepted, "{} → {}", w[0], w[1]);
        }
        for never in [2, LEDGER_DENSE_IDS - 2, LEDGER_DENSE_IDS + 1] {
            assert_eq!(f.xfer(never, 1, 1, eur()), rejected(RejectReason::UnknownAccount), "{never}");
            assert!(f.ledger.account(AccountId(never)).is_none());
        }
        assert_eq!(f.ledger.account(AccountId(u64::MAX)).map(|a| a.balance_minor), Some(20));
        assert_eq!(f.ledger.account(AccountId(0)).map(|a| a.balance_minor), Some(0));
        // A restored ledger finds them the same way, and refuses an id twice.
        let accounts: Vec<Account> = ids
            .iter()
            .map(|&id| f.ledger.account(AccountId(id)).cloned().unwrap_or_else(|| unreachable!()))
            .collect();
        let funded = vec![(eur(), 50)];
        let r = Ledger::restore(accounts.clone(), funded, vec![], f.seq, f.ledger.state_hash(), f.seq);
        let r = r.unwrap_or_else(|_| panic!("restore"));
        for &id in &ids {
            assert_eq!(r.account(AccountId(id)), f.ledger.account(AccountId(id)));
        }
        let mut twice = accounts;
        twice.push(twice[3].clone());
        let conserved = twice.iter().map(|a| a.balance_minor).sum::<u64>();
        assert!(Ledger::restore(twice, vec![(eur(), conserved)], vec![], f.seq, 0, f.seq).is_err());
    }

    #[test]
    fn every_reject_reason() {
        let mut f = Feed::new();
        assert_eq!(
            f.apply(Payload::AccountOpen { account: AccountId(1), currency: eur() }),
            Outcome::Accepted
        );
        assert_eq!(
            f.apply(Payload::AccountOpen { account: AccountId(1), currency: eur() }),
            rejected(RejectReason::AccountExists)
        );
        f.apply(Payload::AccountOpen { account: AccountId(2), currency: eur() });
        f.apply(Payload::AccountOpen { account: AccountId(3), currency: usd() });
        assert_eq!(
            f.apply(Payload::AccountFund { account: AccountId(1), amount_minor: 100 }),
            Outcome::Accepted
        );
        assert_eq!(f.xfer(1, 9, 1, eur()), rejected(RejectReason::UnknownAccount));
        assert_eq!(f.xfer(9, 1, 1, eur()), rejected(RejectReason::UnknownAccount));
        assert_eq!(f.xfer(1, 1, 1, eur()), rejected(RejectReason::SameAccount));
        assert_eq!(f.xfer(1, 2, 0, eur()), rejected(RejectReason::ZeroAmount));
        assert_eq!(f.xfer(1, 2, u64::MAX, eur()), rejected(RejectReason::AmountTooLarge));
        assert_eq!(f.xfer(1, 3, 1, eur()), rejected(RejectReason::CurrencyMismatch));
        assert_eq!(f.xfer(1, 2, 1, usd()), rejected(RejectReason::CurrencyMismatch));
        assert_eq!(f.xfer(1, 2, 101, eur()), rejected(RejectReason::InsufficientFunds));
        assert_eq!(f.xfer(1, 2, 100, eur()), Outcome::Accepted);
        assert_eq!(
            f.apply(Payload::AccountClose { account: AccountId(2) }),
            rejected(RejectReason::BalanceNotZero)
        );
        assert_eq!(f.apply(Payload::AccountClose { account: AccountId(1) }), Outcome::Accepted);
        assert_eq!(f.xfer(2, 1, 1, eur()), rejected(RejectReason::ClosedAccount));
        assert_eq!(
            f.apply(Payload::AccountFund { account: AccountId(1), amount_minor: 1 }),
            rejected(RejectReason::ClosedAccount)
        );
        assert_eq!(
            f.apply(Payload::AccountFund { account: AccountId(3), amount_minor: AMOUNT_MINOR_MAX }),
            Outcome::Accepted
        );
        assert_eq!(
            f.apply(Payload::AccountFund { account: AccountId(3), amount_minor: 1 }),
            rejected(RejectReason::AmountTooLarge)
        );
        assert_eq!(f.ledger.account(AccountId(2)).map(|a| a.balance_minor), Some(100));
        assert!(f.ledger.check_conservation().is_ok());
    }

    #[test]
    fn tracks_changed_accounts_and_restores_from_parts() {
        let mut f = Feed::new();
        f.ledger.track_changes(true);
        f.apply(Payload::AccountOpen { account: AccountId(1), currency: eur() });
        f.apply(Payload::AccountOpen { account: AccountId(2), currency: eur() });
        f.apply(Payload::AccountFund { account: AccountId(1), amount_minor: 50 });
        let mut changed = ChangedRows::default();
        f.ledger.take_changed(&mut changed);
        assert_eq!(changed.accounts.iter().map(|a| a.id.0).collect::<Vec<_>>(), vec![1, 2]);
        changed = ChangedRows::default();
        f.xfer(1, 2, 20, eur());
        f.xfer(1, 2, 999, eur());
        let hold = LedgerIntent::Hold { id: 7, account: AccountId(2), amount_minor: 5 };
        assert_eq!(f.ledger.apply_intents(PluginKind::Withdrawal, &[hold]), Ok(()));
        let funded = f.ledger.take_changed(&mut changed).to_vec();
        assert_eq!(
            changed.accounts.iter().map(|a| (a.id.0, a.balance_minor, a.held_minor)).collect::<Vec<_>>(),
            vec![(1, 30, 0), (2, 15, 5)]
        );
        let key = HoldKey { plugin: PluginKind::Withdrawal, id: 7 };
        assert_eq!(changed.holds, vec![(key, f.ledger.hold(key).copied())]);
        let all = f.ledger.accounts().to_vec();
        let holds = vec![(key, AccountId(2), 5)];
        let l = &f.ledger;
        let back = Ledger::restore(
            all.clone(),
            funded.clone(),
            holds.clone(),
            l.seq_applied(),
            l.state_hash(),
            l.timestamp_us(),
        );
        assert_eq!(
            back.map(|b| (b.seq_applied(), b.state_hash(), b.accounts().to_vec())),
            Ok((l.seq_applied(), l.state_hash(), all.clone()))
        );
        let mut broken = all.clone();
        broken[0].balance_minor += 1;
        assert_eq!(
            Ledger::restore(broken, funded.clone(), holds, 5, 0, 0).map(|_| ()),
            Err(LedgerDecodeError)
        );
        // Without its hold the money of account 2 is missing: refused too.
        assert_eq!(Ledger::restore(all, funded, Vec::new(), 5, 0, 0).map(|_| ()), Err(LedgerDecodeError));
    }

    /// Every intent, every refusal with its ISO code, all-or-nothing groups, and conservation
    /// with holds counted.
    #[test]
    fn intents_hold_release_settle_post_reverse_all_or_none() {
        let w = PluginKind::Withdrawal;
        let m = PluginKind::Matching;
        let mut f = Feed::new();
        for (a, cur) in [(1, eur()), (2, eur()), (3, usd()), (4, eur())] {
            f.apply(Payload::AccountOpen { account: AccountId(a), currency: cur });
        }
        f.apply(Payload::AccountFund { account: AccountId(1), amount_minor: 100 });
        f.apply(Payload::AccountFund { account: AccountId(3), amount_minor: 10 });
        let l = &mut f.ledger;
        let hold = |id, a, amt| LedgerIntent::Hold { id, account: AccountId(a), amount_minor: amt };
        let rej = |index, reason| Err(IntentRejected { index, reason });
        assert_eq!(l.apply_intents(w, &[hold(1, 1, 30)]), Ok(()));
        assert_eq!(l.account(AccountId(1)).map(|a| (a.balance_minor, a.held_minor)), Some((70, 30)));
        assert!(l.check_conservation().is_ok());
        assert_eq!(l.apply_intents(w, &[hold(1, 1, 1)]), rej(0, RejectReason::HoldExists));
        // The same id under another plugin is another hold.
        assert_eq!(l.apply_intents(m, &[hold(1, 1, 1)]), Ok(()));
        assert_eq!(l.apply_intents(w, &[hold(2, 1, 70)]), rej(0, RejectReason::InsufficientFunds));
        assert_eq!(l.apply_intents(w, &[hold(2, 9, 1)]), rej(0, RejectReason::UnknownAccount));
        assert_eq!(l.apply_intents(w, &[hold(2, 1, 0)]), rej(0, RejectReason::ZeroAmount));
        assert_eq!(l.apply_intents(w, &[LedgerIntent::Release { id: 9 }]), rej(0, RejectReason::UnknownHold));
        let settle = |id, to| LedgerIntent::Settle { id, to: AccountId(to) };
        assert_eq!(l.apply_intents(w, &[settle(1, 3)]), rej(0, RejectReason::CurrencyMismatch));
        assert_eq!(l.apply_intents(w, &[settle(1, 1)]), rej(0, RejectReason::SameAccount));
        // All or none: the hold and the posting before the bad settle are taken back.
        let before = l.clone();
        let group = [
            hold(5, 1, 10),
            LedgerIntent::Post { from: AccountId(1), to: AccountId(4), amount_minor: 5 },
            settle(77, 2),
        ];
        assert_eq!(l.apply_intents(w, &group), rej(2, RejectReason::UnknownHold));
        assert_eq!(*l, before);
        assert_eq!(l.apply_intents(w, &[settle(1, 2)]), Ok(()));
        assert_eq!(l.account(AccountId(1)).map(|a| (a.balance_minor, a.held_minor)), Some((69, 1)));
        assert_eq!(l.account(AccountId(2)).map(|a| a.balance_minor), Some(30));
        assert_eq!(l.apply_intents(m, &[LedgerIntent::Release { id: 1 }]), Ok(()));
        assert_eq!(l.account(AccountId(1)).map(|a| (a.balance_minor, a.held_minor)), Some((70, 0)));
        let post = LedgerIntent::Post { from: AccountId(2), to: AccountId(4), amount_minor: 30 };
        let reverse = LedgerIntent::Reverse { from: AccountId(2), to: AccountId(4), amount_minor: 30 };
        assert_eq!(l.apply_intents(w, &[post]), Ok(()));
        assert_eq!(l.apply_intents(w, &[post]), rej(0, RejectReason::InsufficientFunds));
        assert_eq!(l.apply_intents(w, &[reverse]), Ok(()));
        assert_eq!(l.account(AccountId(2)).map(|a| a.balance_minor), Some(30));
        assert!(l.check_conservation().is_ok());
        // A closed account holds nothing: an account with a hold cannot be closed.
        assert_eq!(l.apply_intents(w, &[hold(8, 2, 30)]), Ok(()));
        assert_eq!(
            f.apply(Payload::AccountClose { account: AccountId(2) }),
            rejected(RejectReason::BalanceNotZero)
        );
        let mut buf = Vec::new();
        f.ledger.encode(&mut buf);
        let (back, used) = Ledger::decode(&buf).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((used, &back), (buf.len(), &f.ledger));
    }

    #[test]
    fn out_of_order_apply_stops_the_node() {
        let mut l = Ledger::new();
        let e = Entry::tick(2, 1, 0, CenterId(1));
        assert!(std::panic::catch_unwind(move || l.apply(&e)).is_err());
    }

    #[test]
    fn corrupt_checkpoint_is_refused() {
        let mut f = Feed::new();
        f.apply(Payload::AccountOpen { account: AccountId(1), currency: eur() });
        f.apply(Payload::AccountFund { account: AccountId(1), amount_minor: 5 });
        let mut buf = Vec::new();
        f.ledger.encode(&mut buf);
        // Change the balance without changing the funded total (the empty holds section, 4
        // bytes, follows the last account).
        let n = buf.len();
        buf[n - 13] ^= 1;
        assert_eq!(Ledger::decode(&buf).map(|_| ()), Err(LedgerDecodeError));
        assert_eq!(Ledger::decode(&buf[..n - 20]).map(|_| ()), Err(LedgerDecodeError));
    }

    proptest! {
        /// Random operations: conservation holds after every step, two ledgers fed the same
        /// journal agree on every outcome and hash, and a checkpoint round-trips exactly.
        #[test]
        fn deterministic_and_conserving(ops in proptest::collection::vec((0u8..6, 0u64..6, 0u64..6, 0u64..300), 1..300)) {
            let mut a = Feed::new();
            let mut b = Feed::new();
            for (kind, x, y, amount) in ops {
                let cur = if x % 4 == 3 { usd() } else { eur() };
                let p = match kind {
                    0 => Payload::AccountOpen { account: AccountId(x), currency: cur },
                    1 => Payload::AccountFund { account: AccountId(x), amount_minor: amount },
                    2 => Payload::AccountClose { account: AccountId(x) },
                    3 => Payload::Tick,
                    _ => Payload::Transfer(Transfer { debtor: AccountId(x), creditor: AccountId(y), amount_minor: amount, currency: cur }),
                };
                let oa = a.apply(p.clone());
                let ob = b.apply(p);
                prop_assert_eq!(oa, ob);
                prop_assert_eq!(a.ledger.state_hash(), b.ledger.state_hash());
                prop_assert!(a.ledger.check_conservation().is_ok());
                prop_assert_eq!(a.ledger.balance_total_minor(), a.ledger.funded_total_minor());
            }
            let mut buf = Vec::new();
            a.ledger.encode(&mut buf);
            let (back, used) = Ledger::decode(&buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(used, buf.len());
            prop_assert_eq!(back, a.ledger);
        }
    }
}
