//! Operator alerts derived from state (`alert`): each kind opens and closes as decided —
//! conditions when their condition ends, events after the hold time (or an operator's answer);
//! the open alerts are in the checkpoint and the state hash, so a snapshot restored or a
//! journal replayed on another center holds the same alerts with the same ids.

use proptest::prelude::*;
use rtgs_chain_sim::answer::{BroadcastOutcome, ReceiptStatus, RejectCode};
use rtgs_core::plugin::{Plugin, PluginAlert};
use rtgs_withdrawal::alert::{AlertKind, OpenAlert};
use rtgs_withdrawal::chain::ChainFamily;
use rtgs_withdrawal::checkpoint::{hash_state, read_state, write_state};
use rtgs_withdrawal::command::AmlVerdict;
use rtgs_withdrawal::driver::replay;
use rtgs_withdrawal::operation::OperationKind;
use rtgs_withdrawal::settings::{SettingKey, HOUR_US, SECOND_US};
use rtgs_withdrawal::state::AwaitKind;
use rtgs_withdrawal::status::Status;
use rtgs_withdrawal::types::WithdrawalId;
use rtgs_withdrawal::world::workload::WorldConfig;
use rtgs_withdrawal::WithdrawalPlugin;

use crate::support::*;
use crate::world::{WFx, TIME_SCALE};

fn open(p: &WithdrawalPlugin) -> Vec<OpenAlert> {
    p.alerts_open().copied().collect()
}

fn alert(fx: &Fx, kind: AlertKind, id: WithdrawalId) -> Option<OpenAlert> {
    fx.p().alert_of(kind, id).copied()
}

/// A STALE withdrawal (its last hash pending), its `stale` alert open.
fn stale(fx: &mut Fx) -> WithdrawalId {
    let id = fx.reach(USDC, Status::Broadcasting);
    let hash = fx.last_hash(id);
    fx.broadcast_answer(id, BroadcastOutcome::Accepted);
    fx.make_stale(id, vec![(hash, ReceiptStatus::Pending)]);
    assert_eq!(fx.status(id), Status::Stale);
    id
}

#[test]
fn stale_is_a_condition_open_while_stale_and_closed_when_a_receipt_appears() {
    let mut fx = Fx::new();
    let id = stale(&mut fx);
    let a = alert(&fx, AlertKind::Stale, id).expect("stale opens");
    assert_eq!((a.closes_at_us, a.since_us, a.withdrawal), (None, fx.p().now_us(), id));
    // Long past any hold time, still STALE: still open, the same alert.
    let hold = fx.p().setting(SettingKey::AlertHold) * SECOND_US;
    fx.advance(hold + HOUR_US).tick();
    assert_eq!(fx.status(id), Status::Stale);
    assert_eq!(alert(&fx, AlertKind::Stale, id), Some(a));
    // Dismissing acknowledges events only: the condition holds, so it stays.
    assert_eq!(fx.op(id, OperationKind::Dismiss), None);
    assert_eq!(alert(&fx, AlertKind::Stale, id), Some(a));
    let hash = fx.last_hash(id);
    fx.included(id, hash, 30);
    assert_eq!(fx.status(id), Status::Confirming);
    assert_eq!(alert(&fx, AlertKind::Stale, id), None, "closed when it left STALE");
    fx.check();
}

#[test]
fn a_revert_is_an_event_open_for_the_hold_time_then_closed_by_a_tick() {
    let mut fx = Fx::new();
    fx.set(SettingKey::AlertHold, 600);
    let id = fx.reach(USDC, Status::Confirming);
    let hash = fx.last_hash(id);
    fx.confirmed(id, hash, 10, EVM_CONFIRMATIONS, false);
    assert_eq!(fx.status(id), Status::Failed);
    let a = alert(&fx, AlertKind::Reverted, id).expect("reverted opens");
    assert_eq!(a.closes_at_us, Some(a.since_us + 600 * SECOND_US), "the hold setting");
    fx.advance(600 * SECOND_US - 1).tick();
    assert_eq!(alert(&fx, AlertKind::Reverted, id), Some(a), "open until the hold time");
    fx.advance(1).tick();
    assert_eq!(alert(&fx, AlertKind::Reverted, id), None, "closed by the first tick after it");
    // The withdrawal itself is unchanged by the alert closing.
    assert_eq!(fx.status(id), Status::Failed);
    fx.check();
}

