//! A ready-made workload for demos, the simulator, the engines' adapters and tests: one chain of
//! every family, vaults, ledger accounts, the registrations and settings as journal commands,
//! requests drawn from a seed, and the simulated world that goes with them.
//!
//! Every center builds the same [`World`] from the same [`Workload`] and [`WorldConfig`] (same
//! seeds), as a real deployment points every center at the same custody and chain RPCs.

use std::collections::BTreeMap;

use rtgs_core::entry::{AccountId, Bmi, Currency, InputError, Payload, PluginCommand};
use rtgs_core::hash::mix64;

use super::evm::{DeepReorgs, EvmClient};
use super::seq::{SeqChain, SeqConfig, SeqFaults};
use super::services::*;
use super::{ChainClient, People, World};
use crate::chain::*;
use crate::command::*;
use crate::operation::{Actor, ActorKind};
use crate::settings::SettingKey;
use crate::types::*;

/// The chains' faults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainFaults {
    pub evm: rtgs_chain_sim::evm::Faults,
    pub deep: DeepReorgs,
    pub seq: SeqFaults,
}

impl ChainFaults {
    pub fn none() -> Self {
        ChainFaults {
            evm: rtgs_chain_sim::evm::Faults::NONE,
            deep: DeepReorgs::default(),
            seq: SeqFaults::NONE,
        }
    }

    /// Every fault class at a few per mille.
    pub fn some() -> Self {
        ChainFaults {
            evm: rtgs_chain_sim::evm::Faults {
                drop_tx: 15,
                stuck_tx: 15,
                revert_tx: 10,
                timeout_before_accept: 10,
                timeout_after_accept: 15,
                reject_tx: 5,
                read_failure: 0,
                webhook_missing: 30,
                webhook_delay: 30,
                webhook_delay_us_max: 60_000_000,
                reorg: 20,
            },
            deep: DeepReorgs { per_block: 2, conflicting: 300 },
            seq: SeqFaults {
                drop_tx: 15,
                stuck_tx: 15,
                timeout_before_accept: 10,
                timeout_after_accept: 15,
                reject_tx: 5,
                webhook_missing: 30,
                reorg: 20,
                deep_reorg: 2,
                deep_conflicting: 300,
            },
        }
    }
}

/// How the world behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldConfig {
    pub people: People,
    pub screener: ScreenerConfig,
    pub custody: CustodyConfig,
    pub chains: ChainFaults,
    /// The policy engine blocks this share (rule 2).
    pub policy_block: u32,
    pub seed: u64,
    /// World µs per journal µs.
    pub time_scale: u64,
}

impl WorldConfig {
    pub fn calm(seed: u64, time_scale: u64) -> Self {
        WorldConfig {
            people: People::CALM,
            screener: ScreenerConfig::CALM,
            custody: CustodyConfig::CALM,
            chains: ChainFaults::none(),
            policy_block: 0,
            seed,
            time_scale,
        }
    }

    /// Every fault the world has, at a few per mille to a few per cent.
    pub fn faulty(seed: u64, time_scale: u64) -> Self {
        WorldConfig {
            people: People::with_faults(),
            screener: ScreenerConfig::with_faults(),
            custody: CustodyConfig::with_faults(),
            chains: ChainFaults::some(),
            policy_block: 20,
            seed,
            time_scale,
        }
    }
}

/// Chains, vaults, accounts and requests (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub families: Vec<ChainFamily>,
    pub vaults_per_chain: u64,
    pub customers: u64,
    pub funds_per_customer: u64,
    /// Requests ask for 1 ..= this (ledger minor units).
    pub amount_max: u64,
    /// Shares of the requests, per mille: sign-only (on Solana and Algorand), raw signing
    /// (digests repeat, so some hit the signature cache), screened by AML.
    pub sign_only: u32,
    pub raw: u32,
    pub aml: u32,
    pub seed: u64,
    /// Validity windows short enough for a demo (the families' real ones otherwise).
    pub short_windows: bool,
}

/// The ledger currency of every asset of the workload.
pub const CURRENCY: &[u8; 3] = b"USD";
/// Customer accounts are numbered from here, settlement accounts from `SETTLEMENT_ACCOUNT_FIRST`
/// (far from the demo's transfer accounts, which count from 1).
pub const CUSTOMER_ACCOUNT_FIRST: u64 = 7_000_000;
pub const SETTLEMENT_ACCOUNT_FIRST: u64 = 7_900_000;

