//! The plugin flags every command shares (`--collection`, `--matching`, `--withdrawal`, ...), built
//! into the one `rtgs_plugins::PluginsConfig`. The set of plugins is named in `rtgs-plugins`; only
//! the flags are here, so that `demo`, `serve`, `node` and `verify` read them alike. Defaults that differ
//! per command (a demo sweeps 100,000 wallets, `serve` a thousand) come from the command.

use clap::Args;
use rtgs_plugins::{CollectionConfig, MatchingConfig, PluginsConfig, WithdrawalConfig};

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
    /// Run the matching (P2P deposit matching) plugin against the LP and marketplace simulators.
    #[arg(long, env = "RTGS_MATCHING")]
    pub matching: bool,
    /// Orders a demo submits [default: the command's].
    #[arg(long, env = "RTGS_MATCHING_ORDERS")]
    pub matching_orders: Option<u64>,
    /// Sellers in the simulated marketplace [default: the command's].
    #[arg(long, env = "RTGS_MATCHING_SELLERS")]
    pub matching_sellers: Option<u64>,
    /// The simulated LP misbehaves (BUSY, NO_POOL, transport failures, lost and late answers,
    /// rejections after the commit, COMMITTED on reserve).
    #[arg(long, env = "RTGS_MATCHING_LP_FAULTS")]
    pub matching_lp_faults: bool,
    /// The workload partners' window: P2P phase, LP phase and decision grace in seconds, e.g.
    /// `180,120,300` [default: the command's].
    #[arg(long, env = "RTGS_MATCHING_WINDOW_S", value_parser = parse_window)]
    pub matching_window_s: Option<(u32, u32, u32)>,
    /// Seed of the matching simulators, the same on every center [default: the command's].
    #[arg(long, env = "RTGS_MATCHING_SEED")]
    pub matching_seed: Option<u64>,
}

pub(crate) fn parse_window(text: &str) -> Result<(u32, u32, u32), String> {
    let parts: Vec<&str> = text.split(',').collect();
    let n = |s: &str| s.trim().parse::<u32>().map_err(|e| format!("{s:?}: {e}"));
    match parts.as_slice() {
        [p2p, lp, grace] => Ok((n(p2p)?, n(lp)?, n(grace)?)),
        _ => Err("expected P2P,LP,GRACE seconds, e.g. 180,120,300".into()),
    }
}

impl PluginFlags {
    /// The plugins these flags enable, unset values taken from the command's `defaults` (each
    /// command has its own: a demo sweeps 100,000 wallets, a node's marketplace waits for
    /// `rtgs match`).
    pub fn config_with(
        &self,
        defaults: CollectionConfig,
        matching: MatchingConfig,
    ) -> anyhow::Result<PluginsConfig> {
        let (p2p_phase_s, lp_phase_s, decision_grace_s) = self.matching_window_s.unwrap_or((
            matching.p2p_phase_s,
            matching.lp_phase_s,
            matching.decision_grace_s,
        ));
        let config = PluginsConfig {
            collection: self.collection.then(|| CollectionConfig {
                wallets: self.collection_wallets.unwrap_or(defaults.wallets),
                relayers: self.collection_relayers.unwrap_or(defaults.relayers),
                chain_time_scale: self.chain_time_scale.unwrap_or(defaults.chain_time_scale),
                chain_seed: self.chain_seed.unwrap_or(defaults.chain_seed),
            }),
            matching: self.matching.then(|| MatchingConfig {
                orders: self.matching_orders.unwrap_or(matching.orders),
                sellers: self.matching_sellers.unwrap_or(matching.sellers),
                lp_faults: self.matching_lp_faults || matching.lp_faults,
                seed: self.matching_seed.unwrap_or(matching.seed),
                p2p_phase_s,
                lp_phase_s,
                decision_grace_s,
                quick_timings: matching.quick_timings,
                market_start_ms: matching.market_start_ms,
                market_opening_outside: matching.market_opening_outside,
                order_ttl_s: matching.order_ttl_s,
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
