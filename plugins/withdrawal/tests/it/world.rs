//! The plugin against its simulated outside world (`rtgs_withdrawal::world`), through the
//! journal driver: a fixture and the end checks every world test runs.

#![allow(dead_code)]

use std::collections::BTreeMap;

use rtgs_core::entry::{AccountId, Payload};
use rtgs_withdrawal::chain::ChainFamily;
use rtgs_withdrawal::command::*;
use rtgs_withdrawal::driver::Driver;
use rtgs_withdrawal::records::Purpose;
use rtgs_withdrawal::settings::SECOND_US;
use rtgs_withdrawal::state::Money;
use rtgs_withdrawal::status::Status;
use rtgs_withdrawal::types::*;
use rtgs_withdrawal::world::evm::EvmClient;
use rtgs_withdrawal::world::seq::SeqChain;
use rtgs_withdrawal::world::workload::{Workload, WorldConfig};
use rtgs_withdrawal::world::World;
use rtgs_withdrawal::WithdrawalPlugin;

use crate::support::{text, START_US};

/// Journal µs per driver step (100 s of world time at the scale below).
pub const STEP_US: u64 = 100_000;
pub const TIME_SCALE: u64 = 1_000;

pub struct WFx {
    pub d: Driver<World>,
    pub wl: Workload,
}

impl WFx {
    pub fn new(families: &[ChainFamily], cfg: WorldConfig) -> Self {
        Self::sized(families, cfg, 4, 2)
    }

    /// With `customers` funded customer accounts and `vaults` vaults per chain.
    pub fn sized(families: &[ChainFamily], cfg: WorldConfig, customers: u64, vaults: u64) -> Self {
        let mut wl = Workload::new(customers, vaults, cfg.seed);
        wl.families = families.to_vec();
        wl.short_windows = true;
        let world = wl.world(&cfg, START_US);
        let mut d = Driver::new(world, START_US);
        for (account, funds) in wl.accounts() {
            d.open_account(account, rtgs_withdrawal::world::workload::CURRENCY, funds).expect("valid");
        }
        for (bmi, pc) in wl.setup_commands(&Workload::demo_settings()).expect("fits") {
            d.submit_payload(bmi, Payload::Plugin(pc));
        }
        WFx { d, wl }
    }

    pub fn calm(families: &[ChainFamily]) -> Self {
        Self::new(families, WorldConfig::calm(7, TIME_SCALE))
    }

    pub fn p(&self) -> &WithdrawalPlugin {
        &self.d.plugin
    }

    /// A request of `amount` on the workload's chain `i`.
    pub fn request(&self, i: usize, amount: u64, kind: RequestKind, aml: bool) -> CreateWithdrawal {
        let raw = matches!(kind, RequestKind::Raw(_));
        CreateWithdrawal {
            account: LedgerAccount(self.wl.customer(0)),
            asset: self.wl.asset_id(i),
            amount_minor: if raw { 0 } else { amount },
            destination_type: DestinationType::Whitelisted,
            destination: (!raw).then(|| text("dest-1")),
            memo: None,
            kind,
            aml,
            notes: None,
            actor: rtgs_withdrawal::operation::Actor {
                kind: rtgs_withdrawal::operation::ActorKind::Participant,
                id: ActorId(self.wl.customer(0)),
            },
        }
    }

    pub fn create(&mut self, c: CreateWithdrawal) -> WithdrawalId {
        WithdrawalId(self.d.submit(&WithdrawalCommand::Create(c)).expect("fits"))
    }

    pub fn status(&self, id: WithdrawalId) -> Status {
        self.p().withdrawal(id).expect("exists").status
    }

    pub fn run_s(&mut self, seconds: u64) {
        self.d.run_for(seconds * SECOND_US, STEP_US);
        self.check();
    }

    /// Runs until `done` holds (at most `seconds`), checking every step.
    pub fn run_until(&mut self, seconds: u64, done: impl Fn(&WithdrawalPlugin) -> bool) -> bool {
        for _ in 0..seconds * SECOND_US / STEP_US {
            if done(self.p()) {
                return true;
            }
            self.d.run_for(STEP_US, STEP_US);
            self.check();
        }
        done(self.p())
    }

