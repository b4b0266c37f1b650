//! The plugin flags every command shares (`--collection`, ...), built into the one
//! `rtgs_plugins::PluginsConfig`. The set of plugins is named in `rtgs-plugins`; only the flags
//! are here, so that `demo`, `serve`, `node` and `verify` read them alike. Defaults that differ
//! per command (a demo sweeps 100,000 wallets, `serve` a thousand) come from the command.

use clap::Args;
use rtgs_plugins::{CollectionConfig, PluginsConfig};

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
    /// How much faster the simulated chain's clock runs than the journal's (12 s blocks)
    /// [default: 1000].
    #[arg(long, env = "RTGS_CHAIN_TIME_SCALE")]
    pub chain_time_scale: Option<u64>,
    /// Seed of the simulated chain, the same on every center [default: the command's].
    #[arg(long, env = "RTGS_CHAIN_SEED")]
    pub chain_seed: Option<u64>,
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
        };
        config.check()?;
        Ok(config)
    }
}
