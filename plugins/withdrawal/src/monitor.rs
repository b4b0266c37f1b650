//! Time: every `Tick` takes SUBMITTED requests in, fires due timers, dispatches QUEUED
//! withdrawals and archives old final ones — each bounded per tick (`limits`), oldest first.
//!
//! Each withdrawal has at most one timer, derived from its status ([`timer_for`]) and re-armed
//! whenever it changes, all on journal time:
//!
//! | status | timer | when it fires |
//! |---|---|---|
//! | PENDING_AML_SCREENING | screening sent + `aml_timeout` | screened again (an alert after 3 unanswered) |
//! | PENDING_AML_SCREENING, AML alert open | none: the `aml_alert` condition stays open in the state until an operator answers | |
//! | PENDING_AUTHORIZATION | entered + 2 h | FAILED (no approval) |
//! | PENDING_SIGNATURE | entered + 2 h | FAILED (no signature) |
//! | QUEUED | entered + 2 h | FAILED (no slot) |
//! | BROADCASTING, CONFIRMING | last news + stale threshold (or its validity's end + margin) | lookup of every hash of the slot |
//! | STALE | last check + check interval | lookup again |
//! | SIGNED | its validity's end + margin | lookup: seen ⇒ CONFIRMING, else FAILED |
//! | COMPLETED, reorged | reorg report + `reorg_check` | lookup: back, or gone for good |
//!
//! While an answer about a transaction is awaited (a broadcast, a lookup, a replacement's
//! signature) the timer is that answer's: overdue by the stale threshold it is asked again
//! (the same question — the same signed payload), a replacement's signature overdue by the
//! signature timeout is given up (the original stays out). A lost answer is also re-asked by
//! the owner that takes over (`pending_effects`).

use crate::alert::AlertKind;
use crate::command::RequestKind;
use crate::limits::*;
use crate::plugin::{Ctx, WithdrawalPlugin};
use crate::settings::SettingKey;
use crate::state::*;
use crate::status::{Cause, Status};
use crate::types::*;

