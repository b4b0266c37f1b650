//! Identifiers. All opaque integers assigned outside the plugin, except [`BatchId`], which the
//! plugin assigns itself (deterministically, in journal order).

use std::fmt;

use crate::wire::{DecodeError, Reader, Wire, Writer};

wire_id!(
    /// `deposits.id`: one confirmed incoming transfer.
    DepositId(u64)
);
wire_id!(
    /// `partners.id`: the business customer owning the wallet.
    PartnerId(u64)
);
wire_id!(
    /// `wallet_addresses.id` of a deposit (HOT) wallet; the chain simulator uses it as the address.
    WalletId(u64)
);
wire_id!(
    /// `blockchain_networks.id`.
    ChainId(u32)
);
wire_id!(
    /// `currencies.id`: a token on a chain.
    TokenId(u32)
);
wire_id!(
    /// `wallet_addresses.id` of a relayer: the account that pays gas and signs sweeps.
    RelayerId(u64)
);
wire_id!(
    /// `collection_batches.id`: assigned by the plugin, 1, 2, 3 ... in journal order.
    BatchId(u64)
);

/// A transaction hash (keccak-256 on a real EVM chain).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TxHash(pub [u8; 32]);

impl fmt::Debug for TxHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("0x")?;
        for b in &self.0[..6] {
            write!(f, "{b:02x}")?;
        }
        f.write_str("…")
    }
}

impl Wire for TxHash {
    const BYTES_MIN: usize = 32;
    fn put(&self, w: &mut Writer<'_>) {
        w.bytes(&self.0);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(TxHash(r.array()?))
    }
}

wire_struct! {
    /// A sweep's unit: one wallet, one token on one chain (one `collection_batches` row at a time).
    #[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
    pub struct GroupKey {
        pub wallet: WalletId,
        pub chain: ChainId,
        pub token: TokenId,
    }
}