    pub fn check(&self) {
        self.p().check_invariants().unwrap_or_else(|e| panic!("{e}"));
        self.d.ledger.check_conservation().unwrap_or_else(|e| panic!("{e:?}"));
    }

    pub fn evm(&mut self) -> &mut EvmClient {
        let chain =
            self.wl.chain_id(self.wl.families.iter().position(|f| *f == ChainFamily::Evm).expect("evm"));
        let c = self.d.adapter.chains.get_mut(&chain).expect("chain");
        c.as_any_mut().downcast_mut::<EvmClient>().expect("the EVM client")
    }

    pub fn seq(&mut self, family: ChainFamily) -> &mut SeqChain {
        let chain = self.wl.chain_id(self.wl.families.iter().position(|f| *f == family).expect("family"));
        let c = self.d.adapter.chains.get_mut(&chain).expect("chain");
        c.as_any_mut().downcast_mut::<SeqChain>().expect("a seq chain")
    }

    pub fn balance(&self, account: u64) -> u64 {
        self.d.ledger.account(AccountId(account)).map_or(0, |a| a.balance_minor)
    }

    /// Whether nothing is left to happen: every withdrawal final, nothing open.
    pub fn quiescent(p: &WithdrawalPlugin) -> bool {
        p.withdrawals().all(|w| w.is_settled_final())
    }
}

/// The end checks of every world run: no withdrawal paid twice on chain; nothing on chain the
/// plugin did not sign and record (the same signed payload sent again is the same hash);
/// a COMPLETED withdrawal has exactly one payment mined and its money settled, any other has
/// none mined and its money back; the settlement accounts hold exactly the COMPLETED amounts.
pub fn check_end(fx: &WFx) {
    let p = fx.p();
    // The library's check (the simulator's) must agree with the one spelled out here.
    rtgs_withdrawal::world::check_paid_once(&fx.d.adapter, p).unwrap_or_else(|e| panic!("{e}"));
    let mut paid: BTreeMap<WithdrawalId, u32> = BTreeMap::new();
    for chain in fx.d.adapter.chains.values() {
        for (hash, raw, mined) in chain.seen() {
            let Some(raw) = raw else { continue };
            let w = p
                .withdrawal(raw.withdrawal)
                .unwrap_or_else(|| panic!("{:?} sent for no withdrawal", raw.withdrawal));
            assert!(
                w.attempts.iter().any(|a| *a.tx_hash() == hash),
                "{hash:?} on chain but never recorded by {:?}",
                w.id
            );
            if mined && raw.purpose != Purpose::Drop {
                *paid.entry(raw.withdrawal).or_default() += 1;
            }
        }
    }
    let mut settled: BTreeMap<u64, u64> = BTreeMap::new();
    for w in p.withdrawals() {
        let n = paid.get(&w.id).copied().unwrap_or(0);
        assert!(n <= 1, "{:?} paid {n} times", w.id);
        let raw = matches!(w.kind, RequestKind::Raw(_));
        if w.status == Status::Completed && !raw {
            assert_eq!((n, w.money), (1, Money::Settled), "{:?}: completed {:?}", w.id, w.transitions);
            let acct = p.asset(w.asset).expect("asset").settlement_account.0;
            *settled.entry(acct).or_default() += w.amount_minor;
        }
        if w.status.is_final() && w.status != Status::Completed {
            assert_eq!(n, 0, "{:?} ended {:?} yet was paid", w.id, w.status);
            let returned =
                matches!(w.money, Money::Released | Money::Reversed) || (raw && w.money == Money::None);
            assert!(returned, "{:?} {:?}", w.id, w.money);
        }
    }
    for i in 0..fx.wl.families.len() {
        let acct = fx.wl.settlement(i);
        assert_eq!(fx.balance(acct), settled.get(&acct).copied().unwrap_or(0), "settlement account {acct}");
    }
}