#[test]
fn a_broadcast_rejection_is_an_event_an_operator_answer_acknowledges() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Broadcasting);
    fx.broadcast_answer(id, BroadcastOutcome::Rejected(RejectCode::InsufficientFunds));
    assert_eq!(fx.status(id), Status::Failed);
    let a = alert(&fx, AlertKind::BroadcastRejected, id).expect("broadcast_rejected opens");
    assert!(a.closes_at_us.is_some(), "an event");
    assert_eq!(fx.op(id, OperationKind::Dismiss), None);
    assert_eq!(alert(&fx, AlertKind::BroadcastRejected, id), None, "dismissed: acknowledged");
    assert_eq!(
        fx.op(id, OperationKind::Dismiss).map(|r| r.code),
        Some(rtgs_withdrawal::operation::RefuseCode::NoAlert)
    );
    fx.check();
}

#[test]
fn an_aml_freeze_is_an_event_and_an_aml_alert_a_condition() {
    let mut fx = Fx::new();
    let frozen = fx.reach(USDC, Status::PendingAmlScreening);
    fx.screened(frozen, AmlVerdict::Freeze);
    assert!(alert(&fx, AlertKind::AmlFrozen, frozen).is_some_and(|a| a.closes_at_us.is_some()));
    let waiting = fx.reach(USDC, Status::PendingAmlScreening);
    fx.screened(waiting, AmlVerdict::Alert);
    assert!(alert(&fx, AlertKind::AmlAlert, waiting).is_some_and(|a| a.closes_at_us.is_none()));
    // Cancel ends the condition.
    assert_eq!(fx.op(waiting, OperationKind::Cancel), None);
    assert_eq!(alert(&fx, AlertKind::AmlAlert, waiting), None);
    // The freeze's event outlives nothing: closed after the hold time.
    let hold = fx.p().setting(SettingKey::AlertHold) * SECOND_US;
    fx.advance(hold).tick();
    assert_eq!(alert(&fx, AlertKind::AmlFrozen, frozen), None);
    fx.check();
}

#[test]
fn aml_no_answer_opens_after_unanswered_screenings_and_closes_when_the_screener_answers() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::PendingAmlScreening);
    let timeout = fx.p().setting(SettingKey::AmlTimeout) * SECOND_US;
    let mut rounds = 0;
    while alert(&fx, AlertKind::AmlNoAnswer, id).is_none() {
        assert!(rounds < 5, "no alert after {rounds} unanswered screenings");
        assert_eq!(fx.awaiting(id).kind, AwaitKind::Screen);
        fx.advance(timeout + SECOND_US).tick();
        rounds += 1;
    }
    assert_eq!(rounds, 3, "after three unanswered screenings");
    let a = alert(&fx, AlertKind::AmlNoAnswer, id).expect("open");
    assert_eq!(a.closes_at_us, None, "a condition");
    // Still unanswered: the same alert, however many more screenings go out.
    fx.advance(timeout + SECOND_US).tick();
    assert_eq!(alert(&fx, AlertKind::AmlNoAnswer, id), Some(a));
    fx.screened(id, AmlVerdict::Accept);
    assert_eq!(fx.status(id), Status::PendingAuthorization);
    assert_eq!(alert(&fx, AlertKind::AmlNoAnswer, id), None, "the screener answered");
    fx.check();
}

/// Several alerts open at once: a stale one, a revert, an AML alert.
fn with_alerts() -> Fx {
    let mut fx = Fx::new();
    fx.vaults(EVM, 4);
    stale(&mut fx);
    let reverted = fx.reach(USDC, Status::Confirming);
    let hash = fx.last_hash(reverted);
    fx.confirmed(reverted, hash, 10, EVM_CONFIRMATIONS, false);
    let aml = fx.reach(USDC, Status::PendingAmlScreening);
    fx.screened(aml, AmlVerdict::Alert);
    let kinds: Vec<AlertKind> = open(fx.p()).iter().map(|a| a.kind).collect();
    for k in [AlertKind::Stale, AlertKind::Reverted, AlertKind::AmlAlert] {
        assert!(kinds.contains(&k), "{k:?} open: {kinds:?}");
    }
    fx
}

fn plugin_alerts(p: &WithdrawalPlugin) -> Vec<PluginAlert> {
    let mut out = Vec::new();
    Plugin::alerts_open(p, &mut out);
    out.sort_by_key(|a| a.id);
    out
}

