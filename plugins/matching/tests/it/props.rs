//! Properties over random runs against the simulators (a faulty LP, sellers coming and going,
//! users deciding or not): after every step the plugin's invariants hold, its holds are exactly
//! the ledger's and money is conserved; at the end no order is matched twice, every bundle
//! covers its order exactly, and a replica fed the same journal holds the identical state.
//! Re-executing every pending effect at any point (a new owner) changes no outcome.

use std::collections::BTreeMap;

use proptest::prelude::*;
use rtgs_core::entry::PluginKind;
use rtgs_core::plugin::{Effect, HostedPlugin, Plugin};
use rtgs_matching::adapter::{NodeAdapter, Workload};
use rtgs_matching::driver::{plugin_of, Driver};
use rtgs_matching::lp_sim::{LpConfig, LpSim, ResStatus};
use rtgs_matching::state::*;
use rtgs_matching::MatchingPlugin;

use crate::support::{holds_in_ledger, holds_of_state, S, T0};

pub type World = Driver<NodeAdapter<LpSim>>;

/// A world with the workload's accounts and settings in place.
pub fn world(w: &Workload, lp: LpConfig, seed: u64) -> World {
    let mut d = Driver::new(MatchingPlugin::new(), w.adapter(lp, seed), T0);
    for (bmi, payload) in w.setup_payloads() {
        d.submit_payload(bmi, payload);
    }
    for (bmi, c) in w.setup_commands() {
        d.submit_payload(bmi, rtgs_core::entry::Payload::Plugin(c));
    }
    d
}

pub fn check_step(d: &World) {
    let p = d.plugin();
    p.check_invariants().unwrap_or_else(|e| panic!("at {}: {e}", d.now_us()));
    d.ledger().check_conservation().unwrap_or_else(|e| panic!("conservation: {e:?}"));
    assert_eq!(holds_of_state(p), holds_in_ledger(d), "holds at {}", d.now_us());
}

/// Every pending effect is one that was emitted, byte for byte (a new owner sends the same).
pub fn check_pending(d: &World) {
    let emitted: BTreeMap<u64, &Effect> = d.effects().iter().map(|e| (e.effect_id, e)).collect();
    let mut pending = Vec::new();
    Plugin::pending_effects(d.plugin(), &mut pending);
    for e in &pending {
        assert_eq!(emitted.get(&e.effect_id).copied(), Some(e), "pending effect not as emitted");
    }
}

/// Submits `orders` orders over `spread_us`, ticking every second, re-executing everything
/// pending every `reexecute_every` ticks (0: never); then runs until every order is over.
pub fn run(d: &mut World, w: &Workload, spread_us: u64, reexecute_every: u64) {
    let mut submitted = 0;
    let mut ticks = 0u64;
    let end = T0 + spread_us + w.order_ttl_us + 120 * S;
    while d.now_us() < end {
        let due = ((d.now_us() - T0) as u128 * u128::from(w.orders) / u128::from(spread_us.max(1))) as u64;
        while submitted < due.min(w.orders) {
            if let Some((bmi, c)) = w.order(submitted, d.now_us()) {
                d.submit_payload(bmi, rtgs_core::entry::Payload::Plugin(c));
            }
            submitted += 1;
        }
        d.run_for(S, S);
        ticks += 1;
        check_step(d);
        if reexecute_every > 0 && ticks.is_multiple_of(reexecute_every) {
            check_pending(d);
            let mut pending = Vec::new();
            Plugin::pending_effects(d.plugin(), &mut pending);
            d.reexecute(&pending);
        }
    }
}

