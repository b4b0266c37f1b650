//! Journal entry types: what the sequencer stamps and every center applies.
//!
//! An [`Entry`] is a [`Command`] (what a participant or operator asked for, with its idempotency
//! key `bmi` and the center it came in through) plus the sequencer's stamp: gap-free `seq`, leader
//! `epoch` and `timestamp_us`, which is the only "now" any state machine ever sees.

use crate::limits::{BMI_BYTES_MAX, PLUGIN_BODY_BYTES_MAX};
use std::fmt;

/// Global, gap-free position in the journal; the first entry has seq 1.
pub type Seq = u64;

/// A data center, numbered from 1 (`DC1`). The tally keeps one bit per center.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct CenterId(pub u8);

impl CenterId {
    /// Zero-based index, for arrays of per-center state.
    pub fn index(self) -> usize {
        usize::from(self.0).saturating_sub(1)
    }
    pub fn from_index(index: usize) -> Self {
        CenterId(u8::try_from(index + 1).unwrap_or(u8::MAX))
    }
}

impl fmt::Display for CenterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DC{}", self.0)
    }
}

/// An account number. Opaque to the core.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct AccountId(pub u64);

/// An ISO 4217 alphabetic currency code.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Currency([u8; 3]);

impl Currency {
    pub fn new(code: &[u8]) -> Result<Self, InputError> {
        match code {
            [a, b, c] if code.iter().all(u8::is_ascii_uppercase) => Ok(Currency([*a, *b, *c])),
            _ => Err(InputError::Currency),
        }
    }
    pub fn as_bytes(&self) -> [u8; 3] {
        self.0
    }
    pub fn as_str(&self) -> &str {
        // Only ASCII uppercase letters get in through `new`.
        std::str::from_utf8(&self.0).unwrap_or("???")
    }
}

impl fmt::Debug for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The business message id (ISO 20022 `BizMsgIdr`, `Max35Text`): the idempotency key.
///
/// Stored inline (no allocation on the hot path). Printable ASCII only, 1 to
/// [`BMI_BYTES_MAX`] bytes: a text of at most 35 (`BMI_TEXT_BYTES_MAX`) with, for a
/// participant's entry, the participant scope the API puts before it; the empty value is
/// reserved for entries the sequencer makes itself (`Tick`).
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct Bmi {
    len: u8,
    bytes: [u8; BMI_BYTES_MAX],
}

impl Bmi {
    /// The id of sequencer-made entries.
    pub const NONE: Bmi = Bmi { len: 0, bytes: [0; BMI_BYTES_MAX] };

    pub fn new(text: &[u8]) -> Result<Self, InputError> {
        if text.is_empty() || text.len() > BMI_BYTES_MAX {
            return Err(InputError::BmiLength);
        }
        if !text.iter().all(|b| (0x21..=0x7e).contains(b)) {
            return Err(InputError::BmiCharacters);
        }
        let mut bytes = [0; BMI_BYTES_MAX];
        bytes[..text.len()].copy_from_slice(text);
        Ok(Bmi { len: text.len() as u8, bytes })
    }

