//! Chain rules (mission.md §3.2): round-robin across vaults skipping unhealthy ones, EVM nonce
//! order, Solana's 5 per vault and 600 per workspace, Bitcoin's unconfirmed chain, Tezos's one
//! operation per account, validity windows.

use rtgs_chain_sim::answer::{BroadcastOutcome, ReceiptStatus};
use rtgs_withdrawal::chain::*;
use rtgs_withdrawal::command::*;
use rtgs_withdrawal::operation::RefuseCode;
use rtgs_withdrawal::records::VaultSkip;
use rtgs_withdrawal::settings::{HOUR_US, MINUTE_US, SECOND_US};
use rtgs_withdrawal::status::{Cause, Status};
use rtgs_withdrawal::types::*;
use rtgs_withdrawal::WithdrawalEffect;

use crate::support::*;

/// Approves `n` new withdrawals of `asset`; their ids.
fn approved(fx: &mut Fx, asset: AssetId, n: usize) -> Vec<WithdrawalId> {
    let ids: Vec<_> =
        (0..n).map(|_| fx.create(fx.request(asset, 10, RequestKind::Standard, false))).collect();
    fx.tick();
    for id in &ids {
        fx.decided(*id, None);
    }
    ids
}

/// Signs and sends (accepted) a withdrawal waiting for its signature.
fn send(fx: &mut Fx, id: WithdrawalId) -> TxHash {
    let h = fx.signed(id);
    fx.broadcast_answer(id, BroadcastOutcome::Accepted);
    h
}

#[test]
fn round_robin_skips_busy_and_stale_vaults_and_records_why() {
    let mut fx = Fx::new();
    fx.vaults(EVM, 2); // vaults 1, 104, 105 on EVM
    let ids = approved(&mut fx, USDC, 4);
    let vaults: Vec<_> = ids.iter().map(|id| fx.w(*id).vault).collect();
    assert_eq!(vaults[..3], [Some(VaultId(1)), Some(VaultId(104)), Some(VaultId(105))]);
    // The 4th found every vault signing: QUEUED (nothing recorded until a vault is chosen).
    assert_eq!(fx.status(ids[3]), Status::Queued);
    // Vault 1's withdrawal goes out, then STALE: the next choice skips it and says why.
    let h = send(&mut fx, ids[0]);
    assert_eq!(fx.status(ids[3]), Status::PendingSignature, "a freed slot dispatches the queue");
    assert_eq!(fx.w(ids[3]).vault, Some(VaultId(1)));
    send(&mut fx, ids[3]);
    send(&mut fx, ids[1]);
    send(&mut fx, ids[2]);
    fx.make_stale(ids[0], vec![(h, ReceiptStatus::Pending)]);
    assert_eq!(fx.status(ids[0]), Status::Stale);
    assert_eq!(fx.p().vault_skip(VaultId(1)), Some(VaultSkip::Stale));
    // The cursor is at vault 1: the next two go to 104 and 105, the third comes round to 1,
    // passes it over (STALE) and takes 104 again.
    for expected in [104, 105] {
        let next = approved(&mut fx, USDC, 1)[0];
        assert_eq!(fx.w(next).vault, Some(VaultId(expected)));
        send(&mut fx, next);
    }
    let next = approved(&mut fx, USDC, 1)[0];
    let choice = fx.w(next).vault_choices.get(0).expect("recorded").clone();
    assert_eq!(*choice.vault(), VaultId(104));
    assert_eq!(
        (choice.skipped().clone(), *choice.skipped_total()),
        (vec![(VaultId(1), VaultSkip::Stale)], 1)
    );
}

#[test]
fn evm_nonces_are_consecutive_per_vault_and_a_disabled_vault_is_skipped() {
    let mut fx = Fx::new();
    let ids = approved(&mut fx, USDC, 3);
    assert_eq!(fx.status(ids[1]), Status::Queued, "one unsent nonce per vault");
    send(&mut fx, ids[0]);
    send(&mut fx, ids[1]);
    send(&mut fx, ids[2]);
    let slots: Vec<_> = ids.iter().map(|id| fx.w(*id).slot).collect();
    assert_eq!(slots, vec![Some(0), Some(1), Some(2)]);
    fx.vaults(EVM, 1);
    fx.cmd(WithdrawalCommand::SetVaultEnabled(SetVaultEnabled { vault: VaultId(1), enabled: false }));
    let first = approved(&mut fx, USDC, 1)[0];
    assert_eq!(fx.w(first).vault, Some(VaultId(104)));
    send(&mut fx, first);
    // Round from 104 to 1 (disabled) and back to 104.
    let next = approved(&mut fx, USDC, 1)[0];
    let choice = fx.w(next).vault_choices.get(0).expect("recorded").clone();
    assert_eq!(
        (*choice.vault(), choice.skipped().clone()),
        (VaultId(104), vec![(VaultId(1), VaultSkip::Disabled)])
    );
}

#[test]
fn solana_allows_five_in_flight_per_vault_the_sixth_waits_queued_and_fails_after_two_hours() {
    let mut fx = Fx::new();
    let ids = approved(&mut fx, SOLA, 6);
    for id in &ids[..5] {
        assert_eq!(fx.status(*id), Status::PendingSignature, "unordered slots: several sign at once");
    }
    assert_eq!(fx.status(ids[5]), Status::Queued);
    assert_eq!(fx.p().vault_skip(VaultId(2)), Some(VaultSkip::InFlightLimit));
    for id in &ids[..5] {
        send(&mut fx, *id);
    }
    assert_eq!(fx.status(ids[5]), Status::Queued, "sent but not final: still in flight");
    fx.advance(2 * HOUR_US + SECOND_US).tick();
    assert_eq!((fx.status(ids[5]), fx.w(ids[5]).fail_cause), (Status::Failed, Some(Cause::QueuedTimeout)));
}

