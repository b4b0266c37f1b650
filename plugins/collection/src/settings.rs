//! Settings (`system_settings` of seed 000): schedule, thresholds and the stale monitor.
//!
//! Stored as integers: the gas threshold ratio in parts per million (seed `0.1` = 100,000 ppm),
//! USD amounts in micro-dollars. The schedule interval and both thresholds may be overridden per
//! partner; the stale monitor's and the alerts' settings are global.

use crate::types::PartnerId;
use crate::wire::{DecodeError, Reader, Wire, Writer};

/// Microseconds per minute and per hour.
pub const MINUTE_US: u64 = 60_000_000;
pub const HOUR_US: u64 = 60 * MINUTE_US;

code_enum! {
    /// The setting a command changes.
    pub enum SettingKey {
        /// `collection.schedule_interval_hours`: 1 ..= 168 (seed: 1, 6, 12 or 24).
        ScheduleIntervalHours = 1,
        /// `collection.gas_threshold_ratio` in ppm: 0 ..= 1,000,000 (skip when gas/balance is above).
        GasThresholdRatioPpm = 2,
        /// `collection.min_amount_usd` in micro-USD: 0 ..= 10^15 (skip when the balance is below).
        MinAmountUsdMicros = 3,
        /// `stale_tx.check_interval_minutes`: 1 ..= 1,440.
        StaleCheckIntervalMinutes = 4,
        /// `stale_tx.threshold_minutes`: 1 ..= 10,080.
        StaleThresholdMinutes = 5,
        /// `collection.pending_alert_minutes`: 1 ..= 10,080 — a PENDING batch waiting this long
        /// for a relayer (all busy or paused) opens a `pending_too_long` alert.
        PendingAlertMinutes = 6,
        /// `collection.alert_hold_minutes`: 1 ..= 10,080 — how long an event alert (a revert, a
        /// missed webhook ...) stays open.
        AlertHoldMinutes = 7,
    }
}

impl SettingKey {
    /// The `system_settings.setting_key` of the seed.
    pub fn name(self) -> &'static str {
        match self {
            SettingKey::ScheduleIntervalHours => "collection.schedule_interval_hours",
            SettingKey::GasThresholdRatioPpm => "collection.gas_threshold_ratio",
            SettingKey::MinAmountUsdMicros => "collection.min_amount_usd",
            SettingKey::StaleCheckIntervalMinutes => "stale_tx.check_interval_minutes",
            SettingKey::StaleThresholdMinutes => "stale_tx.threshold_minutes",
            SettingKey::PendingAlertMinutes => "collection.pending_alert_minutes",
            SettingKey::AlertHoldMinutes => "collection.alert_hold_minutes",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        SettingKey::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// Inclusive valid range.
    pub fn range(self) -> (u64, u64) {
        match self {
            SettingKey::ScheduleIntervalHours => (1, 168),
            SettingKey::GasThresholdRatioPpm => (0, 1_000_000),
            SettingKey::MinAmountUsdMicros => (0, 1_000_000_000_000_000),
            SettingKey::StaleCheckIntervalMinutes => (1, 1_440),
            SettingKey::StaleThresholdMinutes
            | SettingKey::PendingAlertMinutes
            | SettingKey::AlertHoldMinutes => (1, 10_080),
        }
    }

    /// Whether a partner may override it.
    pub fn per_partner(self) -> bool {
        matches!(
            self,
            SettingKey::ScheduleIntervalHours
                | SettingKey::GasThresholdRatioPpm
                | SettingKey::MinAmountUsdMicros
        )
    }

    pub fn validate(self, value: u64) -> Result<(), SettingError> {
        let (lo, hi) = self.range();
        if (lo..=hi).contains(&value) {
            Ok(())
        } else {
            Err(SettingError::OutOfRange { key: self, value })
        }
    }
}

/// Who a setting applies to.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum SettingScope {
    Global,
    Partner(PartnerId),
}