/// End checks: nothing matched twice, no order left in flight, the LP holds nothing the plugin
/// does not know, and a replica of the journal agrees.
pub fn check_end(d: &World) {
    let p = d.plugin();
    assert_eq!(rtgs_matching::double_matches(p), 0);
    for o in p.orders() {
        assert!(
            !matches!(o.status, OrderStatus::Open | OrderStatus::Matching),
            "order {:?} still {:?}",
            o.id,
            o.status
        );
    }
    let recorded: Vec<_> = p.trades().map(|t| t.escrow).collect();
    for (r, escrow) in d.adapter.lp.escrows() {
        let known = recorded.contains(&escrow) || p.escalations().any(|c| c.escrow == Some(escrow));
        assert!(known, "escrow {escrow:?} of reservation {r:?} is known to nobody");
    }
    for (id, r) in &d.adapter.lp.reservations {
        assert!(
            !matches!(r.status, ResStatus::Reserved) || r.expires_at_us <= d.now_us(),
            "reservation {id:?} still held at the end: {r:?}"
        );
    }
    let replica = d.replay(MatchingPlugin::new());
    let again = plugin_of(&replica);
    assert_eq!(HostedPlugin::state_hash(again), HostedPlugin::state_hash(p), "replay disagrees");
    assert_eq!(replica.ledger().state_hash(), d.ledger().state_hash());
    let mut buf = Vec::new();
    Plugin::encode(p, &mut buf);
    let back = MatchingPlugin::decode(&buf).unwrap_or_else(|_| panic!("checkpoint"));
    assert_eq!(Plugin::state_hash(&back), Plugin::state_hash(p));
    assert_eq!(d.replica.host().plugin(PluginKind::Matching).map(|x| x.kind()), Some(PluginKind::Matching));
}

fn workload(seed: u64, orders: u64, sellers: u64) -> Workload {
    let mut w =
        Workload::new(orders, sellers, seed).unwrap_or_else(|e| panic!("{e}")).with_windows(20, 15, 10);
    w.order_ttl_us = 240 * S;
    w.seller_funds_minor = 600_000;
    w
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_runs_keep_every_invariant(
        seed in any::<u64>(),
        orders in 1u64..40,
        sellers in 0u64..6,
        faulty in any::<bool>(),
        capacity in prop_oneof![Just(u64::MAX / 4), 300_000u64..2_000_000],
        no_pool_ppm in prop_oneof![Just(0u32), Just(300_000), Just(900_000)],
    ) {
        let w = workload(seed, orders, sellers);
        let lp = if faulty { LpConfig::faulty() } else { LpConfig::default() };
        let mut d = world(&w, LpConfig { capacity_minor: capacity, no_pool_ppm, ..lp }, seed);
        d.adapter.market.cfg.churn_every_us = 7 * S;
        d.adapter.market.cfg.leave_ppm = 200_000;
        d.adapter.market.cfg.never_pay_ppm = 50_000;
        run(&mut d, &w, 120 * S, 0);
        check_end(&d);
    }

    /// A new owner at any time re-executes everything pending: same effects, same keys, so no
    /// LP call is doubled in effect and every outcome stays consistent.
    #[test]
    fn reexecuting_pending_effects_is_harmless(seed in any::<u64>(), every in 1u64..20) {
        let w = workload(seed, 25, 3);
        let mut d = world(&w, LpConfig::faulty(), seed);
        run(&mut d, &w, 90 * S, every);
        check_end(&d);
    }
}

/// Re-execution is visible at the LP: replays, not new reservations.
#[test]
fn reexecution_is_answered_by_replays() {
    let w = workload(7, 20, 2);
    let mut d = world(&w, LpConfig::default(), 7);
    run(&mut d, &w, 60 * S, 3);
    check_end(&d);
    assert!(d.adapter.lp.stats.replays > 0, "{:?}", d.adapter.lp.stats);
    let reservations_per_key: BTreeMap<_, usize> =
        d.adapter.lp.reservations.values().fold(BTreeMap::new(), |mut m, r| {
            *m.entry(r.key).or_default() += 1;
            m
        });
    assert!(reservations_per_key.values().all(|n| *n == 1), "one reservation per key");
}
