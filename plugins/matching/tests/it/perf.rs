//! A measurement, not a test: 100,000 orders through sessions in simulated time (target: ≤ 10 s
//! of plugin time, release build). The run drives the plugin with its simulators through a real
//! ledger; the figure is the time a fresh replica takes to apply the whole journal again (the
//! plugin's and its intents' work only: no simulator), plus the run itself for reference.
//!
//! `cargo test --release -p rtgs-matching --test it perf -- --ignored --nocapture`

use std::time::Instant;

use rtgs_core::plugin::Plugin;
use rtgs_matching::adapter::Workload;
use rtgs_matching::driver::plugin_of;
use rtgs_matching::lp_sim::LpConfig;
use rtgs_matching::MatchingPlugin;

use crate::props::{run, world};
use crate::support::S;

const ORDERS: u64 = 100_000;

#[test]
#[ignore = "measurement; run in release with --ignored --nocapture"]
fn one_hundred_thousand_orders_through_sessions() {
    let mut w = Workload::new(ORDERS, 500, 42).unwrap_or_else(|e| panic!("{e}"));
    w.order_ttl_us = 900 * S;
    w.seller_funds_minor = 20_000_000;
    // An LP that often has no pool, is sometimes busy and rejects some confirmations: windows
    // close, users decide (or not), bundles are compensated.
    let lp = LpConfig {
        no_pool_ppm: 700_000,
        busy_ppm: 50_000,
        reject_confirm_ppm: 20_000,
        ..LpConfig::default()
    };
    let mut d = world(&w, lp, 42);
    d.adapter.market.cfg.churn_every_us = S / 10;
    let t = Instant::now();
    run_fast(&mut d, &w);
    let run_s = t.elapsed().as_secs_f64();
    let entries = d.journal().len();
    let t = Instant::now();
    let replica = d.replay(MatchingPlugin::new());
    let replay_s = t.elapsed().as_secs_f64();
    let p = plugin_of(&replica);
    assert_eq!(Plugin::state_hash(p), Plugin::state_hash(d.plugin()));
    let mut f = Vec::new();
    Plugin::figures(p, &mut f);
    let fig = |n: &str| f.iter().find(|(k, _)| *k == n).map_or(0, |(_, v)| *v);
    assert_eq!(fig("matching_orders"), ORDERS);
    assert_eq!(fig("matching_double_matches"), 0);
    println!(
        "matching perf: {ORDERS} orders, {} sessions, {} bundles committed ({} compensated), {} completed, {} \
         windows closed unmatched, {} retried by the user, {} auto-closed, {} closed by user, {} cancelled, {} \
         expired; {entries} journal entries over {} s of simulated time; replay (plugin + intents) {replay_s:.2} s; \
         the run with its simulators {run_s:.2} s",
        fig("matching_sessions"),
        fig("matching_bundles_committed"),
        fig("matching_compensated"),
        fig("matching_completed"),
        fig("matching_windows_closed"),
        fig("matching_retries_by_user"),
        fig("matching_auto_closed"),
        fig("matching_closed_by_user"),
        fig("matching_cancelled"),
        fig("matching_expired"),
        (d.now_us() - crate::support::T0) / S,
    );
}

/// `props::run` without the per-step checks (they are O(state)).
fn run_fast(d: &mut crate::props::World, w: &Workload) {
    let _ = run;
    let spread = 100 * S;
    let mut submitted = 0;
    let end = crate::support::T0 + spread + w.order_ttl_us + 120 * S;
    while d.now_us() < end {
        let due =
            ((d.now_us() - crate::support::T0) as u128 * u128::from(w.orders) / u128::from(spread)) as u64;
        while submitted < due.min(w.orders) {
            if let Some((bmi, c)) = w.order(submitted, d.now_us()) {
                d.submit_payload(bmi, rtgs_core::entry::Payload::Plugin(c));
            }
            submitted += 1;
        }
        d.run_for(S, S);
    }
    d.plugin().check_invariants().unwrap_or_else(|e| panic!("{e}"));
}