impl Wire for SettingScope {
    const BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer<'_>) {
        match self {
            SettingScope::Global => w.bytes(&[0]),
            SettingScope::Partner(p) => {
                w.bytes(&[1]);
                p.put(w);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.array::<1>()?[0] {
            0 => Ok(SettingScope::Global),
            1 => Ok(SettingScope::Partner(PartnerId::get(r)?)),
            _ => Err(DecodeError::Invalid("setting scope")),
        }
    }
}

/// A setting command that cannot apply.
#[derive(Copy, Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum SettingError {
    #[error("{} = {value} is out of range", key.name())]
    OutOfRange { key: SettingKey, value: u64 },
    #[error("{} cannot be set per partner", key.name())]
    NotPerPartner { key: SettingKey },
    #[error("a global setting cannot be cleared")]
    ClearGlobal,
}

wire_struct! {
    /// The global settings.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Settings {
        pub schedule_interval_hours: u32,
        pub gas_threshold_ratio_ppm: u32,
        pub min_amount_usd_micros: u64,
        pub stale_check_interval_minutes: u32,
        pub stale_threshold_minutes: u32,
        pub pending_alert_minutes: u32,
        pub alert_hold_minutes: u32,
    }
}

impl Default for Settings {
    /// The seed's values: hourly batches, 10 % gas threshold, 1.0 USD minimum, hourly stale
    /// checks of transactions broadcast more than an hour ago; and ours: an alert after a batch
    /// waited an hour for a relayer, event alerts open for an hour.
    fn default() -> Self {
        Settings {
            schedule_interval_hours: 1,
            gas_threshold_ratio_ppm: 100_000,
            min_amount_usd_micros: 1_000_000,
            stale_check_interval_minutes: 60,
            stale_threshold_minutes: 60,
            pending_alert_minutes: 60,
            alert_hold_minutes: 60,
        }
    }
}

impl Settings {
    pub fn stale_check_interval_us(&self) -> u64 {
        u64::from(self.stale_check_interval_minutes) * MINUTE_US
    }
    pub fn stale_threshold_us(&self) -> u64 {
        u64::from(self.stale_threshold_minutes) * MINUTE_US
    }
    pub fn pending_alert_us(&self) -> u64 {
        u64::from(self.pending_alert_minutes) * MINUTE_US
    }
    pub fn alert_hold_us(&self) -> u64 {
        u64::from(self.alert_hold_minutes) * MINUTE_US
    }

    /// Sets a global value (already validated).
    pub(crate) fn set(&mut self, key: SettingKey, value: u64) {
        // Ranges are checked before: every value fits its field.
        let v32 = u32::try_from(value).unwrap_or(u32::MAX);
        match key {
            SettingKey::ScheduleIntervalHours => self.schedule_interval_hours = v32,
            SettingKey::GasThresholdRatioPpm => self.gas_threshold_ratio_ppm = v32,
            SettingKey::MinAmountUsdMicros => self.min_amount_usd_micros = value,
            SettingKey::StaleCheckIntervalMinutes => self.stale_check_interval_minutes = v32,
            SettingKey::StaleThresholdMinutes => self.stale_threshold_minutes = v32,
            SettingKey::PendingAlertMinutes => self.pending_alert_minutes = v32,
            SettingKey::AlertHoldMinutes => self.alert_hold_minutes = v32,
        }
    }
}

wire_struct! {
    /// A partner's overrides and its schedule.
    #[derive(Clone, PartialEq, Eq, Debug, Default)]
    pub struct PartnerState {
        pub schedule_interval_hours: Option<u32>,
        pub gas_threshold_ratio_ppm: Option<u32>,
        pub min_amount_usd_micros: Option<u64>,
        /// When its next scheduled run is due (aligned to its interval, like cron).
        pub next_run_us: u64,
    }
}