#[test]
fn open_alerts_survive_an_owner_failover_with_the_same_ids() {
    let fx = with_alerts();
    let before = plugin_alerts(fx.p());
    assert_eq!(before.len(), 3);
    // The new owner restored from a snapshot ...
    let mut buf = Vec::new();
    Plugin::encode(fx.p(), &mut buf);
    let restored = WithdrawalPlugin::decode(&buf).expect("decodes");
    assert_eq!(plugin_alerts(&restored), before);
    assert_eq!(open(&restored), open(fx.p()), "ids, times and hold ends alike");
    assert_eq!(restored.alert_id_last(), fx.p().alert_id_last(), "the next id is the same too");
    // ... or from the journal, replayed on another center.
    let (replayed, _) = replay(fx.d.journal());
    assert_eq!(plugin_alerts(&replayed), before);
    assert_eq!(open(&replayed), open(fx.p()));
    assert!(before.iter().all(
        |a| a.plugin == rtgs_core::entry::PluginKind::Withdrawal && a.subject.starts_with("withdrawal:")
    ));
}

#[test]
fn the_state_hash_covers_the_open_alerts() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Broadcasting);
    let before = Plugin::state_hash(fx.p());
    fx.broadcast_answer(id, BroadcastOutcome::Rejected(RejectCode::InsufficientFunds));
    assert!(alert(&fx, AlertKind::BroadcastRejected, id).is_some());
    assert_ne!(Plugin::state_hash(fx.p()), before);
    // The very same state without that alert hashes differently: the alert itself counts.
    let mut buf = Vec::new();
    Plugin::encode(fx.p(), &mut buf);
    let (st, _) = read_state(&buf).expect("decodes");
    assert_eq!(hash_state(&st), Plugin::state_hash(fx.p()));
    let mut without = st.clone();
    without.alerts.clear();
    assert_ne!(hash_state(&without), hash_state(&st));
    let mut later = st.clone();
    for a in later.alerts.values_mut() {
        a.closes_at_us = a.closes_at_us.map(|t| t + 1);
    }
    assert_ne!(hash_state(&later), hash_state(&st), "the hold end counts too");
}

#[test]
fn a_checkpoint_with_an_alert_whose_condition_ended_is_refused() {
    let mut fx = Fx::new();
    let id = stale(&mut fx);
    let hash = fx.last_hash(id);
    fx.included(id, hash, 30);
    let mut buf = Vec::new();
    Plugin::encode(fx.p(), &mut buf);
    let (mut st, _) = read_state(&buf).expect("decodes");
    // Forge the `stale` alert back on a withdrawal that is CONFIRMING now.
    st.alert_id_last += 1;
    let a = OpenAlert {
        id: st.alert_id_last,
        kind: AlertKind::Stale,
        withdrawal: id,
        since_us: st.now_us,
        closes_at_us: None,
    };
    st.alerts.insert(rtgs_withdrawal::alert::AlertKey { kind: a.kind, withdrawal: id }, a);
    let mut bad = Vec::new();
    write_state(&st, &mut bad);
    assert!(WithdrawalPlugin::decode(&bad).is_err(), "an open condition that does not hold");
    // Without it, the same state decodes: the check is about the alert.
    let mut good = Vec::new();
    st.alerts.clear();
    write_state(&st, &mut good);
    assert!(WithdrawalPlugin::decode(&good).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Two hosts replaying the same journal hold the same alerts, at every point of it: the
    /// owner's plugin and a replica replaying each prefix.
    #[test]
    fn replicas_replaying_the_same_journal_hold_the_same_alerts(seed in 0u64..1_000_000, requests in 20u64..50) {
        let mut fx = WFx::new(ChainFamily::ALL, WorldConfig::faulty(seed, TIME_SCALE));
        let mut checkpoints = Vec::new();
        for n in 0..requests {
            let (bmi, pc) = fx.wl.request(n).expect("fits");
            fx.d.submit_payload(bmi, rtgs_core::entry::Payload::Plugin(pc));
            fx.d.run_for(30_000, 30_000);
            if n % 7 == 0 {
                checkpoints.push((fx.d.journal().len(), open(fx.p())));
            }
        }
        prop_assert!(fx.run_until(900, WFx::quiescent));
        checkpoints.push((fx.d.journal().len(), open(fx.p())));
        // Not every faulty world opens an alert (CI found seed 782832 with 21 requests that
        // opens none): such a case has nothing to compare and is set aside, not passed.
        prop_assume!(fx.p().counters().alerts > 0, "a faulty world that opened no alert");
        for (len, alerts) in &checkpoints {
            let (replica, _) = replay(&fx.d.journal()[..*len]);
            prop_assert_eq!(&open(&replica), alerts, "after {} entries", len);
        }
        // The operators saw (and answered) what the state held.
        prop_assert!(fx.d.adapter.alerts().len() as u64 <= fx.p().alert_id_last());
    }
}
