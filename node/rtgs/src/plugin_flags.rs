//! The plugin flags every command shares (`--collection`, `--withdrawal`, ...), built into the one
//! `rtgs_plugins::PluginsConfig`. The set of plugins is named in `rtgs-plugins`; only the flags
//! are here, so that `demo`, `serve`, `node` and `verify` read them alike. Defaults that differ
//! per command (a demo sweeps 100,000 wallets, `serve` a thousand) come from the command.

use clap::Args;
use rtgs_plugins::{CollectionConfig, PluginsConfig, WithdrawalConfig};

#[derive(Args, Clone, Debug, Default)]
pub struct PluginFlags {
    /// Run the collection (wallet sweeping) plugin against the chain simulator.
    #[arg(long, env = "RTGS_COLLECTION")]
    pub collection: bool,
    /// Deposit wallets on the simulated chain, one confirmed deposit of 2.0 each [default: the
    /// command's].
    #[arg(long, env = "RTGS_COLLECTION_WALLETS")]
    pub collection_wallets: Option<u64>,
    /// Relayer accounts sweeping in parallel, one nonce in flight each [default: the command's].
    #[arg(long, env = "RTGS_COLLECTION_RELAYERS")]
    pub collection_relayers: Option<u64>,
    /// How much faster the simulated chains' clocks run than the journal's (12 s blocks)
    /// [default: 1000].
    #[arg(long, env = "RTGS_CHAIN_TIME_SCALE")]
    pub chain_time_scale: Option<u64>,
    /// Seed of the simulated chain, the same on every center [default: the command's].
    #[arg(long, env = "RTGS_CHAIN_SEED")]
    pub chain_seed: Option<u64>,
    /// Run the withdrawal plugin against its simulated world (custody signer, AML screener,
    /// policy engine, one chain per family).
    #[arg(long, env = "RTGS_WITHDRAWAL")]
    pub withdrawal: bool,
    /// Withdrawal requests a demo sends [default: 1000].
    #[arg(long, env = "RTGS_WITHDRAWAL_REQUESTS")]
    pub withdrawal_requests: Option<u64>,
    /// Funded customer accounts the requests come from [default: 100].
    #[arg(long, env = "RTGS_WITHDRAWAL_CUSTOMERS")]
    pub withdrawal_customers: Option<u64>,
    /// Vaults per chain [default: 4].
    #[arg(long, env = "RTGS_WITHDRAWAL_VAULTS")]
    pub withdrawal_vaults: Option<u64>,
    /// The withdrawal world without faults (they are on by default).
    #[arg(long, env = "RTGS_WITHDRAWAL_CALM")]
    pub withdrawal_calm: bool,
}

impl PluginFlags {
    /// The plugins these flags enable, unset values taken from the command's `defaults`.
    pub fn config(&self, defaults: CollectionConfig) -> anyhow::Result<PluginsConfig> {
        let config = PluginsConfig {
            collection: self.collection.then(|| CollectionConfig {
                wallets: self.collection_wallets.unwrap_or(defaults.wallets),
                relayers: self.collection_relayers.unwrap_or(defaults.relayers),
                chain_time_scale: self.chain_time_scale.unwrap_or(defaults.chain_time_scale),
                chain_seed: self.chain_seed.unwrap_or(defaults.chain_seed),
            }),
            withdrawal: self.withdrawal.then(|| {
                let d = WithdrawalConfig::default();
                WithdrawalConfig {
                    customers: self.withdrawal_customers.unwrap_or(d.customers),
                    vaults_per_chain: self.withdrawal_vaults.unwrap_or(d.vaults_per_chain),
                    requests: self.withdrawal_requests.unwrap_or(d.requests),
                    world_time_scale: self.chain_time_scale.unwrap_or(d.world_time_scale),
                    world_seed: self.chain_seed.unwrap_or(defaults.chain_seed),
                    faults: !self.withdrawal_calm,
                }
            }),
        };
        config.check()?;
        Ok(config)
    }
}
