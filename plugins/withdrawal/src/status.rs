//! The withdrawal's states and the one table of transitions between them.
//!
//! [`TRANSITIONS`] is every move the seed's diagram draws plus the ones mission.md §3.2 and
//! §3.2.1 decide (QUEUED, STALE, SIGNED's outcomes, raw signing, the operations' moves, the
//! reorg of a COMPLETED withdrawal). Nothing else: every status change of the plugin goes
//! through [`check`], and a pair the table does not have is refused with
//! [`TransitionRefused`] and changes nothing (`tests/it/table.rs` walks every pair).

code_enum! {
    /// `withdrawals` status (the seed's names, Fireblocks' meanings; SIGNED and STALE are ours).
    pub enum Status {
        Submitted = 1,
        PendingAmlScreening = 2,
        PendingAuthorization = 3,
        PendingSignature = 4,
        Queued = 5,
        Broadcasting = 6,
        Confirming = 7,
        Completed = 8,
        Cancelled = 9,
        Blocked = 10,
        Rejected = 11,
        Failed = 12,
        Signed = 13,
        Stale = 14,
    }
}

impl Status {
    /// The seed's spelling (the API's).
    pub fn name(self) -> &'static str {
        match self {
            Status::Submitted => "SUBMITTED",
            Status::PendingAmlScreening => "PENDING_AML_SCREENING",
            Status::PendingAuthorization => "PENDING_AUTHORIZATION",
            Status::PendingSignature => "PENDING_SIGNATURE",
            Status::Queued => "QUEUED",
            Status::Broadcasting => "BROADCASTING",
            Status::Confirming => "CONFIRMING",
            Status::Completed => "COMPLETED",
            Status::Cancelled => "CANCELLED",
            Status::Blocked => "BLOCKED",
            Status::Rejected => "REJECTED",
            Status::Failed => "FAILED",
            Status::Signed => "SIGNED",
            Status::Stale => "STALE",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Status::ALL.iter().copied().find(|s| s.name() == name)
    }

    /// Nothing more happens by itself (an operation or a reorg may still move it: retry,
    /// rescreen-aml, a COMPLETED transaction reorged away).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Status::Completed | Status::Cancelled | Status::Blocked | Status::Rejected | Status::Failed
        )
    }

    /// A transaction of it may be out on the chain.
    pub fn on_chain(self) -> bool {
        matches!(self, Status::Broadcasting | Status::Stale | Status::Confirming | Status::Signed)
    }
}

/// One allowed move, and what makes it.
#[derive(Copy, Clone, Debug)]
pub struct Transition {
    /// `None`: the withdrawal is created in `to`.
    pub from: Option<Status>,
    pub to: Status,
    pub why: &'static str,
}

const fn t(from: Status, to: Status, why: &'static str) -> Transition {
    Transition { from: Some(from), to, why }
}

use Status::*;

