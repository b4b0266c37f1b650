//! Operator alerts, **derived from state** (as the collection plugin's): the state holds the set
//! of open alerts, so every center holds the same set (it is in the checkpoint and the state
//! hash), a failover loses none, and whoever reads them — each node's `/metrics` and status,
//! Prometheus, then Alertmanager; the simulated operators of `world` — delivers them at least
//! once. Nothing is sent by the plugin: there is no alert effect.
//!
//! An alert is keyed by its kind and withdrawal (at most one open per pair) and carries a stable
//! id (`1, 2, 3 ...` in journal order, the same on every center) and the journal time it opened.
//!
//! * **Conditions** stay open while their condition holds and close when it ends (checked every
//!   time a withdrawal changes, [`WithdrawalPlugin::put`]):
//!   `stale` (the withdrawal is STALE: closed when a receipt appears, a drop confirms or an
//!   operator fails it), `aml_alert` (the screener's alert verdict waits for a human in
//!   PENDING_AML_SCREENING: closed by rescreen-aml, bypass-aml or cancel), `aml_no_answer`
//!   (the screener left several screenings unanswered: closed when it answers or the withdrawal
//!   leaves PENDING_AML_SCREENING).
//! * **Events** have no end of their own: a missed webhook, a revert, a slot used elsewhere, a
//!   signature that expired, a reorg that took a COMPLETED withdrawal, a ledger refusal (raised
//!   again at each refused try), a validity that passed, a broadcast rejected, an AML freeze.
//!   They stay open for `withdrawal.alert_hold_seconds` of journal time (default one hour),
//!   closed by the first `Tick` after that — long enough for any scrape and rule evaluation to
//!   see them — or earlier by an operator's answer about that withdrawal (dismiss, retry,
//!   rescreen-aml, bypass-aml), which acknowledges them.
//!
//! An archived withdrawal's alerts close with it (it is final and a week old).

use crate::plugin::{Ctx, WithdrawalPlugin};
use crate::settings::SettingKey;
use crate::state::Withdrawal;
use crate::status::Status;
use crate::types::WithdrawalId;

code_enum! {
    /// What an operator alert is about.
    pub enum AlertKind {
        /// A receipt showed the transaction in a block but no webhook came (or a reorg report
        /// of a COMPLETED one was missed).
        MissedWebhook = 1,
        /// No receipt for any hash of the slot long after broadcast: STALE, the vault paused.
        Stale = 2,
        /// Mined with status 0 ("manual decision").
        Reverted = 3,
        /// The slot was used by a transaction that is not ours.
        SlotUsedElsewhere = 4,
        /// The screener raised an alert: a human decides (rescreen, bypass, cancel).
        AmlAlert = 5,
        /// The screener did not answer several times.
        AmlNoAnswer = 6,
        /// A signature arrived too late to be broadcast within its validity.
        SignatureExpired = 7,
        /// A COMPLETED withdrawal's transaction left the chain for good: reversed.
        ReorgedAway = 8,
        /// The ledger refused to pay the settlement account (or to reverse from it).
        LedgerRefused = 9,
        /// Its validity passed before it was mined.
        ValidityPassed = 10,
        /// A node refused the transaction for certain.
        BroadcastRejected = 11,
        /// The screener froze it.
        AmlFrozen = 12,
    }
}

impl AlertKind {
    /// The name in series labels and the status (`kind="stale"`).
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize - 1]
    }

    pub fn from_name(name: &str) -> Option<Self> {
        AlertKind::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// Closed when its condition ends (not after the hold time).
    pub fn is_condition(self) -> bool {
        matches!(self, AlertKind::Stale | AlertKind::AmlAlert | AlertKind::AmlNoAnswer)
    }

    /// Whether condition `self` holds for `w` (events: always).
    pub fn holds(self, w: &Withdrawal) -> bool {
        let screening = w.status == Status::PendingAmlScreening;
        match self {
            AlertKind::Stale => w.status == Status::Stale,
            // Only the screener's alert verdict leaves a withdrawal in PENDING_AML_SCREENING with
            // nothing asked: a human has the next move.
            AlertKind::AmlAlert => screening && w.awaiting.is_none(),
            AlertKind::AmlNoAnswer => {
                screening && w.aml_unanswered >= crate::limits::AML_ATTEMPTS_BEFORE_ALERT
            }
            _ => true,
        }
    }

    /// Every kind's name, in code order.
    pub const NAMES: [&'static str; 12] = [
        "missed_webhook",
        "stale",
        "reverted",
        "slot_used_elsewhere",
        "aml_alert",
        "aml_no_answer",
        "signature_expired",
        "reorged_away",
        "ledger_refused",
        "validity_passed",
        "broadcast_rejected",
        "aml_frozen",
    ];
}

