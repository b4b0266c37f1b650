//! Shared fixtures: [`Fx`] drives the plugin with a real ledger and hand-made results (one rule
//! at a time); `World` fixtures in `faults.rs` run it against the simulated outside world.

#![allow(dead_code)]

use rtgs_chain_sim::answer::{BroadcastOutcome, Receipt, ReceiptStatus};
use rtgs_core::entry::{AccountId, Bmi, Payload, PluginCommand, PluginKind};
use rtgs_core::ledger::HoldKey;
use rtgs_core::plugin::Effect;
use rtgs_withdrawal::alert::AlertKind;
use rtgs_withdrawal::chain::*;
use rtgs_withdrawal::command::*;
use rtgs_withdrawal::driver::{Driver, NoWorld};
use rtgs_withdrawal::effect::*;
use rtgs_withdrawal::operation::*;
use rtgs_withdrawal::settings::{SettingKey, HOUR_US, SECOND_US};
use rtgs_withdrawal::state::*;
use rtgs_withdrawal::status::Status;
use rtgs_withdrawal::types::*;
use rtgs_withdrawal::WithdrawalPlugin;

pub const START_US: u64 = 1_000 * HOUR_US;
pub const EVM: ChainId = ChainId(1);
pub const SOL: ChainId = ChainId(2);
pub const UTXO: ChainId = ChainId(3);
pub const TEZ: ChainId = ChainId(4);
pub const USDC: AssetId = AssetId(1);
pub const SOLA: AssetId = AssetId(2);
pub const BTC: AssetId = AssetId(3);
pub const XTZ: AssetId = AssetId(4);
pub const CUSTOMER: u64 = 100;
pub const SETTLEMENT: u64 = 900;
pub const FUNDS: u64 = 1_000_000;
pub const FEE: u64 = 100;
pub const PARTICIPANT: Actor = Actor { kind: ActorKind::Participant, id: ActorId(7) };
pub const OPERATOR: Actor = Actor { kind: ActorKind::Operator, id: ActorId(1) };
pub const EVM_CONFIRMATIONS: u32 = 3;

pub fn text(s: &str) -> Text {
    Text::new(s, 512).expect("valid text")
}

/// The plugin with a ledger, results fed by hand.
pub struct Fx {
    pub d: Driver<NoWorld>,
    /// Effects not looked at yet.
    pub seen: usize,
    /// Alerts (by id) not looked at yet: those above it.
    pub alerts_seen: u64,
}

impl Fx {
    /// Four chains (EVM, Solana, UTXO, Tezos), an asset each (all in USD), one vault each, a
    /// funded customer account and the settlement account.
    pub fn new() -> Self {
        let mut d = Driver::new(NoWorld, START_US);
        d.execute = false;
        for (acct, funds) in [(CUSTOMER, FUNDS), (SETTLEMENT, 0)] {
            d.open_account(acct, b"USD", funds).expect("valid");
        }
        let mut fx = Fx { d, seen: 0, alerts_seen: 0 };
        let mut evm = ChainParams::defaults(EVM, ChainFamily::Evm, FEE, text("evm-node"));
        evm.confirmations = EVM_CONFIRMATIONS;
        fx.cmd(WithdrawalCommand::RegisterChain(evm));
        fx.cmd(WithdrawalCommand::RegisterChain(ChainParams::defaults(
            SOL,
            ChainFamily::Solana,
            5,
            text("sol-rpc"),
        )));
        fx.cmd(WithdrawalCommand::RegisterChain(ChainParams::defaults(
            UTXO,
            ChainFamily::Utxo,
            10,
            text("btc-node"),
        )));
        fx.cmd(WithdrawalCommand::RegisterChain(ChainParams::defaults(
            TEZ,
            ChainFamily::Tezos,
            10,
            text("tz-node"),
        )));
        for (asset, chain) in [(USDC, EVM), (SOLA, SOL), (BTC, UTXO), (XTZ, TEZ)] {
            fx.cmd(WithdrawalCommand::RegisterAsset(AssetParams {
                asset,
                chain,
                token: TokenId(1),
                currency: CurrencyCode(*b"USD"),
                scale_exp: 4,
                settlement_account: LedgerAccount(SETTLEMENT),
            }));
        }
        for (vault, chain) in [(1, EVM), (2, SOL), (3, UTXO), (4, TEZ)] {
            fx.vault(vault, chain);
        }
        fx.take_effects();
        fx
    }

