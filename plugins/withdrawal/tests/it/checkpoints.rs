//! Checkpoints and replay: the state encodes and decodes to the same state (hash and indexes),
//! a damaged or inconsistent checkpoint is refused, a journal replayed anywhere gives the same
//! state, and the effects still awaited are rebuilt exactly as they were emitted — what a new
//! owner executes again after a failover.

use rtgs_core::plugin::{Effect, Plugin};
use rtgs_withdrawal::driver::replay;
use rtgs_withdrawal::status::Status;
use rtgs_withdrawal::WithdrawalPlugin;

use crate::support::*;

/// A fixture with a withdrawal in every state.
fn everything() -> Fx {
    let mut fx = Fx::new();
    fx.vaults(EVM, 16);
    fx.vaults(SOL, 2);
    for s in Status::ALL {
        if *s != Status::Queued && *s != Status::Failed {
            fx.reach(if *s == Status::Signed { SOLA } else { USDC }, *s);
        }
    }
    fx.reach(BTC, Status::Failed);
    fx.reach(XTZ, Status::Queued);
    fx
}

#[test]
fn a_checkpoint_decodes_to_the_same_state() {
    let fx = everything();
    let p = fx.p();
    let mut buf = Vec::new();
    Plugin::encode(p, &mut buf);
    let back = WithdrawalPlugin::decode(&buf).expect("decodes");
    assert_eq!(Plugin::state_hash(&back), Plugin::state_hash(p));
    assert_eq!(Plugin::digest(&back), Plugin::digest(p));
    back.check_invariants().expect("indexes rebuilt equal");
    let mut again = Vec::new();
    Plugin::encode(&back, &mut again);
    assert_eq!(again, buf);
}

#[test]
fn damaged_checkpoints_are_refused_never_a_panic() {
    let fx = everything();
    let mut buf = Vec::new();
    Plugin::encode(fx.p(), &mut buf);
    assert!(WithdrawalPlugin::decode(&[]).is_err());
    assert!(WithdrawalPlugin::decode(&[9]).is_err(), "unknown version");
    for cut in (0..buf.len()).step_by(97) {
        assert!(WithdrawalPlugin::decode(&buf[..cut]).is_err(), "cut at {cut}");
    }
    let mut refused = 0;
    for i in (1..buf.len()).step_by(13) {
        let mut bad = buf.clone();
        bad[i] ^= 0x5A;
        // A flipped byte either fails to decode or decodes to a different state.
        match WithdrawalPlugin::decode(&bad) {
            Err(_) => refused += 1,
            Ok(p) => assert_ne!(Plugin::state_hash(&p), Plugin::state_hash(fx.p())),
        }
    }
    assert!(refused > 0);
}

#[test]
fn replaying_the_journal_gives_the_same_plugin_state_and_ledger() {
    let fx = everything();
    let (p, ledger) = replay(fx.d.journal());
    assert_eq!(Plugin::state_hash(&p), Plugin::state_hash(fx.p()));
    assert_eq!(ledger.state_hash(), fx.d.ledger.state_hash());
    assert_eq!(ledger.held_total_minor(), fx.d.ledger.held_total_minor());
}

#[test]
fn pending_effects_are_rebuilt_exactly_as_emitted() {
    let fx = everything();
    let mut pending: Vec<Effect> = Vec::new();
    Plugin::pending_effects(fx.p(), &mut pending);
    assert!(!pending.is_empty());
    for e in &pending {
        let emitted = fx.d.effects().iter().find(|x| x.effect_id == e.effect_id).expect("emitted before");
        assert_eq!(emitted, e, "same id, same body");
    }
    let awaiting = fx.p().withdrawals().filter(|w| w.awaiting.is_some()).count();
    assert_eq!(pending.len(), awaiting, "one per awaited answer; alerts are not pending");
    // A decoded checkpoint awaits the same.
    let mut buf = Vec::new();
    Plugin::encode(fx.p(), &mut buf);
    let back = WithdrawalPlugin::decode(&buf).expect("decodes");
    let mut again = Vec::new();
    Plugin::pending_effects(&back, &mut again);
    assert_eq!(again, pending);
}

#[test]
fn entries_apply_once_and_garbage_is_a_recorded_rejection() {
    let mut fx = Fx::new();
    let before = rtgs_core::plugin::Plugin::state_hash(fx.p());
    fx.d.submit_payload(rtgs_core::entry::Bmi::new(b"BAD").expect("valid"), garbage());
    assert_ne!(rtgs_core::plugin::Plugin::state_hash(fx.p()), before);
    assert_eq!(
        fx.p().rejections_recent().last().map(|(_, r)| r.code),
        Some(rtgs_withdrawal::operation::RefuseCode::Malformed)
    );
    // An entry at or below the applied seq is ignored.
    let entry = fx.d.journal().last().cloned().expect("an entry");
    let hash = Plugin::state_hash(fx.p());
    let mut p = fx.d.plugin.clone();
    let mut ledger = fx.d.ledger.clone();
    let (mut fx_e, mut log) = (Vec::new(), Vec::new());
    let mut step = rtgs_core::plugin::Step::new(
        entry.seq,
        rtgs_core::entry::PluginKind::Withdrawal,
        &mut fx_e,
        &mut ledger,
        &mut log,
    );
    Plugin::apply(&mut p, &entry, &mut step);
    assert_eq!(Plugin::state_hash(&p), hash);
}