/// When `w`'s monitor looks at it next (see the module docs).
pub(crate) fn timer_for(w: &Withdrawal, st: &State) -> Option<u64> {
    let s = &st.settings;
    let after = |since: u64, key: SettingKey| Some(since.saturating_add(s.us(key)));
    match w.status {
        Status::PendingAmlScreening => match w.awaiting {
            Some(a) if a.kind == AwaitKind::Screen => after(a.since_us, SettingKey::AmlTimeout),
            // Otherwise an AML alert waits for a human: open in the state, no timer.
            _ => None,
        },
        Status::PendingAuthorization => after(w.status_since_us, SettingKey::AuthorizationTimeout),
        Status::PendingSignature => after(w.status_since_us, SettingKey::SignatureTimeout),
        Status::Queued => after(w.status_since_us, SettingKey::QueuedTimeout),
        Status::Broadcasting | Status::Stale | Status::Confirming | Status::Signed | Status::Completed
            if w.awaiting.is_some() =>
        {
            // An answer overdue (a signer that never signs a replacement, an RPC that never
            // answers): given up or asked again, so the chain is watched again.
            let a = w.awaiting?;
            let key = if a.kind == AwaitKind::SignReplacement {
                SettingKey::SignatureTimeout
            } else {
                SettingKey::StaleThreshold
            };
            after(a.since_us, key)
        }
        Status::Broadcasting | Status::Stale | Status::Confirming | Status::Signed => {
            let every = if w.status == Status::Stale {
                SettingKey::StaleCheckInterval
            } else {
                SettingKey::StaleThreshold
            };
            let stale = if w.status == Status::Signed { None } else { after(w.watch_since_us, every) };
            let validity = w
                .chain_validity_expires_at_us
                .filter(|_| w.status != Status::Confirming)
                .and_then(|v| after(v, SettingKey::BroadcastMargin));
            match (stale, validity) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        Status::Completed => match (w.reorg_since_us, w.audited) {
            (Some(t), _) => after(t, SettingKey::ReorgCheck),
            (None, false) => after(w.watch_since_us, SettingKey::ReorgCheck),
            (None, true) => None,
        },
        _ => None,
    }
}

impl WithdrawalPlugin {
    pub(crate) fn on_tick(&mut self, cx: &mut Ctx<'_, '_>) {
        self.tick_alerts(cx.now);
        self.intake(cx);
        self.fire_timers(cx);
        let chains: Vec<ChainId> = self.st.chains.keys().copied().collect();
        let mut budget = DISPATCH_PER_TICK_MAX;
        for chain in chains {
            budget -= self.dispatch_chain(cx, chain, budget);
        }
        self.archive(cx.now);
    }

    /// SUBMITTED → PENDING_AUTHORIZATION (authorization asked), or → COMPLETED for a raw
    /// signing request whose signature is cached.
    fn intake(&mut self, cx: &mut Ctx<'_, '_>) {
        let ids: Vec<WithdrawalId> = self.ix.submitted.iter().take(INTAKE_PER_TICK_MAX).copied().collect();
        for id in ids {
            if !cx.has_room(EFFECTS_PER_WITHDRAWAL_STEP_MAX) {
                break;
            }
            let Some(mut w) = self.take(id) else { continue };
            let cached = match w.kind {
                RequestKind::Raw(d) => self.st.raw_cache.get(&d).map(|(_, sig)| sig.clone()),
                _ => None,
            };
            let _ = match cached {
                Some(sig) => {
                    let _ = w.raw_signature.set(sig);
                    self.complete(cx, &mut w, Cause::CachedSignature)
                }
                None => self.move_to(cx, &mut w, Status::PendingAuthorization, Cause::TakenIn).map(|_| {
                    self.ask(cx, &mut w, AwaitKind::Authorize, 0);
                }),
            };
            self.put(w);
        }
    }

    fn fire_timers(&mut self, cx: &mut Ctx<'_, '_>) {
        let now = cx.now;
        let due: Vec<WithdrawalId> = self
            .ix
            .timers
            .iter()
            .take_while(|(t, _)| *t <= now)
            .take(TIMERS_PER_TICK_MAX)
            .map(|(_, id)| *id)
            .collect();
        for id in due {
            if !cx.has_room(EFFECTS_PER_WITHDRAWAL_STEP_MAX) {
                break;
            }
            let Some(mut w) = self.take(id) else { continue };
            if w.timer_us.is_none_or(|t| t > now) {
                // An earlier timer of this tick moved it on (a freed slot dispatched it).
                self.put(w);
                continue;
            }
            self.st.counters.timers += 1;
            self.fire(cx, &mut w);
            let chain = w.chain;
            let freed = w.status == Status::Failed;
            self.put(w);
            if freed {
                self.dispatch_chain(cx, chain, 1);
            }
        }
    }

    fn fire(&mut self, cx: &mut Ctx<'_, '_>, w: &mut Withdrawal) {
        if let (true, Some(a)) = (w.status.on_chain() || w.status == Status::Completed, w.awaiting) {
            self.st.counters.answers_overdue += 1;
            if a.kind == AwaitKind::SignReplacement {
                // The replacement never came: the original is still out, watched as before.
                w.awaiting = None;
                w.pending_raw = None;
                w.watch_since_us = cx.now;
            } else {
                self.ask(cx, w, a.kind, a.attempt);
            }
            return;
        }
        let _ = match w.status {
            Status::PendingAmlScreening if w.awaiting.is_some() => {
                w.aml_unanswered += 1;
                if w.aml_unanswered == AML_ATTEMPTS_BEFORE_ALERT {
                    self.alert(cx, w, AlertKind::AmlNoAnswer);
                }
                self.ask(cx, w, AwaitKind::Screen, 0);
                Ok(())
            }
            Status::PendingAuthorization => self.fail(cx, w, Cause::AuthorizationTimeout, None),
            Status::PendingSignature => self.fail(cx, w, Cause::SignatureTimeout, None),
            Status::Queued => self.fail(cx, w, Cause::QueuedTimeout, None),
            Status::Broadcasting | Status::Stale | Status::Confirming | Status::Signed => {
                self.ask(cx, w, AwaitKind::Lookup, 0);
                Ok(())
            }
            Status::Completed => {
                self.ask(cx, w, AwaitKind::ReorgLookup, 0);
                Ok(())
            }
            _ => Ok(()),
        };
    }

    /// Final withdrawals beyond `TERMINAL_KEPT_MAX` leave the state once `ARCHIVE_AFTER_US`
    /// old: the journal keeps them (it is never deleted), the state does not grow for ever.
    fn archive(&mut self, now: u64) {
        let mut n = 0;
        while n < ARCHIVE_PER_TICK_MAX && self.ix.finished.len() > TERMINAL_KEPT_MAX {
            let Some(&(at, id)) = self.ix.finished.first() else { break };
            if at.saturating_add(ARCHIVE_AFTER_US) > now {
                break;
            }
            self.close_all(id);
            if let Some(w) = self.take(id) {
                for a in &w.attempts {
                    self.ix.tx_index.remove(a.tx_hash());
                }
            }
            self.st.counters.archived += 1;
            n += 1;
        }
    }
}