    pub fn p(&self) -> &WithdrawalPlugin {
        &self.d.plugin
    }

    pub fn vault(&mut self, vault: u64, chain: ChainId) {
        self.cmd(WithdrawalCommand::RegisterVault(VaultParams {
            vault: VaultId(vault),
            chain,
            address: 10_000 + vault,
            next_slot: 0,
        }));
    }

    /// `n` more vaults on `chain` (ids from 100 up).
    pub fn vaults(&mut self, chain: ChainId, n: u64) {
        let first = 100 + self.p().vaults().count() as u64;
        for v in first..first + n {
            self.vault(v, chain);
        }
    }

    pub fn set(&mut self, key: SettingKey, value: u64) {
        self.cmd(WithdrawalCommand::SetSetting(SetSetting { key, value }));
    }

    pub fn cmd(&mut self, c: WithdrawalCommand) -> u64 {
        let seq = self.d.submit(&c).expect("fits");
        self.check();
        seq
    }

    pub fn check(&self) {
        self.p().check_invariants().unwrap_or_else(|e| panic!("{e}"));
        self.d.ledger.check_conservation().unwrap_or_else(|e| panic!("{e:?}"));
    }

    pub fn at(&mut self, t_us: u64) -> &mut Self {
        self.d.set_now(t_us);
        self
    }

    pub fn advance(&mut self, us: u64) -> &mut Self {
        let t = self.d.now_us() + us;
        self.d.set_now(t);
        self
    }

    pub fn tick(&mut self) {
        self.d.tick();
        self.check();
    }

    /// The effects emitted since the last call, decoded.
    pub fn take_effects(&mut self) -> Vec<(u64, WithdrawalEffect)> {
        let all = &self.d.effects()[self.seen..];
        self.seen = self.d.effects().len();
        all.iter()
            .map(|e| (e.effect_id, WithdrawalEffect::from_effect(e).expect("own effects decode")))
            .collect()
    }

    /// The kinds of the alerts opened since the last call and still open, in id order (the
    /// effects emitted meanwhile are taken too).
    pub fn take_alerts(&mut self) -> Vec<AlertKind> {
        self.take_effects();
        let mut new: Vec<_> = self.p().alerts_open().filter(|a| a.id > self.alerts_seen).collect();
        new.sort_by_key(|a| a.id);
        let kinds = new.iter().map(|a| a.kind).collect();
        self.alerts_seen = self.p().alert_id_last();
        kinds
    }

    pub fn request(&self, asset: AssetId, amount: u64, kind: RequestKind, aml: bool) -> CreateWithdrawal {
        let raw = matches!(kind, RequestKind::Raw(_));
        CreateWithdrawal {
            account: LedgerAccount(CUSTOMER),
            asset,
            amount_minor: if raw { 0 } else { amount },
            destination_type: DestinationType::Whitelisted,
            destination: (!raw).then(|| text("0xdestination")),
            memo: None,
            kind,
            aml,
            notes: None,
            actor: PARTICIPANT,
        }
    }

    /// A new withdrawal; its id (the request's seq).
    pub fn create(&mut self, c: CreateWithdrawal) -> WithdrawalId {
        WithdrawalId(self.cmd(WithdrawalCommand::Create(c)))
    }

    pub fn w(&self, id: WithdrawalId) -> &Withdrawal {
        self.p().withdrawal(id).expect("withdrawal exists")
    }

    pub fn status(&self, id: WithdrawalId) -> Status {
        self.w(id).status
    }

    pub fn awaiting(&self, id: WithdrawalId) -> Awaiting {
        self.w(id).awaiting.expect("awaits an answer")
    }

    /// The customer's available balance and the withdrawal's hold.
    pub fn balance(&self, account: u64) -> u64 {
        self.d.ledger.account(AccountId(account)).map_or(0, |a| a.balance_minor)
    }
    pub fn held(&self, id: WithdrawalId) -> Option<u64> {
        self.d.ledger.hold(HoldKey { plugin: PluginKind::Withdrawal, id: id.0 }).map(|h| h.amount_minor)
    }

    // ----- answers -----

    pub fn screened(&mut self, id: WithdrawalId, verdict: AmlVerdict) {
        let a = self.awaiting(id);
        self.cmd(WithdrawalCommand::Screened(Screened {
            effect_id: a.effect_id,
            withdrawal: id,
            verdict,
            case_ref: 1,
        }));
    }

