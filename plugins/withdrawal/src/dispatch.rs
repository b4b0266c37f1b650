//! Vault round-robin and slots (seed 001 "Round-Robin 운영", §3.2).
//!
//! Per chain, the dispatcher takes the vault after the one it chose last, in id order, skipping
//! the unhealthy ones: disabled, with a STALE withdrawal (§3.2.1: a vault with a stuck
//! transaction gets no new one — on an EVM chain a stuck nonce blocks every later one anyway),
//! at its chain's in-flight limit (Solana's 5, Tezos's 1, UTXO's unconfirmed chain, ...), or —
//! on chains whose slots are ordered — with a withdrawal between slot and broadcast (so a slot
//! given back is always the vault's last: no nonce gap). The choice and the vaults passed over
//! are recorded with the withdrawal (`vault_choices`).
//!
//! QUEUED withdrawals wait per chain, first come first served; they are dispatched whenever a
//! slot may have freed (a broadcast answered, a withdrawal ended, a vault registered or enabled)
//! and at every tick.

use crate::effect::RawTx;
use crate::limits::*;
use crate::plugin::{Ctx, WithdrawalPlugin};
use crate::records::*;
use crate::state::*;
use crate::status::{Cause, Status};
use crate::types::*;

/// The dispatcher's pick: a vault and what it passed over.
pub(crate) struct Choice {
    vault: VaultId,
    skipped: Vec<(VaultId, VaultSkip)>,
    skipped_total: u32,
}

impl WithdrawalPlugin {
    /// Why `vault` may not get a new transaction now (`None`: it may).
    pub(crate) fn skip_reason(&self, vault: VaultId) -> Option<VaultSkip> {
        let v = self.st.vaults.get(&vault)?;
        let chain = self.st.chains.get(&v.params.chain)?;
        if !v.enabled {
            return Some(VaultSkip::Disabled);
        }
        if self.ix.vault_stale.contains_key(&vault) {
            return Some(VaultSkip::Stale);
        }
        if chain.family.ordered_slots() && self.ix.vault_unsent.contains_key(&vault) {
            return Some(VaultSkip::Signing);
        }
        let in_flight = self.ix.vault_in_flight.get(&vault).copied().unwrap_or(0);
        if in_flight >= chain.vault_in_flight_max {
            return Some(VaultSkip::InFlightLimit);
        }
        None
    }

    pub(crate) fn chain_has_queue(&self, chain: ChainId) -> bool {
        self.first_queued(chain).is_some()
    }

    fn first_queued(&self, chain: ChainId) -> Option<WithdrawalId> {
        self.ix
            .queued
            .range((chain, 0, WithdrawalId(0))..)
            .next()
            .filter(|(c, _, _)| *c == chain)
            .map(|(_, _, id)| *id)
    }

    /// Whether some vault of `chain` is free: the cache's vaults are asked, the busy ones
    /// leave it (see `WithdrawalPlugin::maybe_free`).
    fn some_vault_free(&mut self, chain: ChainId) -> bool {
        let Some(cached) = self.maybe_free.get(&chain) else { return false };
        let candidates: Vec<VaultId> = cached.iter().copied().collect();
        for v in candidates {
            if self.skip_reason(v).is_none() {
                return true;
            }
            if let Some(s) = self.maybe_free.get_mut(&chain) {
                s.remove(&v);
            }
        }
        false
    }

    /// The next healthy vault of `chain` after the last one chosen (wrapping), if any.
    pub(crate) fn choose_vault(&mut self, chain: ChainId) -> Option<Choice> {
        if !self.some_vault_free(chain) {
            return None;
        }
        let vaults = self.ix.chain_vaults.get(&chain)?;
        let start = self.st.rr_cursor.get(&chain).copied();
        let after = start.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let upto = start.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Included);
        let order = vaults
            .range((after, std::ops::Bound::Unbounded))
            .chain(vaults.range((std::ops::Bound::Unbounded, upto)));
        let mut skipped = Vec::new();
        let mut skipped_total = 0u32;
        for v in order {
            match self.skip_reason(*v) {
                None => return Some(Choice { vault: *v, skipped, skipped_total }),
                Some(why) => {
                    skipped_total += 1;
                    if skipped.len() < VAULT_SKIPS_RECORDED_MAX {
                        skipped.push((*v, why));
                    }
                }
            }
        }
        None
    }

    /// Gives `w` the chosen vault's next slot and asks for the signature of its payment.
    pub(crate) fn assign_slot(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal, choice: Choice) {
        let Some(chain) = self.st.chains.get(&w.chain).cloned() else { return };
        let Some(token) = self.st.assets.get(&w.asset).map(|a| a.token) else { return };
        let Some(vault) = self.st.vaults.get_mut(&choice.vault) else { return };
        let slot = vault.next_slot;
        vault.next_slot += 1;
        let vault_address = vault.params.address;
        self.st.rr_cursor.insert(w.chain, choice.vault);
        w.vault_choices.push(VaultChoice::new(
            w.round,
            choice.vault,
            slot,
            choice.skipped,
            choice.skipped_total,
            cx.now,
        ));
        w.vault = Some(choice.vault);
        w.slot = Some(slot);
        w.slot_unsent = true;
        w.fee = chain.fee_initial;
        // The validity starts when the signature is asked for: approvals came first, so the
        // window is not spent waiting for approvers (the seed's "경합" of approval vs. window).
        let valid_until =
            (chain.validity_window_us > 0).then(|| cx.now.saturating_add(chain.validity_window_us));
        w.chain_validity_expires_at_us = valid_until;
        w.pending_raw = Some(RawTx {
            withdrawal: w.id,
            round: w.round,
            attempt: w.attempts.len() as u32 + 1,
            purpose: Purpose::Payment,
            chain: w.chain,
            family: chain.family,
            vault: choice.vault,
            vault_address,
            slot,
            destination: w.destination.clone(),
            memo: w.memo.clone(),
            token,
            amount_chain: w.amount_chain,
            fee: chain.fee_initial,
            valid_until_us: valid_until,
        });
        self.ask(cx, w, AwaitKind::Sign, 0);
    }

    /// Dispatches QUEUED withdrawals of `chain`, oldest first, while a vault is free (at most
    /// `budget`, and as many as this entry's effect ids allow).
    pub(crate) fn dispatch_chain(&mut self, cx: &mut Ctx<'_, '_>, chain: ChainId, budget: usize) -> usize {
        let mut done = 0;
        while done < budget && cx.has_room(EFFECTS_PER_WITHDRAWAL_STEP_MAX) {
            let Some(id) = self.first_queued(chain) else { break };
            // The head waits for the same vaults as everyone behind it: if it cannot go, none can.
            let Some(choice) = self.choose_vault(chain) else { break };
            let Some(mut w) = self.take(id) else { break };
            let moved = self.move_to(cx, &mut w, Status::PendingSignature, Cause::SlotAssigned);
            if moved.is_ok() {
                self.assign_slot(cx, &mut w, choice);
            }
            self.put(w);
            done += 1;
        }
        done
    }

    /// The validity a new signature would have now (for the docs and tests).
    pub fn validity_from_now(&self, chain: ChainId) -> Option<u64> {
        let c = self.st.chains.get(&chain)?;
        (c.validity_window_us > 0).then(|| self.st.now_us + c.validity_window_us)
    }
}
