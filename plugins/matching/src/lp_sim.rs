//! The LP's reservation API, simulated: the [`LpAdapter`] trait a real client implements and
//! [`LpSim`], a deterministic LP with injectable faults.
//!
//! **The API** (`TorqLpReservationClient`): `reserve` (capacity for an amount, under a lease),
//! `renew` (extend the lease), `confirm` (commit: escrow id + trade id), `release`. Every call
//! carries an `Idempotency-Key` that the LP keeps unique **forever** (the provider's 2026-09-14
//! deployment: no 24-hour reuse window): the same key is answered with the first answer, and a
//! key whose reservation expired answers 409 `330` for ever. BUSY and NO_POOL make no
//! reservation and are not bound to the key. `release` of a committed reservation answers 409
//! `336` (the trade-cancel API is the only way back).
//!
//! **Faults** (per-million chances, from a seeded PRNG): BUSY, NO_POOL, transport failures (the
//! request never arrived: `Transport`), lost answers (done, but no answer), late answers (done,
//! answered after the plugin's timeout), rejection of a `confirm` after the commit, COMMITTED on
//! a `reserve` (a confirmation whose answer was lost), trades never completed. After `confirm`
//! the LP sends its trade-completion webhook once the buyer paid (after a delay).

use std::collections::BTreeMap;

use rtgs_core::prng::Prng;

use crate::command::{LpAnswer, LpAnswered, LpTradeCompleted, MatchingCommand};
use crate::effect::{LpOnReservation, LpReserve, MatchingEffect};
use crate::state::LpCall;
use crate::types::*;

/// An LP as the node's adapter drives it (a real HTTP client, or [`LpSim`]).
pub trait LpAdapter: Send {
    /// Starts one call (an LP effect of the plugin). Executing the same effect again must be
    /// harmless: the key makes the LP replay its answer.
    fn execute(&mut self, effect_id: u64, effect: &MatchingEffect, now_us: u64);
    /// Answers and webhooks due by `now_us`.
    fn poll(&mut self, now_us: u64, out: &mut Vec<MatchingCommand>);
    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        let _ = out;
    }
}

/// What the simulated LP does, and how often it misbehaves (chances per million calls).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LpConfig {
    pub lease_us: u64,
    /// Capacity the LP can reserve at once, in minor units.
    pub capacity_minor: u64,
    pub latency_us: (u64, u64),
    pub busy_ppm: u32,
    pub no_pool_ppm: u32,
    pub transport_ppm: u32,
    pub lost_ppm: u32,
    pub late_ppm: u32,
    /// How late a late answer is.
    pub late_us: u64,
    pub reject_confirm_ppm: u32,
    pub committed_on_reserve_ppm: u32,
    /// After `confirm`, the buyer pays and the trade completes after this long…
    pub complete_after_us: (u64, u64),
    /// …unless it never does.
    pub never_complete_ppm: u32,
}

impl Default for LpConfig {
    /// A well-behaved LP: no faults.
    fn default() -> Self {
        LpConfig {
            lease_us: 30 * SECOND_US,
            capacity_minor: u64::MAX / 4,
            latency_us: (1_000, 50_000),
            busy_ppm: 0,
            no_pool_ppm: 0,
            transport_ppm: 0,
            lost_ppm: 0,
            late_ppm: 0,
            late_us: 15 * SECOND_US,
            reject_confirm_ppm: 0,
            committed_on_reserve_ppm: 0,
            complete_after_us: (SECOND_US, 5 * SECOND_US),
            never_complete_ppm: 0,
        }
    }
}

impl LpConfig {
    /// Every fault, often (the simulator's and the fault tests' LP).
    pub fn faulty() -> Self {
        LpConfig {
            busy_ppm: 100_000,
            no_pool_ppm: 30_000,
            transport_ppm: 50_000,
            lost_ppm: 30_000,
            late_ppm: 20_000,
            reject_confirm_ppm: 50_000,
            committed_on_reserve_ppm: 5_000,
            never_complete_ppm: 20_000,
            ..LpConfig::default()
        }
    }
}

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ResStatus {
    Reserved,
    Committed { escrow: EscrowId, trade: TradeId },
    Released,
    Expired,
}

