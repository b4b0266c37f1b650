//! What a chain node answers: to a broadcast ([`BroadcastOutcome`]) and to a receipt lookup
//! ([`ReceiptStatus`]). Shared by every chain plugin and simulator: the distinction between a
//! *certain* refusal (nothing is out; a nonce may be reused) and an *ambiguous* one (it may be
//! out; check the chain first) is what keeps a transaction from being sent twice.

use crate::wire::{DecodeError, Reader, Wire, Writer};

code_enum! {
    /// Why a node refused a transaction *certainly* (it is in no mempool).
    pub enum RejectCode {
        InsufficientFunds = 1,
        ReplacementUnderpriced = 2,
        Invalid = 3,
        /// The signature's validity (blockhash, round range, era) has passed.
        Expired = 4,
        /// The sender's mempool or unconfirmed-chain limit is reached (Bitcoin's ancestor
        /// limit, Tezos's one operation per account).
        MempoolLimit = 5,
    }
}

code_enum! {
    /// Why a broadcast's fate is unknown: the transaction may or may not be out.
    pub enum AmbiguousCode {
        /// The RPC timed out (before or after the node accepted it).
        Timeout = 1,
        /// The nonce is used: perhaps by this very transaction, mined already.
        NonceTooLow = 2,
    }
}

/// What the node said to a broadcast.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum BroadcastOutcome {
    /// In the mempool (including "already known": the same signed transaction again).
    Accepted,
    /// Certainly not sent: the nonce may be reused.
    Rejected(RejectCode),
    /// Unknown: the chain must be checked before the nonce is reused.
    Ambiguous(AmbiguousCode),
}

impl Wire for BroadcastOutcome {
    const BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer<'_>) {
        match self {
            BroadcastOutcome::Accepted => w.bytes(&[0]),
            BroadcastOutcome::Rejected(c) => w.bytes(&[1, c.code()]),
            BroadcastOutcome::Ambiguous(c) => w.bytes(&[2, c.code()]),
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.array::<1>()?[0] {
            0 => Ok(BroadcastOutcome::Accepted),
            1 => Ok(BroadcastOutcome::Rejected(RejectCode::get(r)?)),
            2 => Ok(BroadcastOutcome::Ambiguous(AmbiguousCode::get(r)?)),
            _ => Err(DecodeError::Invalid("broadcast outcome")),
        }
    }
}

wire_struct! {
    /// A mined transaction's receipt.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Receipt {
        /// `status = 1`; false is a revert (the nonce is consumed all the same).
        pub success: bool,
        pub block_height: u64,
        pub gas_used: u64,
        pub gas_cost_usd_micros: u64,
    }
}

/// One hash's state in a receipt lookup.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ReceiptStatus {
    /// Neither mined nor in the mempool.
    Unknown,
    /// In the mempool, not mined.
    Pending,
    Mined(Receipt),
}

impl Wire for ReceiptStatus {
    const BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer<'_>) {
        match self {
            ReceiptStatus::Unknown => w.bytes(&[0]),
            ReceiptStatus::Pending => w.bytes(&[1]),
            ReceiptStatus::Mined(rc) => {
                w.bytes(&[2]);
                rc.put(w);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.array::<1>()?[0] {
            0 => Ok(ReceiptStatus::Unknown),
            1 => Ok(ReceiptStatus::Pending),
            2 => Ok(ReceiptStatus::Mined(Receipt::get(r)?)),
            _ => Err(DecodeError::Invalid("receipt status")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{from_slice, to_vec};

    #[test]
    fn answers_round_trip_and_bad_tags_are_errors() {
        let r = Receipt { success: true, block_height: 9, gas_used: 21_000, gas_cost_usd_micros: 5 };
        for s in [ReceiptStatus::Unknown, ReceiptStatus::Pending, ReceiptStatus::Mined(r)] {
            assert_eq!(from_slice::<ReceiptStatus>(&to_vec(&s)), Ok(s));
        }
        for o in [
            BroadcastOutcome::Accepted,
            BroadcastOutcome::Rejected(RejectCode::Expired),
            BroadcastOutcome::Ambiguous(AmbiguousCode::NonceTooLow),
        ] {
            assert_eq!(from_slice::<BroadcastOutcome>(&to_vec(&o)), Ok(o));
        }
        assert!(from_slice::<BroadcastOutcome>(&[3]).is_err());
        assert!(from_slice::<BroadcastOutcome>(&[1, 99]).is_err());
        assert!(from_slice::<ReceiptStatus>(&[7]).is_err());
    }
}
