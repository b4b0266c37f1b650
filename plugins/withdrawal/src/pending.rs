//! The effects still awaited, rebuilt from the state ([`Plugin::pending_effects`]: what a new
//! owner executes again), and the report figures.
//!
//! An effect that expects an answer is built by one function, [`effect_of`], from the
//! withdrawal's fields and what it awaits — the same function when it is first emitted and
//! when it is rebuilt — so a new owner sends exactly the same request: the same raw
//! transaction to sign (the signer answers with the same signed payload), the same signed
//! payload to broadcast (the node answers "already known"), the same lookup. Alerts are not
//! effects: they are state (`alert`), which a new owner holds already.
//!
//! [`Plugin::pending_effects`]: rtgs_core::plugin::Plugin::pending_effects

use rtgs_core::plugin::Effect;

use crate::command::RequestKind;
use crate::effect::*;
use crate::plugin::WithdrawalPlugin;
use crate::state::*;
use crate::status::Status;

/// The effect a withdrawal waiting for `kind` (about `attempt`) asks for.
pub(crate) fn effect_of(
    w: &Withdrawal,
    kind: AwaitKind,
    attempt: u32,
    st: &State,
) -> Option<WithdrawalEffect> {
    let e = match kind {
        AwaitKind::Screen => WithdrawalEffect::Screen(Screen {
            withdrawal: w.id,
            account: w.account,
            asset: w.asset,
            chain: w.chain,
            amount_chain: w.amount_chain,
            destination_type: w.destination_type,
            destination: w.destination.clone()?,
        }),
        AwaitKind::Authorize => WithdrawalEffect::Authorize(Authorize {
            withdrawal: w.id,
            account: w.account,
            asset: w.asset,
            chain: w.chain,
            amount_chain: w.amount_chain,
            destination: w.destination.clone(),
            kind: w.kind,
        }),
        AwaitKind::Sign | AwaitKind::SignReplacement => {
            let raw = w.pending_raw.clone()?;
            let sign_only = kind == AwaitKind::Sign && w.kind == RequestKind::SignOnly;
            WithdrawalEffect::Sign(Sign { raw, sign_only })
        }
        AwaitKind::SignRaw => {
            let RequestKind::Raw(digest) = w.kind else { return None };
            WithdrawalEffect::SignRaw(SignRaw { withdrawal: w.id, chain: w.chain, digest })
        }
        AwaitKind::Broadcast => {
            let a = w.attempt(attempt)?;
            let node = a.sent_to().clone().or_else(|| st.chains.get(&w.chain).map(|c| c.node.clone()))?;
            WithdrawalEffect::Broadcast(Broadcast {
                withdrawal: w.id,
                attempt,
                chain: w.chain,
                node,
                tx_hash: *a.tx_hash(),
                signed_payload: a.signed_payload().clone(),
            })
        }
        AwaitKind::Check | AwaitKind::Lookup | AwaitKind::ReorgLookup => {
            let vault_address = w.vault.and_then(|v| st.vaults.get(&v)).map_or(0, |v| v.params.address);
            WithdrawalEffect::Lookup(Lookup {
                withdrawal: w.id,
                chain: w.chain,
                vault_address,
                slot: w.slot,
                hashes: w.round_attempts().map(|a| *a.tx_hash()).collect(),
            })
        }
    };
    Some(e)
}

pub(crate) fn pending_effects(p: &WithdrawalPlugin, out: &mut Vec<Effect>) {
    let mut all: Vec<Effect> = Vec::new();
    for w in p.st.withdrawals.values() {
        let Some(a) = w.awaiting else { continue };
        if let Some(e) = effect_of(w, a.kind, a.attempt, &p.st) {
            all.push(e.to_effect(a.effect_id));
        }
    }
    // In the order they were emitted.
    all.sort_by_key(|e| e.effect_id);
    out.extend(all);
}

pub(crate) fn figures(p: &WithdrawalPlugin, out: &mut Vec<(&'static str, u64)>) {
    let count = |s: Status| p.count_in(s) as u64;
    let c = &p.st.counters;
    let open = p.st.withdrawals.values().filter(|w| !w.status.is_final()).count() as u64;
    let refused: u64 = p.st.refusals.len() as u64;
    out.extend([
        ("withdrawal_requests", c.requests),
        ("withdrawal_refused", refused),
        ("withdrawal_open", open),
        ("withdrawal_queued", count(Status::Queued)),
        ("withdrawal_completed", count(Status::Completed)),
        ("withdrawal_cancelled", count(Status::Cancelled)),
        ("withdrawal_failed", count(Status::Failed)),
        ("withdrawal_rejected", count(Status::Rejected)),
        ("withdrawal_blocked", count(Status::Blocked)),
        ("withdrawal_stale", count(Status::Stale)),
        ("withdrawal_signed", count(Status::Signed)),
        ("withdrawal_reversed", c.reversals),
        ("withdrawal_broadcasts", c.broadcasts),
        ("withdrawal_resends", c.resends),
        ("withdrawal_alerts", c.alerts),
        ("withdrawal_alerts_open", p.st.alerts.len() as u64),
        ("withdrawal_operations_applied", c.operations_applied),
        ("withdrawal_results_ignored", c.results_ignored),
        ("withdrawal_archived", c.archived),
    ]);
}
