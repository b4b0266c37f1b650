//! Operations (seed 001 "운영 액션", mission.md §3.2.1): what an operator — or, for `cancel`,
//! the participant who asked — may do to a withdrawal, in which states, and the one code set
//! every refusal of the plugin answers with.
//!
//! | operation    | states                                          | effect |
//! |--------------|-------------------------------------------------|--------|
//! | cancel       | SUBMITTED, PENDING_AML_SCREENING, PENDING_AUTHORIZATION, PENDING_SIGNATURE, QUEUED | CANCELLED, hold released |
//! | drop         | BROADCASTING, STALE (replaceable chains)        | a zero-value same-slot replacement to the vault itself; CANCELLED when it confirms (if the original confirms first, it completes) |
//! | boost        | BROADCASTING, STALE (replaceable chains)        | the same transaction for the same slot at a higher fee (EVM ≥ +10 %, UTXO full RBF) |
//! | retry        | FAILED (nothing of it can still confirm)        | a new round: hold again, QUEUED, `retry_count` + 1 |
//! | rescreen-aml | PENDING_AML_SCREENING, REJECTED by AML          | screened again (from REJECTED: hold again) |
//! | bypass-aml   | PENDING_AML_SCREENING (a reason is required)    | PENDING_AUTHORIZATION |
//! | dismiss      | FAILED, STALE with an open alert                | the alert acknowledged; state unchanged |
//! | edit-notes   | any                                             | the notes replaced |
//!
//! Every operation is appended to the withdrawal's `withdrawal_operations` with its actor and
//! parameters, applied or refused (with the code).

use crate::status::Status;
use crate::types::*;

code_enum! {
    /// `withdrawal_operations.operation`.
    pub enum OperationKind {
        Cancel = 1,
        Retry = 2,
        Boost = 3,
        Drop = 4,
        RescreenAml = 5,
        BypassAml = 6,
        Dismiss = 7,
        EditNotes = 8,
    }
}

impl OperationKind {
    /// The seed's spelling (the API's).
    pub fn name(self) -> &'static str {
        match self {
            OperationKind::Cancel => "cancel",
            OperationKind::Retry => "retry",
            OperationKind::Boost => "boost",
            OperationKind::Drop => "drop",
            OperationKind::RescreenAml => "rescreen-aml",
            OperationKind::BypassAml => "bypass-aml",
            OperationKind::Dismiss => "dismiss",
            OperationKind::EditNotes => "edit-notes",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        OperationKind::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// The states it is allowed in (further conditions are checked with the withdrawal).
    pub fn allowed_states(self) -> &'static [Status] {
        use Status::*;
        match self {
            OperationKind::Cancel => {
                &[Submitted, PendingAmlScreening, PendingAuthorization, PendingSignature, Queued]
            }
            OperationKind::Drop | OperationKind::Boost => &[Broadcasting, Stale],
            OperationKind::Retry => &[Failed],
            OperationKind::RescreenAml => &[PendingAmlScreening, Rejected],
            OperationKind::BypassAml => &[PendingAmlScreening],
            OperationKind::Dismiss => &[Failed, Stale],
            OperationKind::EditNotes => Status::ALL,
        }
    }

    /// Whether a participant (the withdrawal's own requester) may ask for it; every other
    /// operation is an operator's.
    pub fn participant_may(self) -> bool {
        self == OperationKind::Cancel
    }
}

code_enum! {
    pub enum ActorKind {
        Participant = 1,
        Operator = 2,
    }
}

wire_struct! {
    /// Who asked (`actor_user_id`).
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Actor {
        pub kind: ActorKind,
        pub id: ActorId,
    }
}

wire_struct! {
    /// An operation's parameters (`parameters_cbor`): `fee` for boost (required) and drop
    /// (optional: the smallest replacement fee), `reason` for bypass-aml (required, and any
    /// operation may carry one), `notes` for edit-notes (none clears them).
    #[derive(Clone, PartialEq, Eq, Debug, Default)]
    pub struct OpParams {
        pub fee: Option<u64>,
        pub reason: Option<Text>,
        pub notes: Option<Text>,
    }
}

code_enum! {
    /// Why the plugin refused something: a request, an operation, a registration, a setting.
    pub enum RefuseCode {
        Malformed = 1,
        UnknownAsset = 2,
        UnknownChain = 3,
        AmountZero = 4,
        AmountTooLarge = 5,
        /// Sign-only on a chain without a validity window; a raw request with an amount or
        /// AML; a payment without a destination.
        KindNotAllowed = 6,
        InvalidText = 7,
        /// Solana's 600 withdrawals in flight per workspace are reached.
        WorkspaceLimit = 8,
        /// The ledger refused the hold (the ISO reason is recorded with it).
        LedgerRefused = 9,
        UnknownWithdrawal = 10,
        /// The operation is not allowed in the withdrawal's state (§3.2.1).
        StateNotAllowed = 11,
        OperatorOnly = 12,
        /// Another answer is awaited (a signature, a lookup): try again later.
        AnswerAwaited = 13,
        /// The chain has no same-slot replacement (boost and drop are EVM's and UTXO's).
        NotReplaceable = 14,
        /// Below the chain's replacement rule (EVM +10 %, UTXO +1 sat/vB).
        FeeTooLow = 15,
        TooManyAttempts = 16,
        ReasonRequired = 17,
        /// rescreen-aml on a withdrawal REJECTED for another reason.
        NotAmlRejection = 18,
        /// dismiss without an open alert.
        NoAlert = 19,
        TooManyOperations = 20,
        TooManyRetries = 21,
        ChainExists = 22,
        AssetExists = 23,
        VaultExists = 24,
        InvalidChainParams = 25,
        InvalidAssetParams = 26,
        UnknownVault = 27,
        InvalidSetting = 28,
        /// The workspace's chains, assets or vaults are at their limit.
        TooMany = 29,
        /// Another participant's withdrawal.
        NotOwner = 30,
        /// retry while something of it may still confirm.
        ChainNotSettled = 31,
        /// A transition the table does not have (a bug guard: never expected).
        TransitionNotAllowed = 32,
    }
}

