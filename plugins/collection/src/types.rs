//! Identifiers. All opaque integers assigned outside the plugin, except [`BatchId`], which the
//! plugin assigns itself (deterministically, in journal order).

pub use rtgs_chain_sim::types::{ChainId, TokenId, TxHash};

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
    /// `wallet_addresses.id` of a relayer: the account that pays gas and signs sweeps.
    RelayerId(u64)
);
wire_id!(
    /// `collection_batches.id`: assigned by the plugin, 1, 2, 3 ... in journal order.
    BatchId(u64)
);

wire_struct! {
    /// A sweep's unit: one wallet, one token on one chain (one `collection_batches` row at a time).
    #[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
    pub struct GroupKey {
        pub wallet: WalletId,
        pub chain: ChainId,
        pub token: TokenId,
    }
}
