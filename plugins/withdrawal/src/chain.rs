//! Chains: the families the seed names, what each one's rules are, and the parameters a chain is
//! registered with (a journaled operator command, so every center applies the same rules).
//!
//! | family    | ordered slots           | replacement               | in flight per vault        | validity window |
//! |-----------|-------------------------|---------------------------|----------------------------|-----------------|
//! | EVM       | nonce (a stuck one blocks the later ones) | same nonce, fee ≥ +10 % | configurable | none |
//! | UTXO      | unconfirmed change chain | full RBF: fee rate + 1 sat/vB | 25 unconfirmed by default (≤ 64) | none |
//! | Solana    | none                    | none                      | 5 (the 6th waits QUEUED); 600 per workspace | recent blockhash (~90 s) |
//! | Algorand  | none                    | none                      | configurable               | ~50 min (1,000 rounds) |
//! | Tezos     | counter                 | none                      | 1 (one operation per account in the mempool) | ~30 min |
//! | Polkadot  | nonce                   | none                      | 1 (an expired nonce must be the vault's last) | 2 h (mortal era) |
//!
//! "In flight" counts what holds a vault's slot: the withdrawal being signed, and what is sent
//! and not yet in a block (for Solana also what is in a block and not yet final: its limit is
//! the custody's count of transactions in flight, not the mempool's).

use crate::limits::*;
use crate::types::*;

code_enum! {
    /// A chain family: the rules its withdrawals follow.
    pub enum ChainFamily {
        Evm = 1,
        Utxo = 2,
        Solana = 3,
        Algorand = 4,
        Tezos = 5,
        Polkadot = 6,
    }
}

impl ChainFamily {
    pub fn name(self) -> &'static str {
        match self {
            ChainFamily::Evm => "evm",
            ChainFamily::Utxo => "utxo",
            ChainFamily::Solana => "solana",
            ChainFamily::Algorand => "algorand",
            ChainFamily::Tezos => "tezos",
            ChainFamily::Polkadot => "polkadot",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        ChainFamily::ALL.iter().copied().find(|f| f.name() == name)
    }

    /// A vault's transactions use consecutive slots (nonce, counter, the change of the previous
    /// one): a slot given up before broadcast must be the vault's last, or it leaves a gap every
    /// later transaction waits behind. The plugin therefore lets one withdrawal per vault be
    /// between slot and broadcast at a time.
    pub fn ordered_slots(self) -> bool {
        matches!(self, ChainFamily::Evm | ChainFamily::Utxo | ChainFamily::Tezos | ChainFamily::Polkadot)
    }

    /// A sent transaction can be replaced with another for the same slot (boost, drop).
    pub fn replaceable(self) -> bool {
        matches!(self, ChainFamily::Evm | ChainFamily::Utxo)
    }

    /// A signature is valid for a limited time after it is made.
    pub fn has_validity_window(self) -> bool {
        !matches!(self, ChainFamily::Evm | ChainFamily::Utxo)
    }

    /// Whether a transaction in a block but not yet final still counts as in flight.
    pub fn confirming_in_flight(self) -> bool {
        self == ChainFamily::Solana
    }

    /// The smallest fee a replacement of a transaction that paid `old` may pay.
    pub fn replacement_fee_min(self, old: u64) -> Option<u64> {
        match self {
            ChainFamily::Evm => {
                let min = (u128::from(old) * u128::from(EVM_REPLACEMENT_FEE_PERCENT_MIN)).div_ceil(100);
                Some(u64::try_from(min).unwrap_or(u64::MAX))
            }
            // Fees are rates (sat/vB) at one size: BIP 125's "pays for its own relay" at that
            // size is the old rate plus the incremental relay rate, which also beats the old
            // absolute fee.
            ChainFamily::Utxo => Some(old.saturating_add(UTXO_INCREMENTAL_RELAY_SAT_PER_VB)),
            _ => None,
        }
    }

    /// The defaults a chain of this family is registered with when nothing else is said.
    pub fn defaults(self) -> FamilyDefaults {
        const MIN: u64 = 60_000_000;
        let (confirmations, validity_window_us, vault_in_flight_max, workspace_in_flight_max) = match self {
            ChainFamily::Evm => (12, 0, 16, 0),
            ChainFamily::Utxo => (6, 0, UTXO_UNCONFIRMED_CHAIN_DEFAULT, 0),
            ChainFamily::Solana => {
                (32, 90_000_000, SOLANA_VAULT_IN_FLIGHT_MAX, SOLANA_WORKSPACE_IN_FLIGHT_MAX)
            }
            ChainFamily::Algorand => (1, 50 * MIN, 16, 0),
            ChainFamily::Tezos => (2, 30 * MIN, TEZOS_VAULT_IN_FLIGHT_MAX, 0),
            ChainFamily::Polkadot => (1, 120 * MIN, 1, 0),
        };
        FamilyDefaults { confirmations, validity_window_us, vault_in_flight_max, workspace_in_flight_max }
    }