/// An alert's subject as the status and series show it (`withdrawal:17`).
pub fn subject(id: WithdrawalId) -> String {
    format!("withdrawal:{}", id.0)
}

/// The withdrawal a subject names (the inverse of [`subject`]).
pub fn parse_subject(s: &str) -> Option<WithdrawalId> {
    s.strip_prefix("withdrawal:")?.parse().ok().map(WithdrawalId)
}

wire_struct! {
    /// At most one alert is open per kind and withdrawal.
    #[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
    pub struct AlertKey {
        pub kind: AlertKind,
        pub withdrawal: WithdrawalId,
    }
}

wire_struct! {
    /// One open alert.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct OpenAlert {
        /// Stable: assigned when it opens (1, 2, 3 ... in journal order), the same on every center.
        pub id: u64,
        pub kind: AlertKind,
        pub withdrawal: WithdrawalId,
        /// Journal time it opened.
        pub since_us: u64,
        /// Events: the journal time it closes; conditions: none (closed when they end).
        pub closes_at_us: Option<u64>,
    }
}

impl WithdrawalPlugin {
    /// Opens an alert about `w` (a condition that starts, or an event). Already open: a
    /// condition stays as it is; an event is held open for the hold time from now. `w` is out
    /// of the state (taken) or about to be put back: the caller holds it.
    pub(crate) fn alert(&mut self, cx: &Ctx<'_, '_>, w: &mut Withdrawal, kind: AlertKind) {
        let now = cx.now;
        w.alert_open = true;
        let closes_at_us =
            (!kind.is_condition()).then(|| now.saturating_add(self.st.settings.us(SettingKey::AlertHold)));
        let key = AlertKey { kind, withdrawal: w.id };
        if let Some(open) = self.st.alerts.get_mut(&key) {
            open.closes_at_us = closes_at_us;
            return;
        }
        self.st.alert_id_last += 1;
        let alert =
            OpenAlert { id: self.st.alert_id_last, kind, withdrawal: w.id, since_us: now, closes_at_us };
        self.st.alerts.insert(key, alert);
        self.st.counters.alerts += 1;
    }

    /// Closes `w`'s conditions that no longer hold (every time it is put back).
    pub(crate) fn close_ended(&mut self, w: &Withdrawal) {
        for kind in [AlertKind::Stale, AlertKind::AmlAlert, AlertKind::AmlNoAnswer] {
            if !kind.holds(w) {
                self.st.alerts.remove(&AlertKey { kind, withdrawal: w.id });
            }
        }
    }

    /// An operator answered about `id`: its events are acknowledged (conditions close only
    /// when they end).
    pub(crate) fn acknowledge(&mut self, id: WithdrawalId) {
        self.st.alerts.retain(|k, a| k.withdrawal != id || a.closes_at_us.is_none());
    }

    /// Every alert about `id` (it leaves the state).
    pub(crate) fn close_all(&mut self, id: WithdrawalId) {
        self.st.alerts.retain(|k, _| k.withdrawal != id);
    }

    /// On every `Tick`: events past their hold time close.
    pub(crate) fn tick_alerts(&mut self, now: u64) {
        self.st.alerts.retain(|_, a| a.closes_at_us.is_none_or(|t| now < t));
    }

    /// The open alerts, by kind and withdrawal.
    pub fn alerts_open(&self) -> impl Iterator<Item = &OpenAlert> {
        self.st.alerts.values()
    }

    /// The open alert of this kind about this withdrawal.
    pub fn alert_of(&self, kind: AlertKind, withdrawal: WithdrawalId) -> Option<&OpenAlert> {
        self.st.alerts.get(&AlertKey { kind, withdrawal })
    }

    /// Alerts opened so far (the last id handed out).
    pub fn alert_id_last(&self) -> u64 {
        self.st.alert_id_last
    }
}

/// Open alerts: keyed by their own kind and withdrawal, ids unique and issued, events with an
/// end, conditions that hold.
pub(crate) fn check_alerts(st: &crate::state::State) -> Result<(), &'static str> {
    use crate::wire::check;
    let mut ids = std::collections::BTreeSet::new();
    for (key, a) in &st.alerts {
        check(key.kind == a.kind && key.withdrawal == a.withdrawal, "alert key")?;
        check(a.id >= 1 && a.id <= st.alert_id_last && ids.insert(a.id), "alert id")?;
        check(a.kind.is_condition() == a.closes_at_us.is_none(), "alert end")?;
        let w = st.withdrawals.get(&a.withdrawal).ok_or("alert about an unknown withdrawal")?;
        check(a.kind.holds(w), "alert condition ended but the alert is open")?;
    }
    Ok(())
}