    pub fn decided(&mut self, id: WithdrawalId, blocked_by_rule: Option<u32>) {
        let a = self.awaiting(id);
        self.cmd(WithdrawalCommand::Decided(Decided {
            effect_id: a.effect_id,
            withdrawal: id,
            blocked_by_rule,
        }));
    }

    /// The signer's answer to the awaited signature: a hash derived from the raw transaction.
    pub fn signed(&mut self, id: WithdrawalId) -> TxHash {
        let a = self.awaiting(id);
        let raw = self.w(id).pending_raw.clone().expect("a raw transaction awaits its signature");
        let payload = rtgs_withdrawal::wire::to_vec(&raw);
        let hash = TxHash::of(0x51, &payload);
        self.cmd(WithdrawalCommand::SignatureResult(SignatureResult {
            effect_id: a.effect_id,
            withdrawal: id,
            outcome: SignOutcome::Signed { signed_payload: Blob(payload), tx_hash: hash },
        }));
        hash
    }

    pub fn sign_refused(&mut self, id: WithdrawalId) {
        let a = self.awaiting(id);
        self.cmd(WithdrawalCommand::SignatureResult(SignatureResult {
            effect_id: a.effect_id,
            withdrawal: id,
            outcome: SignOutcome::Refused { code: 1 },
        }));
    }

    pub fn raw_signed(&mut self, id: WithdrawalId) {
        let a = self.awaiting(id);
        self.cmd(WithdrawalCommand::SignatureResult(SignatureResult {
            effect_id: a.effect_id,
            withdrawal: id,
            outcome: SignOutcome::RawSigned { signature: Blob(vec![7; 64]) },
        }));
    }

    pub fn broadcast_answer(&mut self, id: WithdrawalId, outcome: BroadcastOutcome) {
        let a = self.awaiting(id);
        assert_eq!(a.kind, AwaitKind::Broadcast);
        let hash = *self.w(id).attempt(a.attempt).expect("attempt").tx_hash();
        self.cmd(WithdrawalCommand::BroadcastResult(BroadcastResult {
            effect_id: a.effect_id,
            withdrawal: id,
            tx_hash: hash,
            outcome,
        }));
    }

    pub fn event(&mut self, chain: ChainId, hash: TxHash, event: ChainEventKind) {
        self.cmd(WithdrawalCommand::ChainEvent(ChainEvent { chain, tx_hash: hash, event }));
    }

    pub fn included(&mut self, id: WithdrawalId, hash: TxHash, height: u64) {
        let chain = self.w(id).chain;
        self.event(chain, hash, ChainEventKind::Included { block_hash: block(height), height });
    }

    pub fn confirmed(&mut self, id: WithdrawalId, hash: TxHash, height: u64, depth: u32, success: bool) {
        let chain = self.w(id).chain;
        self.event(
            chain,
            hash,
            ChainEventKind::Confirmed { block_hash: block(height), height, depth, success },
        );
    }

    pub fn reorged(&mut self, id: WithdrawalId, hash: TxHash, height: u64) {
        let chain = self.w(id).chain;
        self.event(chain, hash, ChainEventKind::Reorged { height });
    }

    /// The answer to the awaited lookup.
    pub fn looked(
        &mut self,
        id: WithdrawalId,
        tip: u64,
        slots_used: Option<u64>,
        receipts: Vec<(TxHash, ReceiptStatus)>,
    ) {
        let a = self.awaiting(id);
        self.cmd(WithdrawalCommand::ReceiptsLooked(ReceiptsLooked {
            effect_id: a.effect_id,
            withdrawal: id,
            tip_height: tip,
            slots_used,
            receipts,
        }));
    }

    pub fn operate(
        &mut self,
        id: WithdrawalId,
        operation: OperationKind,
        actor: Actor,
        params: OpParams,
    ) -> Option<Refusal> {
        self.cmd(WithdrawalCommand::Operate(Operate { withdrawal: id, operation, actor, params }));
        let last = self.w(id).operations.last().expect("recorded");
        assert_eq!(*last.operation(), operation);
        *last.refused()
    }

    pub fn op(&mut self, id: WithdrawalId, operation: OperationKind) -> Option<Refusal> {
        self.operate(id, operation, OPERATOR, OpParams::default())
    }

    // ----- reaching each state -----

