//! Ledger intents: the closed set of ledger operations a plugin step may return (mission.md
//! §3.4). A plugin never holds the ledger; its step hands a group of intents to
//! [`Ledger::apply_intents`] (through `plugin::Step`), which applies all of them or none and
//! answers with the ISO reason of the first that cannot apply.

use super::{Hold, Ledger};
use crate::entry::{AccountId, PluginKind, RejectReason};

/// A hold's name: the plugin that made it and the plugin's own id (unique among live holds of
/// that plugin). Plugins cannot touch each other's holds: the key's plugin is the caller's.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct HoldKey {
    pub plugin: PluginKind,
    pub id: u64,
}

/// One ledger operation of a plugin step.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum LedgerIntent {
    /// Moves `amount_minor` of `account`'s balance into a new hold `id`.
    Hold { id: u64, account: AccountId, amount_minor: u64 },
    /// Returns hold `id` whole to its account's balance.
    Release { id: u64 },
    /// Pays hold `id` whole to the balance of `to` (same currency, another account).
    Settle { id: u64, to: AccountId },
    /// Moves `amount_minor` from `from`'s balance to `to`'s: a posting to or from a settlement
    /// or suspense account.
    Post { from: AccountId, to: AccountId, amount_minor: u64 },
    /// Reverses an earlier posting from `from` to `to` (named as the original was): moves
    /// `amount_minor` from `to`'s balance back to `from`'s. A posting of its own in statements.
    Reverse { from: AccountId, to: AccountId, amount_minor: u64 },
}

impl LedgerIntent {
    /// Stable bytes for the step digest (the state hash covers every intent applied).
    pub fn digest_words(&self) -> [u64; 4] {
        match *self {
            LedgerIntent::Hold { id, account, amount_minor } => [1, id, account.0, amount_minor],
            LedgerIntent::Release { id } => [2, id, 0, 0],
            LedgerIntent::Settle { id, to } => [3, id, to.0, 0],
            LedgerIntent::Post { from, to, amount_minor } => [4, from.0, to.0, amount_minor],
            LedgerIntent::Reverse { from, to, amount_minor } => [5, from.0, to.0, amount_minor],
        }
    }
}

/// A group of intents that did not apply (none of it did): the first one that could not, and why.
#[derive(Copy, Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("ledger intent {index} refused: {}", reason.iso_code())]
pub struct IntentRejected {
    pub index: usize,
    pub reason: RejectReason,
}

/// How to take back one applied intent when a later one of its group fails.
enum Undo {
    Hold(HoldKey),
    Release(HoldKey, Hold),
    Settle(HoldKey, Hold, usize),
    Move { d: usize, c: usize, amount: u64 },
}

impl Ledger {
    /// Applies a plugin's intents in order, all or none (see the module docs).
    pub fn apply_intents(
        &mut self,
        plugin: PluginKind,
        intents: &[LedgerIntent],
    ) -> Result<(), IntentRejected> {
        let mut undo = Vec::with_capacity(intents.len());
        for (index, intent) in intents.iter().enumerate() {
            match self.apply_intent(plugin, intent) {
                Ok(u) => undo.push(u),
                Err(reason) => {
                    while let Some(u) = undo.pop() {
                        self.undo(u);
                    }
                    return Err(IntentRejected { index, reason });
                }
            }
        }
        Ok(())
    }