/// One reservation as the LP keeps it.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Res {
    pub session: SessionId,
    pub key: IdempotencyKey,
    pub amount_minor: u64,
    pub expires_at_us: u64,
    pub status: ResStatus,
}

/// Counts of what the simulated LP did (figures).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct LpStats {
    pub calls: u64,
    pub replays: u64,
    pub reserved: u64,
    pub committed: u64,
    pub released: u64,
    pub expired_330: u64,
    pub refused_336: u64,
    pub busy: u64,
    pub no_pool: u64,
    pub transport: u64,
    pub lost: u64,
    pub late: u64,
    pub rejected: u64,
    pub committed_on_reserve: u64,
    pub webhooks: u64,
}

/// The simulated LP (see the module docs).
pub struct LpSim {
    pub cfg: LpConfig,
    prng: Prng,
    pub reservations: BTreeMap<ReservationId, Res>,
    /// Reserve keys → their reservation, for ever.
    by_key: BTreeMap<IdempotencyKey, ReservationId>,
    /// Reservations held, by the end of their lease.
    leases: std::collections::BTreeSet<(u64, ReservationId)>,
    /// Answers of renew / confirm / release by key, for ever (replayed).
    answers: BTreeMap<(LpCall, IdempotencyKey), LpAnswer>,
    outbox: BTreeMap<(u64, u64), MatchingCommand>,
    out_seq: u64,
    reservation_id_last: u64,
    escrow_id_last: u64,
    reserved_minor: u64,
    pub stats: LpStats,
}

impl LpSim {
    pub fn new(cfg: LpConfig, seed: u64) -> Self {
        LpSim {
            cfg,
            prng: Prng::new(seed ^ 0x4C50_5349_4D00),
            reservations: BTreeMap::new(),
            by_key: BTreeMap::new(),
            leases: std::collections::BTreeSet::new(),
            answers: BTreeMap::new(),
            outbox: BTreeMap::new(),
            out_seq: 0,
            reservation_id_last: 0,
            escrow_id_last: 0,
            reserved_minor: 0,
            stats: LpStats::default(),
        }
    }

    fn chance(&mut self, ppm: u32) -> bool {
        ppm > 0 && self.prng.below(1_000_000) < u64::from(ppm)
    }

    /// Leases past their end expire (capacity back).
    fn expire(&mut self, now_us: u64) {
        while let Some(&(at, id)) = self.leases.first() {
            if at > now_us {
                break;
            }
            self.leases.remove(&(at, id));
            if let Some(r) = self.reservations.get_mut(&id).filter(|r| r.status == ResStatus::Reserved) {
                r.status = ResStatus::Expired;
                self.reserved_minor -= r.amount_minor;
            }
        }
    }

    /// Moves a reservation's lease end (`None`: no longer held).
    fn set_lease(&mut self, id: ReservationId, until: Option<u64>) {
        if let Some(r) = self.reservations.get_mut(&id) {
            self.leases.remove(&(r.expires_at_us, id));
            if let Some(at) = until {
                r.expires_at_us = at;
                self.leases.insert((at, id));
            }
        }
    }