#[test]
fn solana_refuses_requests_beyond_600_in_flight_per_workspace() {
    let mut fx = Fx::new();
    for _ in 0..600 {
        let id = fx.create(fx.request(SOLA, 1, RequestKind::Standard, false));
        assert!(fx.p().withdrawal(id).is_some());
    }
    let id = fx.create(fx.request(SOLA, 1, RequestKind::Standard, false));
    assert_eq!(fx.p().refusal(id).map(|r| r.code), Some(RefuseCode::WorkspaceLimit));
    // Another chain is not limited.
    let evm = fx.create(fx.request(USDC, 1, RequestKind::Standard, false));
    assert!(fx.p().withdrawal(evm).is_some());
}

#[test]
fn bitcoin_keeps_at_most_25_unconfirmed_per_vault_and_a_confirmation_frees_one() {
    let mut fx = Fx::new();
    let ids = approved(&mut fx, BTC, 26);
    // One signs at a time (ordered change chain); each sent one frees the signing slot.
    let mut hashes = Vec::new();
    for id in &ids[..25] {
        assert_eq!(fx.status(*id), Status::PendingSignature, "{id:?}");
        hashes.push(send(&mut fx, *id));
    }
    assert_eq!(fx.status(ids[25]), Status::Queued);
    assert_eq!(fx.p().vault_in_flight(VaultId(3)), 25);
    assert_eq!(fx.p().vault_skip(VaultId(3)), Some(VaultSkip::InFlightLimit));
    fx.included(ids[0], hashes[0], 50);
    assert_eq!(fx.status(ids[25]), Status::PendingSignature, "in a block is no longer unconfirmed");
}

#[test]
fn bitcoins_limit_is_configurable_for_nodes_with_cluster_limits() {
    let mut fx = Fx::new();
    let mut p = ChainParams::defaults(ChainId(9), ChainFamily::Utxo, 10, text("core-31"));
    p.vault_in_flight_max = 64;
    fx.cmd(WithdrawalCommand::RegisterChain(p.clone()));
    assert_eq!(fx.p().chain(ChainId(9)).map(|c| c.vault_in_flight_max), Some(64));
    p.chain = ChainId(10);
    p.vault_in_flight_max = 65;
    fx.cmd(WithdrawalCommand::RegisterChain(p));
    assert!(fx.p().chain(ChainId(10)).is_none(), "beyond the cluster limit is refused");
}

#[test]
fn tezos_has_one_operation_per_account_in_the_mempool() {
    let mut fx = Fx::new();
    let ids = approved(&mut fx, XTZ, 2);
    let h = send(&mut fx, ids[0]);
    assert_eq!(fx.status(ids[1]), Status::Queued, "the second waits for the first's block");
    fx.included(ids[0], h, 7);
    assert_eq!(fx.status(ids[1]), Status::PendingSignature);
}

#[test]
fn validity_windows_are_the_chains_and_a_passed_one_fails_and_can_be_retried() {
    let mut fx = Fx::new();
    let windows = [
        (ChainFamily::Algorand, 50 * MINUTE_US),
        (ChainFamily::Tezos, 30 * MINUTE_US),
        (ChainFamily::Polkadot, 2 * HOUR_US),
    ];
    for (i, (family, window)) in windows.iter().enumerate() {
        let chain = ChainId(20 + i as u32);
        let asset = AssetId(20 + i as u32);
        fx.cmd(WithdrawalCommand::RegisterChain(ChainParams::defaults(chain, *family, 1, text("n"))));
        fx.cmd(WithdrawalCommand::RegisterAsset(AssetParams {
            asset,
            chain,
            token: TokenId(1),
            currency: CurrencyCode(*b"USD"),
            scale_exp: 0,
            settlement_account: LedgerAccount(SETTLEMENT),
        }));
        fx.vault(30 + i as u64, chain);
        let id = approved(&mut fx, asset, 1)[0];
        let effects = fx.take_effects();
        let sign = effects.iter().find_map(|(_, e)| match e {
            WithdrawalEffect::Sign(s) => Some(s.clone()),
            _ => None,
        });
        assert_eq!(sign.and_then(|s| s.raw.valid_until_us), Some(fx.d.now_us() + window), "{family:?}");
        let h = send(&mut fx, id);
        // The stale monitor first (30 min), then past the window: unknown ⇒ FAILED, retryable.
        fx.advance(*window + MINUTE_US).tick();
        if fx.w(id).awaiting.is_none() {
            fx.tick();
        }
        fx.looked(id, 100, Some(0), vec![(h, ReceiptStatus::Unknown)]);
        if fx.status(id) == Status::Stale {
            fx.advance(MINUTE_US).tick();
            fx.looked(id, 100, Some(0), vec![(h, ReceiptStatus::Unknown)]);
        }
        assert_eq!(
            (fx.status(id), fx.w(id).fail_cause),
            (Status::Failed, Some(Cause::ValidityPassed)),
            "{family:?}"
        );
        assert_eq!(fx.op(id, rtgs_withdrawal::operation::OperationKind::Retry), None);
        fx.take_effects();
    }
}

#[test]
fn a_broadcast_past_validity_is_refused_by_the_chain_and_fails() {
    let mut fx = Fx::new();
    let id = approved(&mut fx, SOLA, 1)[0];
    fx.signed(id);
    fx.broadcast_answer(id, BroadcastOutcome::Rejected(rtgs_chain_sim::answer::RejectCode::Expired));
    assert_eq!((fx.status(id), fx.w(id).fail_cause), (Status::Failed, Some(Cause::ValidityPassed)));
}