impl RefuseCode {
    /// The API's spelling.
    pub fn name(self) -> &'static str {
        match self {
            RefuseCode::Malformed => "malformed",
            RefuseCode::UnknownAsset => "unknown_asset",
            RefuseCode::UnknownChain => "unknown_chain",
            RefuseCode::AmountZero => "amount_zero",
            RefuseCode::AmountTooLarge => "amount_too_large",
            RefuseCode::KindNotAllowed => "kind_not_allowed",
            RefuseCode::InvalidText => "invalid_text",
            RefuseCode::WorkspaceLimit => "workspace_limit",
            RefuseCode::LedgerRefused => "ledger_refused",
            RefuseCode::UnknownWithdrawal => "unknown_withdrawal",
            RefuseCode::StateNotAllowed => "state_not_allowed",
            RefuseCode::OperatorOnly => "operator_only",
            RefuseCode::AnswerAwaited => "answer_awaited",
            RefuseCode::NotReplaceable => "not_replaceable",
            RefuseCode::FeeTooLow => "fee_too_low",
            RefuseCode::TooManyAttempts => "too_many_attempts",
            RefuseCode::ReasonRequired => "reason_required",
            RefuseCode::NotAmlRejection => "not_aml_rejection",
            RefuseCode::NoAlert => "no_alert",
            RefuseCode::TooManyOperations => "too_many_operations",
            RefuseCode::TooManyRetries => "too_many_retries",
            RefuseCode::ChainExists => "chain_exists",
            RefuseCode::AssetExists => "asset_exists",
            RefuseCode::VaultExists => "vault_exists",
            RefuseCode::InvalidChainParams => "invalid_chain_params",
            RefuseCode::InvalidAssetParams => "invalid_asset_params",
            RefuseCode::UnknownVault => "unknown_vault",
            RefuseCode::InvalidSetting => "invalid_setting",
            RefuseCode::TooMany => "too_many",
            RefuseCode::NotOwner => "not_owner",
            RefuseCode::ChainNotSettled => "chain_not_settled",
            RefuseCode::TransitionNotAllowed => "transition_not_allowed",
        }
    }
}

wire_struct! {
    /// A refusal: the code, and the ledger's ISO reason code when the ledger refused.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Refusal {
        pub code: RefuseCode,
        /// `rtgs_core::entry::RejectReason` as its number (`LedgerRefused` only).
        pub ledger_reason: Option<u16>,
    }
}

impl Refusal {
    pub fn of(code: RefuseCode) -> Refusal {
        Refusal { code, ledger_reason: None }
    }

    /// The ledger's ISO 20022 code (`AM04` ...), when the ledger refused.
    pub fn iso_code(&self) -> Option<&'static str> {
        self.ledger_reason.and_then(rtgs_core::entry::RejectReason::from_code).map(|r| r.iso_code())
    }
}

impl From<RefuseCode> for Refusal {
    fn from(code: RefuseCode) -> Refusal {
        Refusal::of(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_only_cancel_is_a_participants() {
        for k in OperationKind::ALL {
            assert_eq!(OperationKind::from_name(k.name()), Some(*k));
            assert_eq!(k.participant_may(), *k == OperationKind::Cancel);
            assert!(!k.allowed_states().is_empty());
        }
        let names: std::collections::BTreeSet<&str> = RefuseCode::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), RefuseCode::ALL.len(), "distinct codes");
    }

    #[test]
    fn the_states_are_section_3_2_1s() {
        use Status::*;
        assert_eq!(
            OperationKind::Cancel.allowed_states(),
            &[Submitted, PendingAmlScreening, PendingAuthorization, PendingSignature, Queued]
        );
        assert_eq!(OperationKind::Drop.allowed_states(), &[Broadcasting, Stale]);
        assert_eq!(OperationKind::Boost.allowed_states(), &[Broadcasting, Stale]);
        assert_eq!(OperationKind::Retry.allowed_states(), &[Failed]);
        assert_eq!(OperationKind::RescreenAml.allowed_states(), &[PendingAmlScreening, Rejected]);
        assert_eq!(OperationKind::BypassAml.allowed_states(), &[PendingAmlScreening]);
        assert_eq!(OperationKind::Dismiss.allowed_states(), &[Failed, Stale]);
        assert_eq!(OperationKind::EditNotes.allowed_states().len(), Status::ALL.len());
    }
}