impl Workload {
    pub fn new(customers: u64, vaults_per_chain: u64, seed: u64) -> Self {
        Workload {
            families: ChainFamily::ALL.to_vec(),
            vaults_per_chain: vaults_per_chain.max(1),
            customers: customers.max(1),
            funds_per_customer: 1_000_000_000,
            amount_max: 10_000,
            sign_only: 50,
            raw: 30,
            aml: 300,
            seed,
            short_windows: false,
        }
    }

    pub fn chain_id(&self, i: usize) -> ChainId {
        ChainId(1 + i as u32)
    }
    pub fn asset_id(&self, i: usize) -> AssetId {
        AssetId(1 + i as u32)
    }
    pub fn customer(&self, k: u64) -> u64 {
        CUSTOMER_ACCOUNT_FIRST + k
    }
    pub fn settlement(&self, i: usize) -> u64 {
        SETTLEMENT_ACCOUNT_FIRST + i as u64
    }
    pub fn vault_id(&self, i: usize, v: u64) -> VaultId {
        VaultId(1_000 * (1 + i as u64) + v)
    }
    pub fn vault_address(&self, i: usize, v: u64) -> u64 {
        5_000_000_000 + 100_000 * i as u64 + v
    }

    /// A family's chain as registered.
    pub fn chain_params(&self, i: usize) -> ChainParams {
        let family = self.families[i];
        let fee = match family {
            ChainFamily::Evm => 1_000_000_000,
            ChainFamily::Utxo => 10,
            ChainFamily::Solana => 5_000,
            _ => 1_000,
        };
        let node = Text::new(&format!("{}-node", family.name()), 64).unwrap_or_default();
        let mut p = ChainParams::defaults(self.chain_id(i), family, fee, node);
        if self.short_windows && p.validity_window_us > 0 {
            p.validity_window_us = match family {
                ChainFamily::Solana => 8_000_000,
                _ => 20_000_000,
            };
        }
        p
    }

    pub fn asset_params(&self, i: usize) -> AssetParams {
        let scale_exp = match self.families[i] {
            ChainFamily::Utxo | ChainFamily::Polkadot => 6,
            ChainFamily::Solana => 7,
            _ => 4,
        };
        AssetParams {
            asset: self.asset_id(i),
            chain: self.chain_id(i),
            token: TokenId(1),
            currency: CurrencyCode(*CURRENCY),
            scale_exp,
            settlement_account: LedgerAccount(self.settlement(i)),
        }
    }

    /// Ledger accounts to open (and fund) before anything else: `(account, funds)`.
    pub fn accounts(&self) -> Vec<(u64, u64)> {
        let customers = (0..self.customers).map(|k| (self.customer(k), self.funds_per_customer));
        let settlements = (0..self.families.len()).map(|i| (self.settlement(i), 0));
        customers.chain(settlements).collect()
    }

    /// The registrations (chains, assets, vaults) and `settings`, with their `bmi`s.
    pub fn setup_commands(
        &self,
        settings: &[(SettingKey, u64)],
    ) -> Result<Vec<(Bmi, PluginCommand)>, InputError> {
        let mut cmds = Vec::new();
        let mut n = 0;
        let mut push = |c: WithdrawalCommand| -> Result<(), InputError> {
            n += 1;
            cmds.push((Bmi::numbered("WSET", n)?, c.to_plugin_command()?));
            Ok(())
        };
        for i in 0..self.families.len() {
            push(WithdrawalCommand::RegisterChain(self.chain_params(i)))?;
            push(WithdrawalCommand::RegisterAsset(self.asset_params(i)))?;
            for v in 0..self.vaults_per_chain {
                push(WithdrawalCommand::RegisterVault(VaultParams {
                    vault: self.vault_id(i, v),
                    chain: self.chain_id(i),
                    address: self.vault_address(i, v),
                    next_slot: 0,
                }))?;
            }
        }
        for (key, value) in settings {
            push(WithdrawalCommand::SetSetting(SetSetting { key: *key, value: *value }))?;
        }
        Ok(cmds)
    }

    /// Everything a cluster journals before the first request, in order: the ledger accounts
    /// opened (`WOPEN<account>`) and funded (`WFUND<account>`), then the registrations and
    /// `settings` ([`Workload::setup_commands`]). Hosts that only carry plugin commands through
    /// their adapters (the simulator, the demo) submit these first.
    pub fn setup_payloads(&self, settings: &[(SettingKey, u64)]) -> Result<Vec<(Bmi, Payload)>, InputError> {
        let currency = Currency::new(CURRENCY)?;
        let mut out = Vec::new();
        for (account, funds) in self.accounts() {
            out.push((
                Bmi::numbered("WOPEN", account)?,
                Payload::AccountOpen { account: AccountId(account), currency },
            ));
            if funds > 0 {
                let fund = Payload::AccountFund { account: AccountId(account), amount_minor: funds };
                out.push((Bmi::numbered("WFUND", account)?, fund));
            }
        }
        let cmds = self.setup_commands(settings)?;
        out.extend(cmds.into_iter().map(|(bmi, pc)| (bmi, Payload::Plugin(pc))));
        Ok(out)
    }