    fn reserve(&mut self, e: &LpReserve, now_us: u64) -> LpAnswer {
        if let Some(id) = self.by_key.get(&e.key).copied() {
            self.stats.replays += 1;
            let r = self.reservations[&id];
            return match r.status {
                ResStatus::Reserved => LpAnswer::Reserved { reservation: id, expires_at_us: r.expires_at_us },
                ResStatus::Committed { escrow, trade } => {
                    LpAnswer::Committed { reservation: id, escrow, trade }
                }
                ResStatus::Released | ResStatus::Expired => LpAnswer::Expired,
            };
        }
        if self.chance(self.cfg.busy_ppm) {
            return LpAnswer::Busy;
        }
        let amount = e.body.amount_minor;
        if self.chance(self.cfg.no_pool_ppm)
            || self.reserved_minor.saturating_add(amount) > self.cfg.capacity_minor
        {
            return LpAnswer::NoPool;
        }
        self.reservation_id_last += 1;
        let id = ReservationId(self.reservation_id_last);
        let res = Res {
            session: e.body.session,
            key: e.key,
            amount_minor: amount,
            expires_at_us: now_us + self.cfg.lease_us,
            status: ResStatus::Reserved,
        };
        self.reservations.insert(id, res);
        self.leases.insert((res.expires_at_us, id));
        self.by_key.insert(e.key, id);
        self.reserved_minor += amount;
        if self.chance(self.cfg.committed_on_reserve_ppm) {
            // As if an earlier confirm had committed it and its answer had been lost.
            self.stats.committed_on_reserve += 1;
            return self.commit(id, now_us);
        }
        self.stats.reserved += 1;
        LpAnswer::Reserved { reservation: id, expires_at_us: res.expires_at_us }
    }

    fn commit(&mut self, id: ReservationId, now_us: u64) -> LpAnswer {
        self.escrow_id_last += 1;
        let (escrow, trade) = (EscrowId(self.escrow_id_last), TradeId(900_000 + self.escrow_id_last));
        self.set_lease(id, None);
        let Some(r) = self.reservations.get_mut(&id) else { return LpAnswer::Expired };
        r.status = ResStatus::Committed { escrow, trade };
        self.reserved_minor -= r.amount_minor;
        self.stats.committed += 1;
        if !self.chance(self.cfg.never_complete_ppm) {
            let (lo, hi) = self.cfg.complete_after_us;
            let at = now_us + self.prng.range(lo, hi.max(lo + 1));
            self.push(at, MatchingCommand::LpTradeCompleted(LpTradeCompleted { escrow, trade }));
        }
        LpAnswer::Committed { reservation: id, escrow, trade }
    }

    fn on_reservation(&mut self, call: LpCall, e: &LpOnReservation, now_us: u64) -> LpAnswer {
        if let Some(a) = self.answers.get(&(call, e.key)).copied() {
            self.stats.replays += 1;
            return a;
        }
        let id = e.body.reservation;
        let status = self.reservations.get(&id).map(|r| r.status);
        let answer = match (call, status) {
            (LpCall::Renew, Some(ResStatus::Reserved)) => {
                let until = now_us + self.cfg.lease_us;
                self.set_lease(id, Some(until));
                LpAnswer::Renewed { expires_at_us: until }
            }
            (LpCall::Confirm, Some(ResStatus::Reserved)) if self.chance(self.cfg.reject_confirm_ppm) => {
                self.stats.rejected += 1;
                LpAnswer::Rejected { code: 422 }
            }
            (LpCall::Confirm, Some(ResStatus::Reserved)) => self.commit(id, now_us),
            (LpCall::Renew | LpCall::Confirm, Some(ResStatus::Committed { escrow, trade })) => {
                LpAnswer::Committed { reservation: id, escrow, trade }
            }
            (LpCall::Release, Some(ResStatus::Reserved)) => {
                self.set_lease(id, None);
                if let Some(r) = self.reservations.get_mut(&id) {
                    r.status = ResStatus::Released;
                    self.reserved_minor -= r.amount_minor;
                }
                self.stats.released += 1;
                LpAnswer::Released
            }
            (LpCall::Release, Some(ResStatus::Committed { .. })) => {
                self.stats.refused_336 += 1;
                LpAnswer::CannotRelease
            }
            // Releasing what is gone is done; anything else on it is 330.
            (LpCall::Release, _) => LpAnswer::Released,
            _ => LpAnswer::Expired,
        };
        if answer == LpAnswer::Expired {
            self.stats.expired_330 += 1;
        }
        self.answers.insert((call, e.key), answer);
        answer
    }

