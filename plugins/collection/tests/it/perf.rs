//! A measurement, not a test: how long a scheduled `Tick` over 100,000 queued wallets takes to
//! emit every balance read (target ≤ 100 ms of plugin time, release build).
//!
//! `CARGO_TARGET_DIR=/work/target-plugin cargo test --release -p rtgs-collection --test it \
//!  perf -- --ignored --nocapture`

use std::time::Instant;

use rtgs_collection::effect::CollectionEffect;
use rtgs_collection::settings::HOUR_US;
use rtgs_collection::CollectionPlugin;
use rtgs_core::entry::{Bmi, CenterId, Entry, Payload};
use rtgs_core::plugin::Plugin;

use crate::support::*;

const WALLETS: u64 = 100_000;

fn entry(seq: u64, t: u64, payload: Payload) -> Entry {
    Entry { seq, epoch: 1, timestamp_us: t, origin: CenterId(1), bmi: Bmi::NONE, payload }
}

#[test]
#[ignore = "measurement; run in release with --ignored --nocapture"]
fn scheduled_tick_over_100k_wallets() {
    let mut fx = Fx::new();
    fx.check = false;
    fx.relayer(RELAYER, 0);
    let setup = Instant::now();
    for i in 0..WALLETS {
        fx.deposit(i + 1, wallet(i), 2 * USDT, 1);
    }
    let setup_ms = setup.elapsed().as_secs_f64() * 1e3;
    let p: &mut CollectionPlugin = &mut fx.p;
    let tick = entry(fx.seq + 1, START_US + HOUR_US, Payload::Tick);
    let mut effects = Vec::with_capacity(512);
    let t = Instant::now();
    p.apply_entry(&tick, &mut effects);
    let tick_ms = t.elapsed().as_secs_f64() * 1e3;
    let groups: usize = effects
        .iter()
        .map(|e| match CollectionEffect::from_effect(e) {
            Ok(CollectionEffect::ReadBalances(r)) => r.groups.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(groups as u64, WALLETS);
    let t = Instant::now();
    let hash = p.state_hash();
    let hash_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut buf = Vec::new();
    let t = Instant::now();
    p.encode(&mut buf);
    let encode_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let back = CollectionPlugin::decode(&buf).expect("decodes");
    let decode_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(back.state_hash(), hash);
    println!(
        "collection perf: {WALLETS} wallets queued ({setup_ms:.0} ms to apply the deposits); \
         scheduled Tick emitted {} ReadBalances effects covering {groups} groups in {tick_ms:.1} ms; \
         state_hash {hash_ms:.1} ms, encode {encode_ms:.1} ms ({} bytes), decode+index {decode_ms:.1} ms",
        effects.len(),
        buf.len()
    );
}