    /// The largest per-vault in-flight limit the family allows.
    pub fn vault_in_flight_cap(self) -> u32 {
        match self {
            ChainFamily::Solana => SOLANA_VAULT_IN_FLIGHT_MAX,
            ChainFamily::Tezos => TEZOS_VAULT_IN_FLIGHT_MAX,
            // Ordered slots with expiring signatures: one in flight, so a slot whose signature
            // expired unmined is always the vault's last, and is given back (no nonce gap).
            ChainFamily::Polkadot => 1,
            ChainFamily::Utxo => UTXO_UNCONFIRMED_CHAIN_MAX,
            _ => VAULT_IN_FLIGHT_MAX,
        }
    }
}

/// A family's default parameters.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct FamilyDefaults {
    pub confirmations: u32,
    pub validity_window_us: u64,
    pub vault_in_flight_max: u32,
    pub workspace_in_flight_max: u32,
}

wire_struct! {
    /// A chain as registered (`RegisterChain`).
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct ChainParams {
        pub chain: ChainId,
        pub family: ChainFamily,
        /// Confirmations at which a withdrawal is COMPLETED (the chain's threshold).
        pub confirmations: u32,
        /// How long a signature stays valid (0: no window — EVM and UTXO).
        pub validity_window_us: u64,
        /// Slots a vault may have in flight (see the module docs).
        pub vault_in_flight_max: u32,
        /// Withdrawals of this chain accepted and not finished, workspace-wide (0: no limit);
        /// a request beyond it is refused.
        pub workspace_in_flight_max: u32,
        /// The fee a first transaction pays (gas price in wei, sat/vB, a priority fee ...).
        pub fee_initial: u64,
        /// The node transactions are broadcast to (`broadcast_attempts.broadcasted_to_node`).
        pub node: Text,
    }
}

/// Why chain parameters were refused.
#[derive(Copy, Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ChainParamsError {
    #[error("confirmations must be at least 1")]
    Confirmations,
    #[error("a validity window is required for this family and only for it")]
    ValidityWindow,
    #[error("the per-vault in-flight limit is outside 1 ..= the family's cap")]
    VaultInFlight,
    #[error("a workspace limit is for Solana only, at most 600")]
    WorkspaceInFlight,
    #[error("the node name is too long")]
    Node,
}

impl ChainParams {
    /// Parameters with the family's defaults.
    pub fn defaults(chain: ChainId, family: ChainFamily, fee_initial: u64, node: Text) -> ChainParams {
        let d = family.defaults();
        ChainParams {
            chain,
            family,
            confirmations: d.confirmations,
            validity_window_us: d.validity_window_us,
            vault_in_flight_max: d.vault_in_flight_max,
            workspace_in_flight_max: d.workspace_in_flight_max,
            fee_initial,
            node,
        }
    }

    pub fn check(&self) -> Result<(), ChainParamsError> {
        if self.confirmations == 0 {
            return Err(ChainParamsError::Confirmations);
        }
        if self.family.has_validity_window() != (self.validity_window_us > 0) {
            return Err(ChainParamsError::ValidityWindow);
        }
        if self.vault_in_flight_max == 0 || self.vault_in_flight_max > self.family.vault_in_flight_cap() {
            return Err(ChainParamsError::VaultInFlight);
        }
        let workspace_ok = match self.family {
            ChainFamily::Solana => self.workspace_in_flight_max <= SOLANA_WORKSPACE_IN_FLIGHT_MAX,
            _ => self.workspace_in_flight_max == 0,
        };
        if !workspace_ok {
            return Err(ChainParamsError::WorkspaceInFlight);
        }
        if self.node.len() > NODE_NAME_BYTES_MAX {
            return Err(ChainParamsError::Node);
        }
        Ok(())
    }
}

