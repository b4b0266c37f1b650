//! Simulated services: the AML screener, the policy engine and the custody signer, each with
//! its latency and its faults (per mille, from a seeded PRNG).
//!
//! Decisions are a function of the request (a hash of the seed and the effect or withdrawal
//! id), not of the PRNG's state: an effect executed again by a new owner gets the same verdict,
//! the same approval, the same signature — as the real services would answer the same request.
//! Timeouts (no answer at all) are per execution: a second execution may be answered.

use std::collections::BTreeMap;

use rtgs_core::hash::{bytes64, mix64};
use rtgs_core::prng::Prng;

use super::{Custody, PolicyEngine, Screener};
use crate::command::*;
use crate::effect::*;
use crate::types::*;
use crate::wire::to_vec;

/// A timed outbox of answers.
#[derive(Default)]
struct Outbox {
    items: BTreeMap<(u64, u64), WithdrawalCommand>,
    seq: u64,
}

impl Outbox {
    fn send(&mut self, due_us: u64, cmd: WithdrawalCommand) {
        self.seq += 1;
        self.items.insert((due_us, self.seq), cmd);
    }
    fn poll(&mut self, now_us: u64, out: &mut Vec<WithdrawalCommand>) {
        while let Some(e) = self.items.first_entry() {
            if e.key().0 > now_us {
                break;
            }
            out.push(e.remove());
        }
    }
}

/// A decision drawn from the request alone: `permille` chance, keyed by `(seed, salt, key)`.
fn decided(seed: u64, salt: u64, key: u64, permille: u32) -> bool {
    permille > 0 && mix64(seed ^ mix64(salt ^ mix64(key))) % 1000 < u64::from(permille)
}

/// The screener's verdicts and faults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScreenerConfig {
    pub alert: u32,
    pub reject: u32,
    pub freeze: u32,
    /// No answer at all (the plugin asks again after its AML timeout).
    pub timeout: u32,
    pub latency_us: u64,
}

impl ScreenerConfig {
    pub const CALM: ScreenerConfig =
        ScreenerConfig { alert: 0, reject: 0, freeze: 0, timeout: 0, latency_us: 2_000_000 };
    pub fn with_faults() -> Self {
        ScreenerConfig { alert: 40, reject: 30, freeze: 10, timeout: 60, ..Self::CALM }
    }
}

pub struct ScreenerSim {
    pub cfg: ScreenerConfig,
    seed: u64,
    prng: Prng,
    outbox: Outbox,
    pub screened: u64,
}

impl ScreenerSim {
    pub fn new(cfg: ScreenerConfig, seed: u64) -> Self {
        ScreenerSim { cfg, seed, prng: Prng::new(seed ^ 0x0A31), outbox: Outbox::default(), screened: 0 }
    }
}

impl Screener for ScreenerSim {
    fn screen(&mut self, effect_id: u64, req: &Screen, now_us: u64) {
        self.screened += 1;
        if self.cfg.timeout > 0 && self.prng.chance(u64::from(self.cfg.timeout), 1000) {
            return;
        }
        let c = &self.cfg;
        let verdict = if decided(self.seed, 1, effect_id, c.freeze) {
            AmlVerdict::Freeze
        } else if decided(self.seed, 2, effect_id, c.reject) {
            AmlVerdict::Reject
        } else if decided(self.seed, 3, effect_id, c.alert) {
            AmlVerdict::Alert
        } else {
            AmlVerdict::Accept
        };
        let s = Screened { effect_id, withdrawal: req.withdrawal, verdict, case_ref: effect_id };
        self.outbox.send(now_us + c.latency_us, WithdrawalCommand::Screened(s));
    }

    fn poll(&mut self, now_us: u64, out: &mut Vec<WithdrawalCommand>) {
        self.outbox.poll(now_us, out);
    }
}

/// The policy engine: rule 1 blocks amounts above `amount_chain_max`, rule 2 a share of the
/// withdrawals (a destination on a deny list, say).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicySim {
    pub amount_chain_max: u128,
    pub block: u32,
    pub seed: u64,
}

impl PolicyEngine for PolicySim {
    fn evaluate(&mut self, req: &Authorize) -> Option<u32> {
        if req.amount_chain > self.amount_chain_max {
            return Some(1);
        }
        decided(self.seed, 4, req.withdrawal.0, self.block).then_some(2)
    }
}