    /// `prefix` followed by the decimal digits of `n` (load generators); `prefix` must be valid.
    pub fn numbered(prefix: &str, n: u64) -> Result<Self, InputError> {
        let mut buf = [0u8; BMI_BYTES_MAX + 20];
        let p = prefix.as_bytes();
        if p.len() > BMI_BYTES_MAX {
            return Err(InputError::BmiLength);
        }
        buf[..p.len()].copy_from_slice(p);
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        let mut v = n;
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        let d = &digits[i..];
        buf[p.len()..p.len() + d.len()].copy_from_slice(d);
        Bmi::new(&buf[..p.len() + d.len()])
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
    /// As text, borrowed (only printable ASCII gets in through `new`).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }
    pub fn is_none(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for Bmi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Bmi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A credit transfer between two accounts of the same currency.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Transfer {
    pub debtor: AccountId,
    pub creditor: AccountId,
    pub amount_minor: u64,
    pub currency: Currency,
}

/// The plugins this node knows (a closed set: a `match` shows them all).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
#[repr(u8)]
pub enum PluginKind {
    Collection = 1,
    Withdrawal = 2,
    Matching = 3,
}

impl PluginKind {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(PluginKind::Collection),
            2 => Some(PluginKind::Withdrawal),
            3 => Some(PluginKind::Matching),
            _ => None,
        }
    }

    /// The stored name (`plugin_state.kind`).
    pub fn name(self) -> &'static str {
        match self {
            PluginKind::Collection => "collection",
            PluginKind::Withdrawal => "withdrawal",
            PluginKind::Matching => "matching",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [PluginKind::Collection, PluginKind::Withdrawal, PluginKind::Matching]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

/// A typed envelope for a plugin's own commands; the plugin owns the body's format.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PluginCommand {
    pub plugin: PluginKind,
    /// The plugin's own command code.
    pub op: u16,
    pub body: Vec<u8>,
}

impl PluginCommand {
    pub fn new(plugin: PluginKind, op: u16, body: Vec<u8>) -> Result<Self, InputError> {
        if body.len() > PLUGIN_BODY_BYTES_MAX {
            return Err(InputError::PluginBodyTooLarge);
        }
        Ok(PluginCommand { plugin, op, body })
    }
}

/// What an entry asks for.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Payload {
    Transfer(Transfer),
    AccountOpen {
        account: AccountId,
        currency: Currency,
    },
    /// Brings money into the system (a central-bank funding leg); the only way money appears.
    AccountFund {
        account: AccountId,
        amount_minor: u64,
    },
    /// Closes an account whose balance is zero.
    AccountClose {
        account: AccountId,
    },
    /// Deterministic time passing: timers in state machines fire on it.
    Tick,
    Plugin(PluginCommand),
}

/// A request before sequencing.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Command {
    pub origin: CenterId,
    pub bmi: Bmi,
    pub payload: Payload,
}

/// A sequenced journal entry.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Entry {
    pub seq: Seq,
    pub epoch: u32,
    pub timestamp_us: u64,
    pub origin: CenterId,
    pub bmi: Bmi,
    pub payload: Payload,
}

impl Entry {
    /// A `Tick`: made by the sequencer, so it has no `bmi`.
    pub fn tick(seq: Seq, epoch: u32, timestamp_us: u64, origin: CenterId) -> Entry {
        Entry { seq, epoch, timestamp_us, origin, bmi: Bmi::NONE, payload: Payload::Tick }
    }
}

/// ISO 20022 `ExternalStatusReason1Code` values we use, plus proprietary `RTnn` codes for account
/// administration and ledger holds, which ISO leaves to the scheme.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
#[repr(u16)]
pub enum RejectReason {
    /// AC01 IncorrectAccountNumber: the account does not exist.
    UnknownAccount = 1,
    /// AC04 ClosedAccountNumber.
    ClosedAccount = 2,
    /// AM04 InsufficientFunds.
    InsufficientFunds = 3,
    /// AM01 ZeroAmount.
    ZeroAmount = 4,
    /// AM02 NotAllowedAmount: above the largest representable amount or would overflow.
    AmountTooLarge = 5,
    /// AM03 NotAllowedCurrency: the currency differs from an account's.
    CurrencyMismatch = 6,
    /// AG01 TransactionForbidden: debtor and creditor are the same account.
    SameAccount = 7,
    /// DUPL DuplicatePayment.
    Duplicate = 8,
    /// RT01 (proprietary): an account with this number already exists.
    AccountExists = 9,
    /// RT02 (proprietary): an account with a non-zero balance (or a hold on it) cannot be closed.
    BalanceNotZero = 10,
    /// RT03 (proprietary): a ledger intent names a hold that does not exist.
    UnknownHold = 11,
    /// RT04 (proprietary): a ledger intent creates a hold whose id is already held.
    HoldExists = 12,
}