wire_struct! {
    /// An asset as registered (`RegisterAsset`): a token of a chain, the ledger currency its
    /// withdrawals debit, how ledger minor units scale to the token's units, and the
    /// settlement account a COMPLETED withdrawal is paid to (one per chain and currency, in
    /// effect: the account that stands for what left through that chain).
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct AssetParams {
        pub asset: AssetId,
        pub chain: ChainId,
        pub token: TokenId,
        pub currency: CurrencyCode,
        /// Token units per ledger minor unit = 10^scale_exp (token decimals minus the ledger
        /// currency's exponent: USDC has 6 decimals, USD 2, so 10^4).
        pub scale_exp: u8,
        pub settlement_account: LedgerAccount,
    }
}

/// Largest `scale_exp`: 10^30 × `i64::MAX` still fits a `u128`.
pub const SCALE_EXP_MAX: u8 = 19;

impl AssetParams {
    /// The token amount of `amount_minor` ledger minor units (`None`: does not fit).
    pub fn to_chain_units(&self, amount_minor: u64) -> Option<u128> {
        10u128.checked_pow(u32::from(self.scale_exp))?.checked_mul(u128::from(amount_minor))
    }
}

wire_struct! {
    /// A withdrawal vault as registered (`RegisterVault`).
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct VaultParams {
        pub vault: VaultId,
        pub chain: ChainId,
        /// Its address on the chain (an integer in the simulators).
        pub address: u64,
        /// The next slot its transactions use (nonce, counter, change position).
        pub next_slot: u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Text {
        Text::new("node-1", 64).expect("valid")
    }

    #[test]
    fn family_defaults_pass_their_own_checks() {
        for f in ChainFamily::ALL {
            let p = ChainParams::defaults(ChainId(1), *f, 10, node());
            assert_eq!(p.check(), Ok(()), "{f:?}");
            assert_eq!(ChainFamily::from_name(f.name()), Some(*f));
        }
    }

    #[test]
    fn chain_limits_are_the_seeds() {
        let d = |f: ChainFamily| f.defaults();
        assert_eq!(d(ChainFamily::Solana).vault_in_flight_max, 5);
        assert_eq!(d(ChainFamily::Solana).workspace_in_flight_max, 600);
        assert_eq!(d(ChainFamily::Utxo).vault_in_flight_max, 25);
        assert_eq!(d(ChainFamily::Tezos).vault_in_flight_max, 1);
        assert_eq!(d(ChainFamily::Algorand).validity_window_us, 50 * 60_000_000);
        assert_eq!(d(ChainFamily::Tezos).validity_window_us, 30 * 60_000_000);
        assert_eq!(d(ChainFamily::Polkadot).validity_window_us, 120 * 60_000_000);
        let mut p = ChainParams::defaults(ChainId(1), ChainFamily::Solana, 1, node());
        p.vault_in_flight_max = 6;
        assert_eq!(p.check(), Err(ChainParamsError::VaultInFlight));
        p.vault_in_flight_max = 5;
        p.workspace_in_flight_max = 601;
        assert_eq!(p.check(), Err(ChainParamsError::WorkspaceInFlight));
        let mut e = ChainParams::defaults(ChainId(1), ChainFamily::Evm, 1, node());
        e.validity_window_us = 1;
        assert_eq!(e.check(), Err(ChainParamsError::ValidityWindow));
        let mut u = ChainParams::defaults(ChainId(1), ChainFamily::Utxo, 1, node());
        u.vault_in_flight_max = 64;
        assert_eq!(u.check(), Ok(()), "configurable up to the cluster limit");
        u.vault_in_flight_max = 65;
        assert_eq!(u.check(), Err(ChainParamsError::VaultInFlight));
    }

    #[test]
    fn replacement_fees_follow_each_family() {
        assert_eq!(ChainFamily::Evm.replacement_fee_min(100), Some(110));
        assert_eq!(ChainFamily::Evm.replacement_fee_min(101), Some(112), "rounded up");
        assert_eq!(ChainFamily::Utxo.replacement_fee_min(20), Some(21));
        assert_eq!(ChainFamily::Solana.replacement_fee_min(20), None);
        assert!(!ChainFamily::Tezos.replaceable() && ChainFamily::Tezos.ordered_slots());
    }

    #[test]
    fn asset_scaling_is_checked() {
        let a = AssetParams {
            asset: AssetId(1),
            chain: ChainId(1),
            token: TokenId(1),
            currency: CurrencyCode(*b"USD"),
            scale_exp: 4,
            settlement_account: LedgerAccount(9),
        };
        assert_eq!(a.to_chain_units(1_234), Some(12_340_000));
        let huge = AssetParams { scale_exp: SCALE_EXP_MAX, ..a };
        assert!(huge.to_chain_units(u64::MAX).is_some());
    }
}