/// The custody's latencies and faults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustodyConfig {
    pub approval_latency_us: u64,
    pub sign_latency_us: u64,
    /// The approvers never answer (the plugin's 2 h timer fails it).
    pub approval_timeout: u32,
    /// The signer never answers.
    pub sign_timeout: u32,
    pub sign_refuse: u32,
    /// The signing key (payloads and hashes are a function of it and the raw transaction).
    pub key: u64,
}

impl CustodyConfig {
    pub const CALM: CustodyConfig = CustodyConfig {
        approval_latency_us: 30_000_000,
        sign_latency_us: 3_000_000,
        approval_timeout: 0,
        sign_timeout: 0,
        sign_refuse: 0,
        key: 0x5EC_12E7,
    };
    pub fn with_faults() -> Self {
        CustodyConfig { approval_timeout: 15, sign_timeout: 15, sign_refuse: 10, ..Self::CALM }
    }
}

pub struct CustodySim {
    pub cfg: CustodyConfig,
    seed: u64,
    prng: Prng,
    outbox: Outbox,
    pub approvals: u64,
    pub signatures: u64,
}

impl CustodySim {
    pub fn new(cfg: CustodyConfig, seed: u64) -> Self {
        CustodySim {
            cfg,
            seed,
            prng: Prng::new(seed ^ 0xC057),
            outbox: Outbox::default(),
            approvals: 0,
            signatures: 0,
        }
    }

    fn times_out(&mut self, permille: u32) -> bool {
        permille > 0 && self.prng.chance(u64::from(permille), 1000)
    }

    /// The signed payload of a raw transaction and its hash: a function of the key and the raw
    /// transaction only.
    pub fn sign_payload(key: u64, raw: &RawTx) -> (Blob, TxHash) {
        let mut payload = to_vec(raw);
        let sig = TxHash::of(key, &payload);
        payload.extend_from_slice(&sig.0);
        let hash = TxHash::of(key ^ 0x7C, &payload);
        (Blob(payload), hash)
    }
}

impl Custody for CustodySim {
    fn approve(&mut self, effect_id: u64, req: &Authorize, now_us: u64) {
        self.approvals += 1;
        if self.times_out(self.cfg.approval_timeout) {
            return;
        }
        let d = Decided { effect_id, withdrawal: req.withdrawal, blocked_by_rule: None };
        self.outbox.send(now_us + self.cfg.approval_latency_us, WithdrawalCommand::Decided(d));
    }

    fn sign(&mut self, effect_id: u64, req: &Sign, now_us: u64) {
        self.signatures += 1;
        if self.times_out(self.cfg.sign_timeout) {
            return;
        }
        let key = u64::from(req.raw.attempt) | (req.raw.withdrawal.0 << 8);
        let outcome = if decided(self.seed, 5, key, self.cfg.sign_refuse) {
            SignOutcome::Refused { code: 1 }
        } else {
            let (signed_payload, tx_hash) = Self::sign_payload(self.cfg.key, &req.raw);
            SignOutcome::Signed { signed_payload, tx_hash }
        };
        let r = SignatureResult { effect_id, withdrawal: req.raw.withdrawal, outcome };
        self.outbox.send(now_us + self.cfg.sign_latency_us, WithdrawalCommand::SignatureResult(r));
    }

    fn sign_raw(&mut self, effect_id: u64, req: &SignRaw, now_us: u64) {
        self.signatures += 1;
        if self.times_out(self.cfg.sign_timeout) {
            return;
        }
        let mut signature = bytes64(self.cfg.key, &req.digest.0).to_le_bytes().to_vec();
        signature.extend_from_slice(&req.digest.0);
        let r = SignatureResult {
            effect_id,
            withdrawal: req.withdrawal,
            outcome: SignOutcome::RawSigned { signature: Blob(signature) },
        };
        self.outbox.send(now_us + self.cfg.sign_latency_us, WithdrawalCommand::SignatureResult(r));
    }

    fn poll(&mut self, now_us: u64, out: &mut Vec<WithdrawalCommand>) {
        self.outbox.poll(now_us, out);
    }
}