impl RejectReason {
    pub const ALL: [RejectReason; 12] = [
        RejectReason::UnknownAccount,
        RejectReason::ClosedAccount,
        RejectReason::InsufficientFunds,
        RejectReason::ZeroAmount,
        RejectReason::AmountTooLarge,
        RejectReason::CurrencyMismatch,
        RejectReason::SameAccount,
        RejectReason::Duplicate,
        RejectReason::AccountExists,
        RejectReason::BalanceNotZero,
        RejectReason::UnknownHold,
        RejectReason::HoldExists,
    ];

    /// The four-letter ISO 20022 (or proprietary `RTnn`) code.
    pub fn iso_code(self) -> &'static str {
        match self {
            RejectReason::UnknownAccount => "AC01",
            RejectReason::ClosedAccount => "AC04",
            RejectReason::InsufficientFunds => "AM04",
            RejectReason::ZeroAmount => "AM01",
            RejectReason::AmountTooLarge => "AM02",
            RejectReason::CurrencyMismatch => "AM03",
            RejectReason::SameAccount => "AG01",
            RejectReason::Duplicate => "DUPL",
            RejectReason::AccountExists => "RT01",
            RejectReason::BalanceNotZero => "RT02",
            RejectReason::UnknownHold => "RT03",
            RejectReason::HoldExists => "RT04",
        }
    }

    pub fn from_code(code: u16) -> Option<Self> {
        RejectReason::ALL.into_iter().find(|r| *r as u16 == code)
    }
}

/// The result of applying one entry; identical in every center for the same journal prefix.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Outcome {
    /// Settled (transfers: ACCC once final) or done (admin, tick, plugin commands).
    Accepted,
    /// Rejected with a reason (RJCT once final).
    Rejected(RejectReason),
}

impl Outcome {
    /// Compact code: 0 = accepted, else the reason's number. Hashed into the state chain.
    pub fn code(self) -> u16 {
        match self {
            Outcome::Accepted => 0,
            Outcome::Rejected(r) => r as u16,
        }
    }
    pub fn from_code(code: u16) -> Option<Self> {
        if code == 0 {
            Some(Outcome::Accepted)
        } else {
            RejectReason::from_code(code).map(Outcome::Rejected)
        }
    }
}

/// Input errors of the entry types: values, never panics.
#[derive(Copy, Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum InputError {
    #[error("bmi must be 1 to 43 bytes")]
    BmiLength,
    #[error("bmi must be printable ASCII without spaces")]
    BmiCharacters,
    #[error("currency must be three uppercase ASCII letters")]
    Currency,
    #[error("plugin command body exceeds the limit")]
    PluginBodyTooLarge,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bmi_validation() {
        assert_eq!(Bmi::new(b""), Err(InputError::BmiLength));
        assert_eq!(Bmi::new(&[b'a'; BMI_BYTES_MAX + 1]), Err(InputError::BmiLength));
        assert!(Bmi::new(&[b'a'; BMI_BYTES_MAX]).is_ok());
        assert_eq!(Bmi::new(b"a b"), Err(InputError::BmiCharacters));
        assert_eq!(Bmi::new(b"MSG-1").map(|b| b.as_bytes().to_vec()), Ok(b"MSG-1".to_vec()));
        assert_eq!(Bmi::numbered("T", 1234).map(|b| b.to_string()), Ok("T1234".to_string()));
        assert_eq!(Bmi::numbered("T", 0).map(|b| b.to_string()), Ok("T0".to_string()));
    }

    #[test]
    fn currency_validation() {
        assert!(Currency::new(b"EUR").is_ok());
        assert_eq!(Currency::new(b"eur"), Err(InputError::Currency));
        assert_eq!(Currency::new(b"EURO"), Err(InputError::Currency));
    }

    #[test]
    fn outcome_codes_round_trip_and_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for r in RejectReason::ALL {
            let o = Outcome::Rejected(r);
            assert_eq!(Outcome::from_code(o.code()), Some(o));
            assert!(seen.insert(r.iso_code()));
        }
        assert_eq!(Outcome::from_code(0), Some(Outcome::Accepted));
        assert_eq!(Outcome::from_code(999), None);
    }
}