    fn apply_intent(&mut self, plugin: PluginKind, intent: &LedgerIntent) -> Result<Undo, RejectReason> {
        match *intent {
            LedgerIntent::Hold { id, account, amount_minor } => {
                let key = HoldKey { plugin, id };
                let i = self.live(account)?;
                if self.holds.contains_key(&key) {
                    return Err(RejectReason::HoldExists);
                }
                if amount_minor == 0 {
                    return Err(RejectReason::ZeroAmount);
                }
                if self.accounts[i].balance_minor < amount_minor {
                    return Err(RejectReason::InsufficientFunds);
                }
                let hold = Hold { account, currency: self.accounts[i].currency, amount_minor };
                self.take_into_hold(key, hold, i);
                Ok(Undo::Hold(key))
            }
            LedgerIntent::Release { id } => {
                let key = HoldKey { plugin, id };
                let hold = self.holds.get(&key).copied().ok_or(RejectReason::UnknownHold)?;
                let i = self.index_of(hold.account);
                self.give_from_hold(key, i);
                Ok(Undo::Release(key, hold))
            }
            LedgerIntent::Settle { id, to } => {
                let key = HoldKey { plugin, id };
                let hold = self.holds.get(&key).copied().ok_or(RejectReason::UnknownHold)?;
                let c = self.live(to)?;
                if to == hold.account {
                    return Err(RejectReason::SameAccount);
                }
                if self.accounts[c].currency != hold.currency {
                    return Err(RejectReason::CurrencyMismatch);
                }
                self.give_from_hold(key, c);
                // The hold left its account: its held sum goes down, not its balance.
                let d = self.index_of(hold.account);
                self.accounts[d].held_minor -= hold.amount_minor;
                self.mark_changed(d);
                Ok(Undo::Settle(key, hold, c))
            }
            LedgerIntent::Post { from, to, amount_minor } => self.post(from, to, amount_minor),
            LedgerIntent::Reverse { from, to, amount_minor } => self.post(to, from, amount_minor),
        }
    }

    fn post(&mut self, from: AccountId, to: AccountId, amount: u64) -> Result<Undo, RejectReason> {
        let d = self.live(from)?;
        let c = self.live(to)?;
        let currency = self.accounts[d].currency;
        self.check_move(d, c, amount, currency)?;
        self.move_balance(d, c, amount);
        Ok(Undo::Move { d, c, amount })
    }

    fn undo(&mut self, u: Undo) {
        match u {
            Undo::Hold(key) => {
                let Some(hold) = self.holds.get(&key).copied() else {
                    unreachable!("undo of a hold that is gone")
                };
                let i = self.index_of(hold.account);
                self.give_from_hold(key, i);
            }
            Undo::Release(key, hold) => {
                let i = self.index_of(hold.account);
                self.take_into_hold(key, hold, i);
            }
            Undo::Settle(key, hold, c) => {
                // Back from the payee into the hold, and onto its account's held sum.
                self.accounts[c].balance_minor -= hold.amount_minor;
                self.mark_changed(c);
                let d = self.index_of(hold.account);
                self.accounts[d].held_minor += hold.amount_minor;
                self.mark_changed(d);
                self.holds.insert(key, hold);
                self.mark_hold_changed(key);
            }
            Undo::Move { d, c, amount } => self.move_balance(c, d, amount),
        }
    }

    /// The balance of account `i` into a new hold (checked by the caller).
    fn take_into_hold(&mut self, key: HoldKey, hold: Hold, i: usize) {
        self.accounts[i].balance_minor -= hold.amount_minor;
        self.accounts[i].held_minor += hold.amount_minor;
        self.mark_changed(i);
        self.holds.insert(key, hold);
        self.mark_hold_changed(key);
    }

    /// Removes a hold and credits its amount to the balance of account `to`; the hold's own
    /// account's held sum goes down only when `to` is that account (a release): a settle does it
    /// itself.
    fn give_from_hold(&mut self, key: HoldKey, to: usize) {
        let Some(hold) = self.holds.remove(&key) else { unreachable!("callers checked the hold") };
        self.mark_hold_changed(key);
        self.accounts[to].balance_minor += hold.amount_minor;
        if self.accounts[to].id == hold.account {
            self.accounts[to].held_minor -= hold.amount_minor;
        }
        self.mark_changed(to);
    }

    /// The index of an account that a live hold names (holds exist only on existing accounts).
    fn index_of(&self, id: AccountId) -> usize {
        match self.index.get(&id) {
            Some(&i) => i as usize,
            None => unreachable!("a hold names account {id:?}, which does not exist"),
        }
    }
}
