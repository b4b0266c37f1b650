//! The transition table, walked: from every state, every move the table has works and every
//! other is refused with `TransitionNotAllowed`, changing nothing.

use rtgs_withdrawal::operation::RefuseCode;
use rtgs_withdrawal::status::{self, Cause, Status, TRANSITIONS};
use rtgs_withdrawal::types::AssetId;

use crate::support::*;

fn asset_for(s: Status) -> AssetId {
    if s == Status::Signed {
        SOLA
    } else {
        USDC
    }
}

#[test]
fn every_allowed_pair_moves_and_every_other_pair_is_refused() {
    let (mut allowed, mut refused) = (0, 0);
    for from in Status::ALL {
        let mut fx = Fx::new();
        // A vault each: an ordered vault signs one withdrawal at a time.
        fx.vaults(EVM, Status::ALL.len() as u64);
        fx.vaults(SOL, 3);
        let ids: Vec<_> = Status::ALL.iter().map(|_| fx.reach(asset_for(*from), *from)).collect();
        for (to, id) in Status::ALL.iter().zip(ids) {
            let before = fx.w(id).clone();
            let result = fx.d.plugin.probe_transition(id, *to, Cause::Created);
            if status::check(Some(*from), *to).is_ok() {
                assert_eq!(result, Ok(()), "{from:?} -> {to:?}");
                assert_eq!(fx.status(id), *to);
                let last = fx.w(id).transitions.last().expect("recorded");
                assert_eq!((*last.from(), *last.to()), (Some(*from), *to));
                allowed += 1;
            } else {
                assert_eq!(
                    result.map_err(|r| r.code),
                    Err(RefuseCode::TransitionNotAllowed),
                    "{from:?} -> {to:?}"
                );
                assert_eq!(fx.w(id), &before, "a refused move changes nothing");
                refused += 1;
            }
        }
    }
    let between = TRANSITIONS.iter().filter(|t| t.from.is_some()).count();
    assert_eq!(allowed, between);
    assert_eq!(allowed + refused, Status::ALL.len() * Status::ALL.len());
}

#[test]
fn only_submitted_and_pending_aml_screening_begin_a_withdrawal() {
    for to in Status::ALL {
        let initial = matches!(to, Status::Submitted | Status::PendingAmlScreening);
        assert_eq!(status::check(None, *to).is_ok(), initial, "{to:?}");
    }
    let mut fx = Fx::new();
    let plain = fx.create(fx.request(USDC, 5, rtgs_withdrawal::command::RequestKind::Standard, false));
    let screened = fx.create(fx.request(USDC, 5, rtgs_withdrawal::command::RequestKind::Standard, true));
    for (id, first) in [(plain, Status::Submitted), (screened, Status::PendingAmlScreening)] {
        let t = fx.w(id).transitions.get(0).expect("creation recorded");
        assert_eq!((*t.from(), *t.to(), *t.cause()), (None, first, Cause::Created));
    }
}