    /// A withdrawal of `amount` on `asset` in `status` (every state of the table).
    pub fn reach(&mut self, asset: AssetId, status: Status) -> WithdrawalId {
        let kind = if status == Status::Signed { RequestKind::SignOnly } else { RequestKind::Standard };
        let aml = matches!(status, Status::PendingAmlScreening | Status::Rejected);
        let id = self.create(self.request(asset, 1_000, kind, aml));
        match status {
            Status::Submitted | Status::PendingAmlScreening => {}
            Status::Rejected => self.screened(id, AmlVerdict::Reject),
            Status::Cancelled => assert_eq!(self.op(id, OperationKind::Cancel), None),
            _ => self.reach_from_submitted(id, status),
        }
        assert_eq!(self.status(id), status, "{:?}", self.w(id).transitions);
        id
    }

    fn reach_from_submitted(&mut self, id: WithdrawalId, status: Status) {
        self.tick();
        match status {
            Status::PendingAuthorization => return,
            Status::Blocked => return self.decided(id, Some(4)),
            Status::Failed => {
                self.advance(2 * HOUR_US + SECOND_US).tick();
                return;
            }
            Status::Queued => {
                // Its chain's vaults out of the rotation (left so: enabling one dispatches it).
                let chain = self.w(id).chain;
                let vaults: Vec<VaultId> =
                    self.p().vaults().filter(|v| v.params.chain == chain).map(|v| v.params.vault).collect();
                for vault in vaults {
                    self.cmd(WithdrawalCommand::SetVaultEnabled(SetVaultEnabled { vault, enabled: false }));
                }
                return self.decided(id, None);
            }
            _ => self.decided(id, None),
        }
        if status == Status::PendingSignature {
            return;
        }
        let hash = self.signed(id);
        if status == Status::Broadcasting || status == Status::Signed {
            return;
        }
        self.broadcast_answer(id, BroadcastOutcome::Accepted);
        if status == Status::Stale {
            self.make_stale(id, vec![(hash, ReceiptStatus::Pending)]);
            return;
        }
        self.included(id, hash, 10);
        if status == Status::Completed {
            let depth = self.p().chain(self.w(id).chain).expect("chain").confirmations;
            self.confirmed(id, hash, 10, depth, true);
        }
    }

    /// Past the stale threshold: the monitor's lookup answered with `receipts`.
    pub fn make_stale(&mut self, id: WithdrawalId, receipts: Vec<(TxHash, ReceiptStatus)>) {
        let threshold = self.p().setting(SettingKey::StaleThreshold) * SECOND_US;
        self.advance(threshold + SECOND_US).tick();
        assert_eq!(self.awaiting(id).kind, AwaitKind::Lookup);
        self.looked(id, 20, Some(0), receipts);
    }

    pub fn vault_of_chain(&self, chain: ChainId) -> VaultId {
        self.p().vaults().find(|v| v.params.chain == chain).map(|v| v.params.vault).expect("a vault")
    }

    /// The hash of a withdrawal's last attempt.
    pub fn last_hash(&self, id: WithdrawalId) -> TxHash {
        *self.w(id).attempts.last().expect("an attempt").tx_hash()
    }
}

pub fn block(height: u64) -> TxHash {
    TxHash::of(0xB1, &height.to_le_bytes())
}

pub fn mined(height: u64, success: bool) -> ReceiptStatus {
    ReceiptStatus::Mined(Receipt { success, block_height: height, gas_used: 21_000, gas_cost_usd_micros: 1 })
}

/// Kinds of the effects, for assertions.
pub fn kinds(effects: &[(u64, WithdrawalEffect)]) -> Vec<&'static str> {
    effects
        .iter()
        .map(|(_, e)| match e {
            WithdrawalEffect::Screen(_) => "screen",
            WithdrawalEffect::Authorize(_) => "authorize",
            WithdrawalEffect::Sign(_) => "sign",
            WithdrawalEffect::SignRaw(_) => "sign_raw",
            WithdrawalEffect::Broadcast(_) => "broadcast",
            WithdrawalEffect::Lookup(_) => "lookup",
        })
        .collect()
}

/// A plugin command that does not decode.
pub fn garbage() -> Payload {
    Payload::Plugin(PluginCommand { plugin: PluginKind::Withdrawal, op: 1, body: vec![1, 2, 3] })
}

pub fn unused(_: &Effect, _: Bmi) {}