    fn push(&mut self, at_us: u64, cmd: MatchingCommand) {
        self.out_seq += 1;
        self.outbox.insert((at_us, self.out_seq), cmd);
    }

    /// A reservation's state (tests).
    pub fn reservation(&self, id: ReservationId) -> Option<&Res> {
        self.reservations.get(&id)
    }

    /// Escrows committed, with their reservation (the end-of-run checks).
    pub fn escrows(&self) -> impl Iterator<Item = (ReservationId, EscrowId)> + '_ {
        self.reservations.iter().filter_map(|(id, r)| match r.status {
            ResStatus::Committed { escrow, .. } => Some((*id, escrow)),
            _ => None,
        })
    }

    /// Capacity reserved right now (not committed, not expired).
    pub fn reserved_minor(&self, now_us: u64) -> u64 {
        self.reservations
            .values()
            .filter(|r| r.status == ResStatus::Reserved && r.expires_at_us > now_us)
            .map(|r| r.amount_minor)
            .sum()
    }
}

impl LpAdapter for LpSim {
    fn execute(&mut self, effect_id: u64, effect: &MatchingEffect, now_us: u64) {
        self.expire(now_us);
        let (session, call, key, reservation) = match effect {
            MatchingEffect::LpReserve(e) => (e.body.session, LpCall::Reserve, e.key, None),
            MatchingEffect::LpRenew(e) => (e.body.session, LpCall::Renew, e.key, Some(e.body.reservation)),
            MatchingEffect::LpConfirm(e) => {
                (e.body.session, LpCall::Confirm, e.key, Some(e.body.reservation))
            }
            MatchingEffect::LpRelease(e) => {
                (e.body.session, LpCall::Release, e.key, Some(e.body.reservation))
            }
            MatchingEffect::HandOff(_) | MatchingEffect::Alert(_) | MatchingEffect::AwaitingDecision(_) => {
                return
            }
        };
        self.stats.calls += 1;
        let (lo, hi) = self.cfg.latency_us;
        let mut at = now_us + self.prng.range(lo, hi.max(lo + 1));
        let answer = if self.chance(self.cfg.transport_ppm) {
            self.stats.transport += 1;
            LpAnswer::Transport
        } else {
            let a = match effect {
                MatchingEffect::LpReserve(e) => self.reserve(e, now_us),
                MatchingEffect::LpRenew(e) => self.on_reservation(LpCall::Renew, e, now_us),
                MatchingEffect::LpConfirm(e) => self.on_reservation(LpCall::Confirm, e, now_us),
                MatchingEffect::LpRelease(e) => self.on_reservation(LpCall::Release, e, now_us),
                _ => return,
            };
            match a {
                LpAnswer::Busy => self.stats.busy += 1,
                LpAnswer::NoPool => self.stats.no_pool += 1,
                _ => {}
            }
            if self.chance(self.cfg.lost_ppm) {
                self.stats.lost += 1;
                return;
            }
            if self.chance(self.cfg.late_ppm) {
                self.stats.late += 1;
                at += self.cfg.late_us;
            }
            a
        };
        let cmd =
            MatchingCommand::LpAnswered(LpAnswered { effect_id, session, call, key, reservation, answer });
        self.push(at, cmd);
    }

