//! The plugin owner failure detector (see the center's module docs): watches how far each
//! center's acks went and since when each has stood behind the others, as read from the ack
//! stream.

use crate::entry::{CenterId, Command, Payload, PluginKind, Seq};
use crate::plugin_host::{PluginHost, SetOwner};

pub(super) struct OwnerDetector {
    /// Per center: the highest seq acked, and since when it has stood behind the frontier
    /// (`None`: caught up).
    seen: Vec<(Seq, Option<u64>)>,
    /// The highest seq any center acked (or this one committed).
    frontier: Seq,
    /// The terms proposed per plugin, and when (proposed again only after twice the silence).
    proposed: Vec<(PluginKind, u32, u64)>,
}

/// **Decision: silence is standing behind, not standing still.** A center is silent once it has
/// stood behind what another center acked for the whole silence period. When nothing is
/// sequenced (no leader for a while, idle ticks off) nobody advances and nobody is silent; when
/// entries flow again the first center to ack does not take the others for silent, they had
/// caught up (found by a drill: two centers proposed themselves after a leader change).
impl OwnerDetector {
    pub fn new(center_count: usize, _now_us: u64) -> Self {
        OwnerDetector { seen: vec![(0, None); center_count], frontier: 0, proposed: Vec::new() }
    }

    pub fn acked(&mut self, center: CenterId, seq_max: Seq, now_us: u64) {
        if let Some(seen) = self.seen.get_mut(center.index()) {
            if seq_max > seen.0 {
                // It moved: behind from now on if still short of the frontier.
                *seen = (seq_max, (seq_max < self.frontier).then_some(now_us));
            }
        }
        self.advance_frontier(seq_max, now_us);
    }

    fn advance_frontier(&mut self, seq: Seq, now_us: u64) {
        if seq <= self.frontier {
            return;
        }
        self.frontier = seq;
        for seen in &mut self.seen {
            if seen.0 < seq && seen.1.is_none() {
                seen.1 = Some(now_us);
            }
        }
    }

    /// The earliest time a center can turn silent.
    pub fn next_check_us(&self, silence_us: u64) -> u64 {
        self.seen
            .iter()
            .filter_map(|&(_, behind)| behind)
            .map(|t| t.saturating_add(silence_us))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// A proposal of `me` as the owner of a plugin whose owner is silent, if `me` is the
    /// lowest-numbered other center not silent and it has not just proposed it.
    pub fn check(
        &mut self,
        me: CenterId,
        host: &PluginHost,
        seq_committed: Seq,
        now_us: u64,
        silence_us: u64,
    ) -> Option<Command> {
        self.advance_frontier(seq_committed, now_us);
        if !host.is_live() {
            return None;
        }
        let silent =
            |seen: &(Seq, Option<u64>)| seen.1.is_some_and(|t| now_us >= t.saturating_add(silence_us));
        for kind in host.kinds() {
            let Some((owner, term)) = host.owner(kind) else { continue };
            let Some(owner_seen) = self.seen.get(owner.index()) else { continue };
            if owner == me || !silent(owner_seen) {
                continue;
            }
            let candidate = (0..self.seen.len()).find(|&c| c != owner.index() && !silent(&self.seen[c]));
            if candidate != Some(me.index()) {
                continue;
            }
            let Some(next) = term.checked_add(1) else { continue };
            let recent = self
                .proposed
                .iter()
                .any(|&(k, t, at)| k == kind && t == next && now_us < at.saturating_add(2 * silence_us));
            if recent {
                continue;
            }
            self.proposed.retain(|&(k, _, _)| k != kind);
            self.proposed.push((kind, next, now_us));
            return proposal(me, kind, next);
        }
        None
    }
}

/// The command by which `me` proposes itself as `kind`'s owner for `term`.
fn proposal(me: CenterId, kind: PluginKind, term: u32) -> Option<Command> {
    let bmi = SetOwner::bmi(kind, term).ok()?;
    let command = SetOwner { term, owner: me }.to_command(kind).ok()?;
    Some(Command { origin: me, bmi, payload: Payload::Plugin(command) })
}
