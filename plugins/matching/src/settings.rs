//! Settings: the window of each partner (seed §0 `matching.policy.*`) and the plugin's global
//! timings.
//!
//! **The window is two phases, P2P then LP** (180 s + 120 s by default). The 3/2 split is a
//! product decision, not derived from any timeout, lease or backoff: it is a setting, per
//! partner. A partner without P2P (`use_p2p = false`) gets the LP phase only — *from the
//! settings, not a branch*: its effective P2P phase is zero, so the window is the LP tail and the
//! LP gate is open from the start ([`PartnerSettings::effective_p2p_phase_us`]).
//!
//! **The decision grace** (300 s, the top of the product's 2–5 min range): costless to keep long,
//! since every reservation is returned when the window closes.

use crate::limits::{GRACE_S_MAX, PHASE_S_MAX};
use crate::types::SECOND_US;

wire_struct! {
    /// One partner's matching policy.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct PartnerSettings {
        /// Whether the partner's orders try P2P sellers at all (`useP2p`).
        pub use_p2p: bool,
        /// `matching.policy.p2p-phase-seconds`: 1 ..= 3,600 (default 180).
        pub p2p_phase_s: u32,
        /// `matching.policy.lp-phase-seconds`: 1 ..= 3,600 (default 120).
        pub lp_phase_s: u32,
        /// `matching.policy.decision-grace-seconds`: 1 ..= 3,600 (default 300).
        pub decision_grace_s: u32,
    }
}

impl Default for PartnerSettings {
    fn default() -> Self {
        PartnerSettings { use_p2p: true, p2p_phase_s: 180, lp_phase_s: 120, decision_grace_s: 300 }
    }
}

/// A setting outside its range.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    #[error("p2p_phase_s must be 1 to {PHASE_S_MAX}")]
    P2pPhase,
    #[error("lp_phase_s must be 1 to {PHASE_S_MAX}")]
    LpPhase,
    #[error("decision_grace_s must be 1 to {GRACE_S_MAX}")]
    Grace,
}

impl PartnerSettings {
    pub fn validate(&self) -> Result<(), SettingError> {
        if !(1..=PHASE_S_MAX).contains(&self.p2p_phase_s) {
            return Err(SettingError::P2pPhase);
        }
        if !(1..=PHASE_S_MAX).contains(&self.lp_phase_s) {
            return Err(SettingError::LpPhase);
        }
        if !(1..=GRACE_S_MAX).contains(&self.decision_grace_s) {
            return Err(SettingError::Grace);
        }
        Ok(())
    }

    /// The P2P phase actually run: zero for a partner without P2P (`effectiveP2pPhase`).
    pub fn effective_p2p_phase_us(&self) -> u64 {
        if self.use_p2p {
            u64::from(self.p2p_phase_s) * SECOND_US
        } else {
            0
        }
    }

    pub fn lp_phase_us(&self) -> u64 {
        u64::from(self.lp_phase_s) * SECOND_US
    }

    /// The whole window: effective P2P phase + LP phase (derived, never a setting of its own —
    /// the seed removed `session-ttl-seconds`).
    pub fn window_us(&self) -> u64 {
        self.effective_p2p_phase_us() + self.lp_phase_us()
    }

    pub fn grace_us(&self) -> u64 {
        u64::from(self.decision_grace_s) * SECOND_US
    }
}

wire_struct! {
    /// The plugin's own timings (global; the same on every center because they are state).
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Timings {
        /// Lease of a P2P seller reservation (an anchor), renewed at half of it.
        pub p2p_lease_us: u64,
        /// Between two routing passes of a session whose window is open.
        pub route_interval_us: u64,
        /// First LP retry after BUSY / NO_POOL / a transport failure; doubled each time.
        pub lp_backoff_base_us: u64,
        /// Largest LP retry interval (seed: 60 s). Cut to half the anchor's remaining lease while
        /// the session holds one (`holdSafe`): otherwise the backoff outlives the lease.
        pub lp_backoff_max_us: u64,
        /// An LP call without an answer after this is sent again (same key: a lost answer).
        pub lp_answer_timeout_us: u64,
    }
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            p2p_lease_us: 30 * SECOND_US,
            route_interval_us: 5 * SECOND_US,
            lp_backoff_base_us: SECOND_US,
            lp_backoff_max_us: 60 * SECOND_US,
            lp_answer_timeout_us: 10 * SECOND_US,
        }
    }
}

impl Timings {
    /// Short timings for demos and the simulator, whose windows last seconds: 4 s anchor
    /// leases, a routing pass every 0.5 s, LP retries from 0.2 s to 2 s, answers overdue after
    /// 2 s. Production keeps [`Timings::default`].
    pub fn quick() -> Self {
        Timings {
            p2p_lease_us: 4 * SECOND_US,
            route_interval_us: SECOND_US / 2,
            lp_backoff_base_us: SECOND_US / 5,
            lp_backoff_max_us: 2 * SECOND_US,
            lp_answer_timeout_us: 2 * SECOND_US,
        }
    }

    /// Timings that cannot work are refused (tests and configs).
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.p2p_lease_us < 2 * SECOND_US {
            return Err("the P2P lease must be at least 2 s (renewed at half)");
        }
        if self.route_interval_us == 0 || self.lp_backoff_base_us == 0 || self.lp_answer_timeout_us == 0 {
            return Err("intervals must be positive");
        }
        if self.lp_backoff_base_us > self.lp_backoff_max_us {
            return Err("the LP backoff base must not exceed its maximum");
        }
        Ok(())
    }

    /// The `n`-th LP retry interval (n from 0): base × 2ⁿ, at most the maximum.
    pub fn lp_backoff_us(&self, n: u32) -> u64 {
        self.lp_backoff_base_us.saturating_mul(1u64 << n.min(20)).min(self.lp_backoff_max_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partner_without_p2p_gets_the_lp_phase_only_from_its_settings() {
        let with = PartnerSettings::default();
        assert_eq!(with.window_us(), 300 * SECOND_US);
        assert_eq!(with.effective_p2p_phase_us(), 180 * SECOND_US);
        let without = PartnerSettings { use_p2p: false, ..with };
        assert_eq!(without.effective_p2p_phase_us(), 0);
        assert_eq!(without.window_us(), 120 * SECOND_US, "the LP tail only");
    }

    #[test]
    fn settings_out_of_range_are_refused() {
        let ok = PartnerSettings::default();
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(PartnerSettings { p2p_phase_s: 0, ..ok }.validate(), Err(SettingError::P2pPhase));
        assert_eq!(PartnerSettings { lp_phase_s: 3_601, ..ok }.validate(), Err(SettingError::LpPhase));
        assert_eq!(PartnerSettings { decision_grace_s: 0, ..ok }.validate(), Err(SettingError::Grace));
        assert!(Timings::default().validate().is_ok());
        let t = Timings { lp_backoff_base_us: 61 * SECOND_US, ..Timings::default() };
        assert!(t.validate().is_err());
    }

    #[test]
    fn the_lp_backoff_doubles_up_to_its_maximum() {
        let t = Timings::default();
        let steps: Vec<u64> = (0..8).map(|n| t.lp_backoff_us(n) / SECOND_US).collect();
        assert_eq!(steps, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(t.lp_backoff_us(u32::MAX), 60 * SECOND_US);
    }
}