    /// Timers short enough for a demo (seconds of journal time).
    pub fn demo_settings() -> Vec<(SettingKey, u64)> {
        vec![
            (SettingKey::AuthorizationTimeout, 20),
            (SettingKey::SignatureTimeout, 20),
            (SettingKey::QueuedTimeout, 120),
            (SettingKey::StaleThreshold, 3),
            (SettingKey::StaleCheckInterval, 2),
            (SettingKey::AmlTimeout, 4),
            (SettingKey::BroadcastMargin, 1),
            (SettingKey::ReorgCheck, 4),
        ]
    }

    /// Request `n` (deterministic from the seed), with its `bmi`.
    pub fn request(&self, n: u64) -> Result<(Bmi, PluginCommand), InputError> {
        let r = |salt: u64| mix64(self.seed ^ mix64(n ^ (salt << 56)));
        let i = (r(1) % self.families.len() as u64) as usize;
        let family = self.families[i];
        let customer = self.customer(r(2) % self.customers);
        let kind = if r(3) % 1000 < u64::from(self.raw) {
            RequestKind::Raw(Digest(TxHash::of(self.seed, &(r(4) % 64).to_le_bytes()).0))
        } else if matches!(family, ChainFamily::Solana | ChainFamily::Algorand)
            && r(5) % 1000 < u64::from(self.sign_only)
        {
            RequestKind::SignOnly
        } else {
            RequestKind::Standard
        };
        let raw = matches!(kind, RequestKind::Raw(_));
        let destination = format!("dest-{}-{}", family.name(), r(6) % 10_000);
        let c = CreateWithdrawal {
            account: LedgerAccount(customer),
            asset: self.asset_id(i),
            amount_minor: if raw { 0 } else { 1 + r(7) % self.amount_max.max(1) },
            destination_type: DestinationType::Whitelisted,
            destination: if raw { None } else { Text::new(&destination, 128).ok() },
            memo: None,
            kind,
            aml: !raw && r(8) % 1000 < u64::from(self.aml),
            notes: None,
            actor: Actor { kind: ActorKind::Participant, id: ActorId(customer) },
        };
        Ok((Bmi::numbered("WREQ", n)?, WithdrawalCommand::Create(c).to_plugin_command()?))
    }

    /// The world for this workload: a simulated chain per family (the registered thresholds,
    /// funded vaults), the services, the people.
    pub fn world(&self, cfg: &WorldConfig, start_us: u64) -> World {
        let mut chains: BTreeMap<ChainId, Box<dyn ChainClient>> = BTreeMap::new();
        for i in 0..self.families.len() {
            let p = self.chain_params(i);
            let seed = cfg.seed ^ mix64(0xC4A1 + i as u64);
            let client: Box<dyn ChainClient> = match p.family {
                ChainFamily::Evm => {
                    let evm = rtgs_chain_sim::evm::EvmConfig {
                        chain: p.chain,
                        confirmations: u64::from(p.confirmations),
                        ..rtgs_chain_sim::evm::EvmConfig::default()
                    };
                    let mut c = EvmClient::new(evm, cfg.chains.evm, cfg.chains.deep, seed, start_us);
                    for v in 0..self.vaults_per_chain {
                        c.fund_vault(self.vault_address(i, v), TokenId(1));
                    }
                    Box::new(c)
                }
                family => {
                    let sc = SeqConfig::of(p.chain, family, p.confirmations);
                    Box::new(SeqChain::new(sc, cfg.chains.seq, seed, start_us))
                }
            };
            chains.insert(p.chain, client);
        }
        let screener = Box::new(ScreenerSim::new(cfg.screener.clone(), cfg.seed ^ 1));
        let policy =
            Box::new(PolicySim { amount_chain_max: u128::MAX, block: cfg.policy_block, seed: cfg.seed ^ 2 });
        let custody = Box::new(CustodySim::new(cfg.custody.clone(), cfg.seed ^ 3));
        let services = super::Services { screener, policy, custody, chains };
        World::new(services, cfg.people.clone(), cfg.seed, start_us, cfg.time_scale)
    }
}
