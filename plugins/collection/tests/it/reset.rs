//! The operator's relayer nonce reset: refused while the relayer has a nonce in flight (LOCKED
//! during a broadcast), accepted once it is idle, and only forward.

use crate::support::*;
use rtgs_collection::command::{BroadcastOutcome, CollectionCommand, ResetNonce};
use rtgs_collection::state::RejectKind;

const USDT: u128 = 1_000_000;

fn reset(fx: &mut Fx, chain_nonce: u64) {
    fx.cmd(CollectionCommand::ResetNonce(ResetNonce { relayer: RELAYER, chain_nonce }));
}

#[test]
fn a_nonce_reset_waits_for_an_idle_relayer_and_never_goes_back() {
    let mut fx = Fx::new();
    let b = fx.up_to_broadcast(&[(1, USDT, 5), (2, USDT / 2, 6), (3, 3 * USDT / 10, 7)], 10, 18 * USDT / 10);
    assert_eq!(fx.p.relayer(RELAYER).and_then(|r| r.lock).map(|l| l.nonce), Some(0));
    reset(&mut fx, 4);
    assert_eq!(fx.p.counters().rejected.get(&RejectKind::RelayerBusy), Some(&1), "LOCKED: refused");
    assert_eq!(fx.p.relayer(RELAYER).map(|r| r.next_nonce), Some(0));
    fx.broadcast_result(&b, BroadcastOutcome::Accepted);
    assert_eq!(fx.p.relayer(RELAYER).map(|r| (r.next_nonce, r.lock)), Some((1, None)));
    // Idle: the chain shows 4 transactions mined (3 sent from elsewhere) — move forward.
    reset(&mut fx, 4);
    assert_eq!(fx.p.relayer(RELAYER).map(|r| r.next_nonce), Some(4));
    reset(&mut fx, 2);
    assert_eq!(fx.p.counters().rejected.get(&RejectKind::NonceBehind), Some(&1), "backward: refused");
    assert_eq!(fx.p.relayer(RELAYER).map(|r| r.next_nonce), Some(4));
    assert_eq!(fx.p.check_invariants(), Ok(()));
}
