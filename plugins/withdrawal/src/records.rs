//! The append-only records of a withdrawal (seed 001 §4): `broadcast_attempts`, the attempts'
//! outcomes, `confirmations`, `withdrawal_operations`, and the status transitions and vault
//! choices beside them.
//!
//! **Append-only and set-once are types here, not conventions.** A record's fields are private
//! to this module: outside it a record is made whole by `new` and then only read. Logs are
//! [`AppendOnly`]: push and read, no `&mut` to a row, no removal. The one change a row allows
//! is a [`SetOnce`] field — a confirmation's `reorged_at` — through the log's own method, which
//! sets it once or answers [`AlreadySet`]. So a signed payload, a hash, an outcome or an
//! operation cannot be rewritten by any code outside this module, and the tests show the
//! set-once refusals (`tests/it/records.rs`). The compiler refuses the rest:
//!
//! ```compile_fail
//! # use rtgs_withdrawal::records::BroadcastAttempt;
//! # use rtgs_withdrawal::types::TxHash;
//! fn rewrite(a: &mut BroadcastAttempt) {
//!     a.tx_hash = TxHash::default(); // private: set once, by `new`
//! }
//! ```
//!
//! ```compile_fail
//! # use rtgs_withdrawal::records::{AppendOnly, OperationRecord};
//! fn rewrite(log: &mut AppendOnly<OperationRecord>) {
//!     log.get_mut(0); // no mutable access to a row
//! }
//! ```
//!
//! ```compile_fail
//! # use rtgs_withdrawal::records::SetOnce;
//! fn overwrite(s: &mut SetOnce<u64>) {
//!     s.0 = Some(1); // only `set`, which refuses a second value
//! }
//! ```

use crate::operation::{Actor, OpParams, OperationKind, Refusal};
use crate::status::{Cause, Status};
use crate::types::*;
use crate::wire::{DecodeError, Reader, Wire, Writer};

/// A record log that only grows (see the module docs).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct AppendOnly<T>(Vec<T>);

impl<T> Default for AppendOnly<T> {
    fn default() -> Self {
        AppendOnly(Vec::new())
    }
}

impl<T> AppendOnly<T> {
    pub fn push(&mut self, row: T) {
        self.0.push(row);
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }
    pub fn get(&self, i: usize) -> Option<&T> {
        self.0.get(i)
    }
    pub fn last(&self) -> Option<&T> {
        self.0.last()
    }
    pub fn as_slice(&self) -> &[T] {
        &self.0
    }
}

impl<'a, T> IntoIterator for &'a AppendOnly<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<T: Wire> Wire for AppendOnly<T> {
    const BYTES_MIN: usize = 4;
    fn put(&self, w: &mut Writer<'_>) {
        self.0.put(w);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(AppendOnly(Vec::get(r)?))
    }
}

/// A field written at most once: unset, then set for good. Setting it again is an error value,
/// whatever the value.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct SetOnce<T>(Option<T>);

impl<T> Default for SetOnce<T> {
    fn default() -> Self {
        SetOnce(None)
    }
}

/// A set-once field that was already set.
#[derive(Copy, Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("a set-once field is already set")]
pub struct AlreadySet;

impl<T> SetOnce<T> {
    pub fn get(&self) -> Option<&T> {
        self.0.as_ref()
    }
    pub fn is_set(&self) -> bool {
        self.0.is_some()
    }
    pub fn set(&mut self, v: T) -> Result<(), AlreadySet> {
        if self.0.is_some() {
            return Err(AlreadySet);
        }
        self.0 = Some(v);
        Ok(())
    }
}

impl<T: Copy> SetOnce<T> {
    pub fn value(&self) -> Option<T> {
        self.0
    }
}

impl<T: Wire> Wire for SetOnce<T> {
    const BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer<'_>) {
        self.0.put(w);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(SetOnce(Option::get(r)?))
    }
}

/// A record: private fields, a getter each, made whole by `new`, encoded as its fields in order.
macro_rules! record {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        pub struct $name { $($field: $ty),* }

        impl $name {
            #[allow(clippy::too_many_arguments)]
            pub fn new($($field: $ty),*) -> Self {
                $name { $($field),* }
            }
            $($(#[$fm])* pub fn $field(&self) -> &$ty { &self.$field })*
        }

        impl Wire for $name {
            const BYTES_MIN: usize = 0 $(+ <$ty as Wire>::BYTES_MIN)*;
            fn put(&self, w: &mut Writer<'_>) {
                $(Wire::put(&self.$field, w);)*
            }
            fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok($name { $($field: <$ty as Wire>::get(r)?),* })
            }
        }
    };
}

record! {
    /// One status change, with its seq, time and cause.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct TransitionRecord {
        seq: u64,
        at_us: u64,
        /// `None`: the withdrawal was created.
        from: Option<Status>,
        to: Status,
        cause: Cause,
    }
}

code_enum! {
    /// What a signed transaction was for.
    pub enum Purpose {
        /// The payment (a round's first transaction).
        Payment = 1,
        /// The payment again for the same slot at a higher fee.
        Boost = 2,
        /// A zero-value transfer to the vault itself for the same slot (cancel after broadcast).
        Drop = 3,
    }
}

