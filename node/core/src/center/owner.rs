//! The plugin owner failure detector (see the center's module docs): watches how far each
//! center's acks went and when they last advanced, as read from the ack stream.

use crate::entry::{CenterId, Command, Payload, PluginKind, Seq};
use crate::plugin_host::{PluginHost, SetOwner};

pub(super) struct OwnerDetector {
    /// Per center: the highest seq acked and when it last advanced.
    seen: Vec<(Seq, u64)>,
    /// The terms proposed per plugin, and when (proposed again only after twice the silence).
    proposed: Vec<(PluginKind, u32, u64)>,
}

impl OwnerDetector {
    pub fn new(center_count: usize, now_us: u64) -> Self {
        OwnerDetector { seen: vec![(0, now_us); center_count], proposed: Vec::new() }
    }

    pub fn acked(&mut self, center: CenterId, seq_max: Seq, now_us: u64) {
        if let Some(seen) = self.seen.get_mut(center.index()) {
            if seq_max > seen.0 {
                *seen = (seq_max, now_us);
            }
        }
    }

    /// The earliest time a center can turn silent.
    pub fn next_check_us(&self, silence_us: u64) -> u64 {
        self.seen.iter().map(|&(_, since)| since.saturating_add(silence_us)).min().unwrap_or(u64::MAX)
    }

    /// A proposal of `me` as the owner of a plugin whose owner is silent, if `me` is the
    /// lowest-numbered other center whose acks still advance and it has not just proposed it.
    pub fn check(
        &mut self,
        me: CenterId,
        host: &PluginHost,
        seq_committed: Seq,
        now_us: u64,
        silence_us: u64,
    ) -> Option<Command> {
        if !host.is_live() {
            return None;
        }
        let advancing = |seen: &(Seq, u64)| now_us < seen.1.saturating_add(silence_us);
        for kind in host.kinds() {
            let Some((owner, term)) = host.owner(kind) else { continue };
            let Some(&(owner_acked, owner_since)) = self.seen.get(owner.index()) else { continue };
            let silent = now_us >= owner_since.saturating_add(silence_us) && seq_committed > owner_acked;
            if owner == me || !silent {
                continue;
            }
            let candidate = (0..self.seen.len()).find(|&c| c != owner.index() && advancing(&self.seen[c]));
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