/// Every allowed transition (see the module docs). The seed's diagram first, then §3.2 and
/// §3.2.1's.
pub const TRANSITIONS: &[Transition] = &[
    // The seed's diagram.
    Transition { from: None, to: Submitted, why: "created without AML" },
    Transition { from: None, to: PendingAmlScreening, why: "created with AML" },
    t(PendingAmlScreening, PendingAuthorization, "screening passed (or bypass-aml)"),
    t(PendingAmlScreening, Rejected, "screening rejected or froze it"),
    t(Submitted, PendingAuthorization, "taken in: authorization asked"),
    t(PendingAuthorization, PendingSignature, "approved, a vault slot free: signature asked"),
    t(PendingAuthorization, Blocked, "the policy engine blocked it"),
    t(PendingAuthorization, Failed, "no approval within 2 h"),
    t(PendingSignature, Broadcasting, "signed and broadcast"),
    t(PendingSignature, Signed, "signed only: the customer broadcasts"),
    t(PendingSignature, Cancelled, "cancel"),
    t(
        PendingSignature,
        Failed,
        "no signature within 2 h, the signer refused, or it would expire before broadcast",
    ),
    t(Broadcasting, Confirming, "in a block (webhook, or the stale monitor's receipt)"),
    t(Broadcasting, Cancelled, "the drop confirmed"),
    t(Confirming, Completed, "the chain's confirmation threshold"),
    t(Confirming, Failed, "reverted, or reorged away and its slot used by another transaction"),
    // mission.md §3.2: QUEUED waits for a chain slot (Solana's 6th, a busy or unhealthy vault).
    t(PendingAuthorization, Queued, "approved, no vault slot free"),
    t(Queued, PendingSignature, "a vault slot freed: signature asked"),
    t(Queued, Failed, "no slot within 2 h"),
    // §3.2.1: cancel before broadcast.
    t(Submitted, Cancelled, "cancel"),
    t(PendingAmlScreening, Cancelled, "cancel"),
    t(PendingAuthorization, Cancelled, "cancel"),
    t(Queued, Cancelled, "cancel"),
    // §3.2.1: STALE.
    t(Broadcasting, Stale, "stale monitor: no receipt for any hash of its slot"),
    t(
        Broadcasting,
        Failed,
        "refused for certain, reverted, slot used by another transaction, or validity passed",
    ),
    t(Stale, Confirming, "a receipt appeared"),
    t(Stale, Cancelled, "the drop confirmed"),
    t(Stale, Failed, "the chain shows nothing of it can confirm"),
    // §3.2.1: SIGNED, raw signing, cached signatures.
    t(Signed, Confirming, "seen on chain within its validity"),
    t(Signed, Failed, "its validity passed unseen"),
    t(PendingSignature, Completed, "raw signing: signed"),
    t(Submitted, Completed, "raw signing: the signature was cached"),
    // §3.2.1: operations and reorgs.
    t(Rejected, PendingAmlScreening, "rescreen-aml"),
    t(Failed, Queued, "retry: a new round, nothing of the old one can confirm"),
    t(Completed, Failed, "reorged away for good: the settlement is reversed"),
];

/// A move the table does not have.
#[derive(Copy, Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("transition {} -> {} is not allowed", from.map_or("(new)", Status::name), to.name())]
pub struct TransitionRefused {
    pub from: Option<Status>,
    pub to: Status,
}

/// Whether `from → to` is in the table.
pub fn check(from: Option<Status>, to: Status) -> Result<&'static Transition, TransitionRefused> {
    TRANSITIONS.iter().find(|t| t.from == from && t.to == to).ok_or(TransitionRefused { from, to })
}

code_enum! {
    /// Why a transition happened (recorded with it).
    pub enum Cause {
        Created = 1,
        ScreenPassed = 2,
        ScreenRejected = 3,
        ScreenFrozen = 4,
        AmlBypassed = 5,
        AmlRescreened = 6,
        TakenIn = 7,
        CachedSignature = 8,
        Authorized = 9,
        PolicyBlocked = 10,
        AuthorizationTimeout = 11,
        SlotAssigned = 12,
        QueuedTimeout = 13,
        SignedAndBroadcast = 14,
        SignedOnly = 15,
        RawSigned = 16,
        SignatureTimeout = 17,
        SignatureExpired = 18,
        SignatureRefused = 19,
        Cancel = 20,
        Included = 21,
        MissedWebhook = 22,
        Threshold = 23,
        Reverted = 24,
        DropConfirmed = 25,
        SlotUsedElsewhere = 26,
        ValidityPassed = 27,
        BroadcastRejected = 28,
        NoReceipt = 29,
        ReceiptAppeared = 30,
        ReorgedAway = 31,
        Retry = 32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_no_duplicates_and_names_round_trip() {
        for (i, a) in TRANSITIONS.iter().enumerate() {
            for b in &TRANSITIONS[i + 1..] {
                assert!(!(a.from == b.from && a.to == b.to), "{a:?} twice");
            }
            assert_ne!(a.from, Some(a.to), "no self-loops: an unchanged status is not a transition");
        }
        for s in Status::ALL {
            assert_eq!(Status::from_name(s.name()), Some(*s));
        }
    }

    #[test]
    fn every_state_is_reachable_and_only_completed_cancelled_blocked_end_for_good() {
        for s in Status::ALL {
            assert!(TRANSITIONS.iter().any(|t| t.to == *s), "{s:?} unreachable");
        }
        let leaves: Vec<Status> =
            Status::ALL.iter().copied().filter(|s| !TRANSITIONS.iter().any(|t| t.from == Some(*s))).collect();
        assert_eq!(leaves, vec![Cancelled, Blocked]);
    }
}