record! {
    /// `broadcast_attempts`: one signed transaction, recorded whole when its signature arrives
    /// — raw payload, signed payload and hash are set once, by construction.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct BroadcastAttempt {
        /// 1, 2, 3 ... over the withdrawal's life (a replacement is +1).
        number: u32,
        /// The round it belongs to (a retry starts a new one, with a new slot).
        round: u32,
        purpose: Purpose,
        vault: VaultId,
        /// The slot it uses (nonce, counter, change position; 0 where slots are not ordered).
        slot: u64,
        fee: u64,
        /// When its signature stops being valid (validity-window chains).
        valid_until_us: Option<u64>,
        /// What was signed (`raw_payload_cbor`).
        raw_payload: Blob,
        /// What is sent (`signed_payload`).
        signed_payload: Blob,
        tx_hash: TxHash,
        /// Where it was sent (`broadcasted_to_node`); `None` for sign-only (the customer sends it).
        sent_to: Option<Text>,
        /// `broadcasted_at` (`None` for sign-only).
        sent_at_us: Option<u64>,
        signed_at_us: u64,
        seq: u64,
    }
}

code_enum! {
    /// An attempt's outcome (§3.2.1: its own append-only record, never an update of the attempt).
    pub enum AttemptOutcome {
        /// A node accepted it (or knew it already).
        Submitted = 1,
        /// A node refused it for certain (the code is recorded).
        Rejected = 2,
        /// Gone from the mempool (its slot unused).
        Dropped = 3,
        /// Another transaction for its slot was mined or replaced it.
        Replaced = 4,
        /// In a block.
        Mined = 5,
        /// Its validity passed before it was mined (or before it was sent: never broadcast).
        Expired = 6,
        /// The node's answer is unknown (a timeout): the chain is asked.
        Ambiguous = 7,
        /// Mined with status 0.
        Reverted = 8,
        /// The same signed payload sent again (after an ambiguous answer, or a reorg).
        Resent = 9,
    }
}

record! {
    /// One outcome of one attempt.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct OutcomeRecord {
        attempt: u32,
        outcome: AttemptOutcome,
        /// A refusal's or an ambiguity's code (`rtgs_chain_sim::answer`), if any.
        detail: Option<u8>,
        at_us: u64,
        seq: u64,
    }
}

record! {
    /// `confirmations`: a block that holds an attempt's transaction, as the chain reported it
    /// (inclusion, then the threshold depth). Only `reorged_at` is ever set later, once.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Confirmation {
        attempt: u32,
        tx_hash: TxHash,
        block_hash: TxHash,
        block_height: u64,
        /// Confirmations it had when reported (1 = just included).
        depth: u32,
        confirmed_at_us: u64,
        reorged_at_us: SetOnce<u64>,
    }
}

impl Confirmation {
    pub fn is_live(&self) -> bool {
        !self.reorged_at_us.is_set()
    }
}

impl AppendOnly<Confirmation> {
    /// Sets `reorged_at` on every live row of `tx_hash` at or above `height` (a reorg took
    /// those blocks); returns how many it set.
    pub fn mark_reorged(&mut self, tx_hash: &TxHash, height: u64, at_us: u64) -> usize {
        let mut n = 0;
        for c in &mut self.0 {
            if c.tx_hash == *tx_hash && c.block_height >= height && c.reorged_at_us.set(at_us).is_ok() {
                n += 1;
            }
        }
        n
    }

    /// Sets `reorged_at` on row `i` — once: a second time is [`AlreadySet`].
    pub fn mark_row_reorged(&mut self, i: usize, at_us: u64) -> Result<(), AlreadySet> {
        match self.0.get_mut(i) {
            Some(c) => c.reorged_at_us.set(at_us),
            None => Ok(()),
        }
    }

    /// The deepest live row of `tx_hash`.
    pub fn live_depth(&self, tx_hash: &TxHash) -> Option<u32> {
        self.0.iter().filter(|c| c.tx_hash == *tx_hash && c.is_live()).map(|c| c.depth).max()
    }
}

record! {
    /// `withdrawal_operations`: one operation asked, with its actor, parameters and answer.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct OperationRecord {
        seq: u64,
        at_us: u64,
        operation: OperationKind,
        actor: Actor,
        parameters: OpParams,
        /// `None`: applied; else refused, with the code.
        refused: Option<Refusal>,
    }
}

code_enum! {
    /// Why the dispatcher passed over a vault.
    pub enum VaultSkip {
        Disabled = 1,
        /// A withdrawal of it is STALE: no new transaction (§3.2.1).
        Stale = 2,
        /// A withdrawal of it is between slot and broadcast (ordered slots: one at a time).
        Signing = 3,
        /// At its chain's in-flight limit (Solana 5, Tezos 1, UTXO's unconfirmed chain ...).
        InFlightLimit = 4,
    }
}

record! {
    /// The dispatcher's choice for one round: the vault, and the ones it passed over (the first
    /// few, with why; all of them counted).
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct VaultChoice {
        round: u32,
        vault: VaultId,
        slot: u64,
        skipped: Vec<(VaultId, VaultSkip)>,
        skipped_total: u32,
        at_us: u64,
    }
}
