//! Properties over seeds: with every fault of the world on, every withdrawal ends, no
//! withdrawal is paid twice, the money adds up, and replicas replaying the journal hold the
//! very same state (what every center of a cluster does).

use proptest::prelude::*;
use rtgs_core::plugin::Plugin;
use rtgs_withdrawal::chain::ChainFamily;
use rtgs_withdrawal::driver::replay;
use rtgs_withdrawal::world::workload::WorldConfig;

use crate::world::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn every_seed_ends_consistent(seed in 0u64..1_000_000, requests in 10u64..60) {
        let mut fx = WFx::new(ChainFamily::ALL, WorldConfig::faulty(seed, TIME_SCALE));
        for n in 0..requests {
            let (bmi, pc) = fx.wl.request(n).expect("fits");
            fx.d.submit_payload(bmi, rtgs_core::entry::Payload::Plugin(pc));
            fx.d.run_for(30_000, 30_000);
        }
        prop_assert!(fx.run_until(900, WFx::quiescent));
        check_end(&fx);
        let (replica, ledger) = replay(fx.d.journal());
        prop_assert_eq!(Plugin::state_hash(&replica), Plugin::state_hash(fx.p()));
        prop_assert_eq!(ledger.state_hash(), fx.d.ledger.state_hash());
    }
}
