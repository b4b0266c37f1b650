//! Statement lines: what an applied entry did to each account it moved or changed — transfers,
//! account administration, and the plugins' ledger intents (holds, releases, settlements,
//! postings, reversals) — with the account's available balance after the entry.
//!
//! One rule for every reader: the API's read model keeps recent lines in memory (the embedded
//! engine), and a production center stores every line with the commit that applies its entry
//! (`CenterConfig::commit_lines`), so that a statement covers an account's whole history. A
//! rejected entry moves nothing and makes no line.

use crate::entry::{AccountId, Bmi, Entry, Outcome, Payload, Seq};
use crate::ledger::{Applied, LedgerIntent};
use crate::replica::Replica;

/// One line of an account's statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub seq: Seq,
    pub bmi: Bmi,
    pub kind: LineKind,
    /// The other account of a transfer, posting or settlement.
    pub counterparty: Option<AccountId>,
    pub amount_minor: u64,
    /// The available balance after the entry (holds are not part of it).
    pub balance_after_minor: u64,
}

/// A line and the account it belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountLine {
    pub account: AccountId,
    pub line: Line,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LineKind {
    Open,
    Debit,
    Credit,
    Fund,
    Close,
    /// A plugin held this amount of the balance (a withdrawal accepted, a seller's funds locked).
    Hold,
    /// A hold was returned to the balance.
    Release,
    /// A hold was paid out to the counterparty (the balance does not move: the hold leaves).
    Settle,
    /// An earlier posting taken back: money out of this account, or back into it.
    ReversalDebit,
    ReversalCredit,
}

impl LineKind {
    pub const ALL: [LineKind; 10] = [
        LineKind::Open,
        LineKind::Debit,
        LineKind::Credit,
        LineKind::Fund,
        LineKind::Close,
        LineKind::Hold,
        LineKind::Release,
        LineKind::Settle,
        LineKind::ReversalDebit,
        LineKind::ReversalCredit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LineKind::Open => "OPEN",
            LineKind::Debit => "DEBIT",
            LineKind::Credit => "CREDIT",
            LineKind::Fund => "FUND",
            LineKind::Close => "CLOSE",
            LineKind::Hold => "HOLD",
            LineKind::Release => "RELEASE",
            LineKind::Settle => "SETTLE",
            LineKind::ReversalDebit => "REVERSAL_DEBIT",
            LineKind::ReversalCredit => "REVERSAL_CREDIT",
        }
    }

    /// Its stored code (1 to 10).
    pub fn code(self) -> i16 {
        LineKind::ALL.iter().position(|k| *k == self).map_or(0, |i| i as i16 + 1)
    }

    pub fn from_code(code: i16) -> Option<LineKind> {
        usize::try_from(code).ok().and_then(|c| c.checked_sub(1)).and_then(|i| LineKind::ALL.get(i).copied())
    }
}

/// Appends the lines of `entry`, just applied to `replica` with `applied` (`plugin`: a plugin
/// took it, its intents are the host's `intents_applied`), in the order they happened.
pub fn lines_of(
    entry: &Entry,
    applied: &Applied,
    plugin: bool,
    replica: &Replica,
    out: &mut Vec<AccountLine>,
) {
    let mut line = |account: AccountId,
                    kind: LineKind,
                    counterparty: Option<AccountId>,
                    amount_minor: u64| {
        let balance_after_minor = replica.ledger().account(account).map_or(0, |x| x.balance_minor);
        let line =
            Line { seq: entry.seq, bmi: entry.bmi, kind, counterparty, amount_minor, balance_after_minor };
        out.push(AccountLine { account, line });
    };
    if applied.outcome == Outcome::Accepted {
        match &entry.payload {
            Payload::Transfer(t) => {
                line(t.debtor, LineKind::Debit, Some(t.creditor), t.amount_minor);
                line(t.creditor, LineKind::Credit, Some(t.debtor), t.amount_minor);
            }
            Payload::AccountOpen { account, .. } => line(*account, LineKind::Open, None, 0),
            Payload::AccountFund { account, amount_minor } => {
                line(*account, LineKind::Fund, None, *amount_minor)
            }
            Payload::AccountClose { account } => line(*account, LineKind::Close, None, 0),
            Payload::Tick | Payload::Plugin(_) => {}
        }
    }
    if !plugin {
        return;
    }
    for (_, r) in replica.host().intents_applied() {
        match (r.intent, r.hold) {
            (LedgerIntent::Hold { account, amount_minor, .. }, _) => {
                line(account, LineKind::Hold, None, amount_minor)
            }
            (LedgerIntent::Release { .. }, Some(h)) => {
                line(h.account, LineKind::Release, None, h.amount_minor)
            }
            (LedgerIntent::Settle { to, .. }, Some(h)) => {
                line(h.account, LineKind::Settle, Some(to), h.amount_minor);
                line(to, LineKind::Credit, Some(h.account), h.amount_minor);
            }
            // An applied release or settle always names a hold that existed.
            (LedgerIntent::Release { .. } | LedgerIntent::Settle { .. }, None) => {}
            (LedgerIntent::Post { from, to, amount_minor }, _) => {
                line(from, LineKind::Debit, Some(to), amount_minor);
                line(to, LineKind::Credit, Some(from), amount_minor);
            }
            (LedgerIntent::Reverse { from, to, amount_minor }, _) => {
                line(to, LineKind::ReversalDebit, Some(from), amount_minor);
                line(from, LineKind::ReversalCredit, Some(to), amount_minor);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_their_codes() {
        for k in LineKind::ALL {
            assert_eq!(LineKind::from_code(k.code()), Some(k));
        }
        assert_eq!((LineKind::from_code(0), LineKind::from_code(11)), (None, None));
    }
}
