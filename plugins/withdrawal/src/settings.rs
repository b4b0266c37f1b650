//! Settings: the plugin's timers, changed by a journaled operator command (`SetSetting`) so
//! every center times out the same withdrawal at the same seq. All in seconds of journal time.
//!
//! The seed's values are the defaults: two hours for approval, for signature and for a chain
//! slot (Solana's 6th withdrawal "최대 2 시간"). A demo or a drill shortens them with the same
//! command; nothing reads a clock.

pub const SECOND_US: u64 = 1_000_000;
pub const MINUTE_US: u64 = 60 * SECOND_US;
pub const HOUR_US: u64 = 60 * MINUTE_US;

code_enum! {
    /// The setting a command changes.
    pub enum SettingKey {
        /// `withdrawal.authorization_timeout_seconds`: PENDING_AUTHORIZATION → FAILED after it.
        AuthorizationTimeout = 1,
        /// `withdrawal.signature_timeout_seconds`: PENDING_SIGNATURE → FAILED after it.
        SignatureTimeout = 2,
        /// `withdrawal.queued_timeout_seconds`: QUEUED → FAILED after it.
        QueuedTimeout = 3,
        /// `stale_tx.threshold_seconds`: BROADCASTING (or CONFIRMING) this long without news ⇒
        /// the chain is asked about every hash of its slot.
        StaleThreshold = 4,
        /// `stale_tx.check_interval_seconds`: how often a STALE withdrawal is asked about again.
        StaleCheckInterval = 5,
        /// `withdrawal.aml_timeout_seconds`: a screening without an answer is asked again.
        AmlTimeout = 6,
        /// `withdrawal.broadcast_margin_seconds`: a signature valid for less than this when it
        /// arrives is not broadcast.
        BroadcastMargin = 7,
        /// `withdrawal.reorg_check_seconds`: after a transaction is reported reorged away, the
        /// chain is asked whether it came back.
        ReorgCheck = 8,
        /// `withdrawal.alert_hold_seconds`: how long an event alert (a revert, a missed webhook
        /// ...) stays open in the state (`alert`); conditions close when they end.
        AlertHold = 9,
    }
}

impl SettingKey {
    pub fn name(self) -> &'static str {
        match self {
            SettingKey::AuthorizationTimeout => "withdrawal.authorization_timeout_seconds",
            SettingKey::SignatureTimeout => "withdrawal.signature_timeout_seconds",
            SettingKey::QueuedTimeout => "withdrawal.queued_timeout_seconds",
            SettingKey::StaleThreshold => "stale_tx.threshold_seconds",
            SettingKey::StaleCheckInterval => "stale_tx.check_interval_seconds",
            SettingKey::AmlTimeout => "withdrawal.aml_timeout_seconds",
            SettingKey::BroadcastMargin => "withdrawal.broadcast_margin_seconds",
            SettingKey::ReorgCheck => "withdrawal.reorg_check_seconds",
            SettingKey::AlertHold => "withdrawal.alert_hold_seconds",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        SettingKey::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// Inclusive valid range, in seconds.
    pub fn range(self) -> (u64, u64) {
        const WEEK: u64 = 7 * 24 * 3_600;
        match self {
            SettingKey::BroadcastMargin => (0, 3_600),
            _ => (1, WEEK),
        }
    }

    pub fn validate(self, value: u64) -> bool {
        let (lo, hi) = self.range();
        (lo..=hi).contains(&value)
    }
}

wire_struct! {
    /// The settings in force, in seconds.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Settings {
        pub authorization_timeout_s: u64,
        pub signature_timeout_s: u64,
        pub queued_timeout_s: u64,
        pub stale_threshold_s: u64,
        pub stale_check_interval_s: u64,
        pub aml_timeout_s: u64,
        pub broadcast_margin_s: u64,
        pub reorg_check_s: u64,
        pub alert_hold_s: u64,
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            authorization_timeout_s: 2 * 3_600,
            signature_timeout_s: 2 * 3_600,
            queued_timeout_s: 2 * 3_600,
            stale_threshold_s: 30 * 60,
            stale_check_interval_s: 60,
            aml_timeout_s: 10 * 60,
            broadcast_margin_s: 30,
            reorg_check_s: 10 * 60,
            // Ours: long enough for any scrape, rule evaluation and operator to see an event.
            alert_hold_s: 3_600,
        }
    }
}

impl Settings {
    pub fn get(&self, key: SettingKey) -> u64 {
        match key {
            SettingKey::AuthorizationTimeout => self.authorization_timeout_s,
            SettingKey::SignatureTimeout => self.signature_timeout_s,
            SettingKey::QueuedTimeout => self.queued_timeout_s,
            SettingKey::StaleThreshold => self.stale_threshold_s,
            SettingKey::StaleCheckInterval => self.stale_check_interval_s,
            SettingKey::AmlTimeout => self.aml_timeout_s,
            SettingKey::BroadcastMargin => self.broadcast_margin_s,
            SettingKey::ReorgCheck => self.reorg_check_s,
            SettingKey::AlertHold => self.alert_hold_s,
        }
    }

    /// Sets a validated value (the caller validated it).
    pub fn set(&mut self, key: SettingKey, value: u64) {
        let slot = match key {
            SettingKey::AuthorizationTimeout => &mut self.authorization_timeout_s,
            SettingKey::SignatureTimeout => &mut self.signature_timeout_s,
            SettingKey::QueuedTimeout => &mut self.queued_timeout_s,
            SettingKey::StaleThreshold => &mut self.stale_threshold_s,
            SettingKey::StaleCheckInterval => &mut self.stale_check_interval_s,
            SettingKey::AmlTimeout => &mut self.aml_timeout_s,
            SettingKey::BroadcastMargin => &mut self.broadcast_margin_s,
            SettingKey::ReorgCheck => &mut self.reorg_check_s,
            SettingKey::AlertHold => &mut self.alert_hold_s,
        };
        *slot = value;
    }

    pub fn us(&self, key: SettingKey) -> u64 {
        self.get(key).saturating_mul(SECOND_US)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_seeds_and_in_range() {
        let s = Settings::default();
        for k in SettingKey::ALL {
            assert!(k.validate(s.get(*k)), "{k:?}");
            assert_eq!(SettingKey::from_name(k.name()), Some(*k));
        }
        assert_eq!(s.us(SettingKey::AuthorizationTimeout), 2 * HOUR_US);
        assert_eq!(s.us(SettingKey::SignatureTimeout), 2 * HOUR_US);
        assert_eq!(s.us(SettingKey::QueuedTimeout), 2 * HOUR_US);
        assert!(!SettingKey::StaleThreshold.validate(0));
        let mut t = s;
        t.set(SettingKey::ReorgCheck, 5);
        assert_eq!(t.get(SettingKey::ReorgCheck), 5);
    }
}