    fn poll(&mut self, now_us: u64, out: &mut Vec<MatchingCommand>) {
        while let Some(entry) = self.outbox.first_entry() {
            if entry.key().0 > now_us {
                break;
            }
            let cmd = entry.remove();
            if matches!(cmd, MatchingCommand::LpTradeCompleted(_)) {
                self.stats.webhooks += 1;
            }
            out.push(cmd);
        }
    }

    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        let s = &self.stats;
        out.extend([
            ("lp_calls", s.calls),
            ("lp_replays", s.replays),
            ("lp_reserved", s.reserved),
            ("lp_committed", s.committed),
            ("lp_released", s.released),
            ("lp_expired_330", s.expired_330),
            ("lp_refused_336", s.refused_336),
            ("lp_busy", s.busy),
            ("lp_no_pool", s.no_pool),
            ("lp_transport", s.transport),
            ("lp_lost", s.lost),
            ("lp_late", s.late),
            ("lp_rejected", s.rejected),
            ("lp_committed_on_reserve", s.committed_on_reserve),
            ("lp_webhooks", s.webhooks),
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::tests::eur;
    use crate::effect::{reservation_key, reserve_key, ReservationBody, ReserveBody};

    fn reserve(sim: &mut LpSim, attempt: u32, now: u64) -> LpAnswer {
        let body =
            ReserveBody { session: SessionId(1), partner: PartnerId(1), currency: eur(), amount_minor: 50 };
        let e = MatchingEffect::LpReserve(LpReserve { body, key: reserve_key(&body, attempt) });
        sim.execute(1, &e, now);
        answer(sim)
    }

    fn answer(sim: &mut LpSim) -> LpAnswer {
        let mut out = Vec::new();
        sim.poll(u64::MAX / 2, &mut out);
        out.iter()
            .find_map(|c| match c {
                MatchingCommand::LpAnswered(a) => Some(a.answer),
                _ => None,
            })
            .unwrap_or(LpAnswer::Transport)
    }

    /// ☠️ Seed §4-c: with keys unique for ever, the same body's key is dead once its reservation
    /// expired (330 for ever); the next attempt number is a new key that reserves again.
    #[test]
    fn a_key_whose_reservation_expired_answers_330_for_ever() {
        let mut sim = LpSim::new(LpConfig::default(), 1);
        let first = reserve(&mut sim, 0, 0);
        assert!(matches!(first, LpAnswer::Reserved { .. }), "{first:?}");
        assert_eq!(reserve(&mut sim, 0, 1_000), first, "the same key replays");
        let later = 31 * SECOND_US;
        for t in 0..3 {
            assert_eq!(reserve(&mut sim, 0, later + t), LpAnswer::Expired);
        }
        assert!(matches!(reserve(&mut sim, 1, later), LpAnswer::Reserved { .. }));
    }

    /// ☠️ Seed §4-c: a committed reservation cannot be released (336); a reserve with its key
    /// answers COMMITTED (the case the plugin ends as LP_ALREADY_COMMITTED).
    #[test]
    fn committed_reservations_answer_336_on_release_and_committed_on_reserve() {
        let mut sim = LpSim::new(LpConfig::default(), 2);
        let LpAnswer::Reserved { reservation, .. } = reserve(&mut sim, 0, 0) else { panic!("not reserved") };
        let body = ReservationBody { session: SessionId(1), reservation, amount_minor: 50, nonce: 0 };
        let key = reservation_key(crate::effect::op::LP_CONFIRM, &body, 0);
        sim.execute(2, &MatchingEffect::LpConfirm(LpOnReservation { body, key }), 10);
        assert!(matches!(answer(&mut sim), LpAnswer::Committed { .. }));
        let key = reservation_key(crate::effect::op::LP_RELEASE, &body, 0);
        sim.execute(3, &MatchingEffect::LpRelease(LpOnReservation { body, key }), 20);
        assert_eq!(answer(&mut sim), LpAnswer::CannotRelease);
        assert!(matches!(reserve(&mut sim, 0, 30), LpAnswer::Committed { .. }));
    }

    #[test]
    fn busy_makes_no_reservation_so_the_same_key_reserves_later() {
        let cfg = LpConfig { busy_ppm: 1_000_000, ..LpConfig::default() };
        let mut sim = LpSim::new(cfg, 3);
        assert_eq!(reserve(&mut sim, 0, 0), LpAnswer::Busy);
        sim.cfg.busy_ppm = 0;
        assert!(matches!(reserve(&mut sim, 0, 1), LpAnswer::Reserved { .. }));
    }
}
