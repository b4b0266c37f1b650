//! A measurement, not a test: 100,000 withdrawals through their whole lifecycle with every
//! fault of the world on (target: ≤ 10 s of plugin time), then the journal replayed into
//! three replicas — three centers — which must hold the very same state. The replay is plugin
//! time (and the ledger's holds), nothing else: no world, no driver.
//!
//! `cargo test --release -p rtgs-withdrawal --test it perf -- --ignored --nocapture`
//! (`WITHDRAWALS=N` for another count).

use std::time::Instant;

use rtgs_core::plugin::Plugin;
use rtgs_withdrawal::chain::ChainFamily;
use rtgs_withdrawal::driver::replay;
use rtgs_withdrawal::status::Status;
use rtgs_withdrawal::world::workload::WorldConfig;

use crate::world::*;

#[test]
#[ignore = "measurement; run in release with --ignored --nocapture"]
fn lifecycle_of_100k_withdrawals_with_faults() {
    let n: u64 = std::env::var("WITHDRAWALS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let mut fx = WFx::sized(ChainFamily::ALL, WorldConfig::faulty(42, TIME_SCALE), 1_000, 100);
    let started = Instant::now();
    // 1,000 requests per 10 ms of journal time (100,000 a second).
    for batch in 0..n.div_ceil(1_000) {
        for k in 0..1_000.min(n - batch * 1_000) {
            let (bmi, pc) = fx.wl.request(batch * 1_000 + k).expect("fits");
            fx.d.submit_payload(bmi, rtgs_core::entry::Payload::Plugin(pc));
        }
        fx.d.run_for(10_000, 10_000);
    }
    let mut steps = 0;
    while !WFx::quiescent(fx.p()) && steps < 100_000 {
        fx.d.run_for(STEP_US, STEP_US);
        steps += 1;
    }
    let driven_s = started.elapsed().as_secs_f64();
    let open: Vec<_> = fx
        .p()
        .withdrawals()
        .filter(|w| !w.is_settled_final())
        .take(5)
        .map(|w| {
            (
                w.id,
                w.status,
                w.awaiting,
                w.timer_us,
                w.vault,
                w.transitions.iter().map(|t| *t.cause()).collect::<Vec<_>>(),
            )
        })
        .collect();
    assert!(WFx::quiescent(fx.p()), "every withdrawal ended: {open:?} at {}", fx.d.now_us());
    fx.check();
    check_end(&fx);
    let journal = fx.d.journal().to_vec();
    let mut hashes = Vec::new();
    let mut replay_s = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let (p, ledger) = replay(&journal);
        replay_s.push(t.elapsed().as_secs_f64());
        hashes.push((Plugin::state_hash(&p), ledger.state_hash()));
    }
    assert!(hashes.iter().all(|h| *h == hashes[0]), "identical state on every replica");
    let p = fx.p();
    println!(
        "withdrawal perf: {n} withdrawals, {} journal entries; driven with the world in {driven_s:.1} s; \
         replayed (plugin + ledger holds) in {:.2} / {:.2} / {:.2} s; identical state {:016x}; \
         requests {} refused {} completed {} cancelled {} failed {} rejected {} blocked {} reversed {} broadcasts {}",
        journal.len(),
        replay_s[0],
        replay_s[1],
        replay_s[2],
        hashes[0].0,
        p.counters().requests,
        p.counters().refused.values().sum::<u64>(),
        p.count_in(Status::Completed),
        p.count_in(Status::Cancelled),
        p.count_in(Status::Failed),
        p.count_in(Status::Rejected),
        p.count_in(Status::Blocked),
        p.counters().reversals,
        p.counters().broadcasts,
    );
}