impl PartnerState {
    pub(crate) fn set(&mut self, key: SettingKey, value: Option<u64>) {
        let v32 = value.map(|v| u32::try_from(v).unwrap_or(u32::MAX));
        match key {
            SettingKey::ScheduleIntervalHours => self.schedule_interval_hours = v32,
            SettingKey::GasThresholdRatioPpm => self.gas_threshold_ratio_ppm = v32,
            SettingKey::MinAmountUsdMicros => self.min_amount_usd_micros = value,
            // `per_partner` is checked before.
            SettingKey::StaleCheckIntervalMinutes
            | SettingKey::StaleThresholdMinutes
            | SettingKey::PendingAlertMinutes
            | SettingKey::AlertHoldMinutes => {}
        }
    }
}

/// The settings in force for one partner.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Effective {
    pub schedule_interval_hours: u32,
    pub gas_threshold_ratio_ppm: u32,
    pub min_amount_usd_micros: u64,
}

impl Effective {
    pub fn of(global: &Settings, partner: Option<&PartnerState>) -> Self {
        Effective {
            schedule_interval_hours: partner
                .and_then(|p| p.schedule_interval_hours)
                .unwrap_or(global.schedule_interval_hours),
            gas_threshold_ratio_ppm: partner
                .and_then(|p| p.gas_threshold_ratio_ppm)
                .unwrap_or(global.gas_threshold_ratio_ppm),
            min_amount_usd_micros: partner
                .and_then(|p| p.min_amount_usd_micros)
                .unwrap_or(global.min_amount_usd_micros),
        }
    }

    pub fn interval_us(&self) -> u64 {
        u64::from(self.schedule_interval_hours.max(1)) * HOUR_US
    }

    /// The first interval boundary strictly after `now_us` (runs are aligned: 14:00, 15:00 ...).
    pub fn next_boundary_us(&self, now_us: u64) -> u64 {
        let i = self.interval_us();
        (now_us / i).saturating_add(1).saturating_mul(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_ranges_are_enforced() {
        for k in SettingKey::ALL {
            assert_eq!(SettingKey::from_name(k.name()), Some(*k));
            let (lo, hi) = k.range();
            assert!(k.validate(lo).is_ok() && k.validate(hi).is_ok());
            assert!(k.validate(hi + 1).is_err());
            if lo > 0 {
                assert!(k.validate(lo - 1).is_err());
            }
            // Defaults are valid.
            let d = Settings::default();
            let v = match k {
                SettingKey::ScheduleIntervalHours => u64::from(d.schedule_interval_hours),
                SettingKey::GasThresholdRatioPpm => u64::from(d.gas_threshold_ratio_ppm),
                SettingKey::MinAmountUsdMicros => d.min_amount_usd_micros,
                SettingKey::StaleCheckIntervalMinutes => u64::from(d.stale_check_interval_minutes),
                SettingKey::StaleThresholdMinutes => u64::from(d.stale_threshold_minutes),
                SettingKey::PendingAlertMinutes => u64::from(d.pending_alert_minutes),
                SettingKey::AlertHoldMinutes => u64::from(d.alert_hold_minutes),
            };
            assert!(k.validate(v).is_ok());
        }
        assert_eq!(SettingKey::from_name("collection.nope"), None);
    }

    #[test]
    fn partner_overrides_win_and_boundaries_align() {
        let g = Settings::default();
        let p = PartnerState { schedule_interval_hours: Some(6), ..PartnerState::default() };
        let e = Effective::of(&g, Some(&p));
        assert_eq!(e.schedule_interval_hours, 6);
        assert_eq!(e.gas_threshold_ratio_ppm, 100_000);
        assert_eq!(e.next_boundary_us(0), 6 * HOUR_US);
        assert_eq!(e.next_boundary_us(6 * HOUR_US), 12 * HOUR_US);
        assert_eq!(e.next_boundary_us(6 * HOUR_US - 1), 6 * HOUR_US);
    }
}
