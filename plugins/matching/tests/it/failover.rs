//! Failover: what a new owner executes is exactly what the old one emitted and still awaits
//! (same ids, same bodies, same idempotency keys), whether it took over through `SetOwner` or
//! restarted from a checkpoint; a non-owner executes nothing.

use rtgs_core::entry::{Bmi, CenterId, Entry, Payload, PluginKind};
use rtgs_core::ledger::Ledger;
use rtgs_core::plugin::{Effect, Plugin};
use rtgs_core::plugin_host::{PluginHost, SetOwner};
use rtgs_matching::command::LpAnswer;
use rtgs_matching::effect::MatchingEffect;
use rtgs_matching::state::SessionStatus;
use rtgs_matching::types::ReservationId;
use rtgs_matching::MatchingPlugin;

use crate::support::*;

/// Order 1 committed with the LP's confirmation in flight, and order 2 reserving.
fn in_flight() -> Fx {
    let mut fx = Fx::new();
    fx.order(1, 60_000);
    fx.tick_at(T0 + S);
    fx.advance(180 * S);
    fx.answer_last(LpAnswer::Reserved { reservation: ReservationId(1), expires_at_us: fx.now() + 30 * S });
    fx.order(2, 70_000);
    fx.advance(3 * S);
    fx
}

fn pending(p: &MatchingPlugin) -> Vec<Effect> {
    let mut out = Vec::new();
    Plugin::pending_effects(p, &mut out);
    out
}

#[test]
fn pending_effects_are_exactly_what_was_emitted_and_survive_a_checkpoint() {
    let fx = in_flight();
    let pending = pending(fx.p());
    let kinds: Vec<_> = pending.iter().filter_map(|e| MatchingEffect::from_effect(e).ok()).collect();
    assert!(kinds.iter().any(|e| matches!(e, MatchingEffect::LpConfirm(_))), "{kinds:?}");
    assert_eq!(fx.status(1), SessionStatus::Committed);
    for e in &pending {
        assert!(fx.d.effects().contains(e), "pending {e:?} was never emitted as such");
    }
    let mut buf = Vec::new();
    Plugin::encode(fx.p(), &mut buf);
    let restored = MatchingPlugin::decode(&buf).unwrap_or_else(|_| panic!("decode"));
    assert_eq!(self::pending(&restored), pending, "a restarted owner sends the same");
}

/// Two centers fed the same entries: only the owner queues effects; `SetOwner` hands the other
/// everything pending, identical.
#[test]
fn a_new_owner_takes_over_everything_pending() {
    let fx = in_flight();
    let mut hosts: Vec<(PluginHost, Ledger)> = (1..=2)
        .map(|c| {
            let mut h = PluginHost::new(CenterId(c), vec![Box::new(MatchingPlugin::new())])
                .unwrap_or_else(|e| panic!("{e}"));
            h.set_live();
            (h, Ledger::new())
        })
        .collect();
    let mut queued: Vec<Vec<Effect>> = vec![Vec::new(), Vec::new()];
    for e in fx.d.journal() {
        for (i, (h, l)) in hosts.iter_mut().enumerate() {
            l.apply(e);
            h.apply(e, l);
            h.take_effects(&mut queued[i]);
        }
    }
    assert!(queued[1].is_empty(), "DC2 is not the owner");
    assert_eq!(queued[0], fx.d.effects(), "DC1 emitted what the driver's owner did");
    let cmd = SetOwner { term: 1, owner: CenterId(2) }
        .to_command(PluginKind::Matching)
        .unwrap_or_else(|e| panic!("{e}"));
    let seq = fx.d.journal().len() as u64 + 1;
    let bmi = SetOwner::bmi(PluginKind::Matching, 1).unwrap_or(Bmi::NONE);
    let entry = Entry {
        seq,
        epoch: 1,
        timestamp_us: fx.now(),
        origin: CenterId(2),
        bmi,
        payload: Payload::Plugin(cmd),
    };
    let (h, l) = &mut hosts[1];
    l.apply(&entry);
    h.apply(&entry, l);
    let mut taken = Vec::new();
    h.take_effects(&mut taken);
    assert_eq!(taken, pending(fx.p()), "the new owner executes what the old one awaited");
}
