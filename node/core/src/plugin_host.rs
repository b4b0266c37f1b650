//! The plugin host: a center's enabled plugins, fed the journal in seq order.
//!
//! The center hands every applied entry to [`PluginHost::apply`] right after its ledger applied
//! it. A `Tick` goes to every plugin, a `Payload::Plugin` command to the plugin of its kind (or,
//! for the host's own ops, to the host); anything else — transfers, the hot path — is not looked
//! at. For an entry it did route, the host returns a **step digest**: the plugins' O(1)
//! [`Plugin::digest`](crate::plugin::Plugin::digest) and every effect they emitted (id, op,
//! body). The center folds it into its chained state hash (`Ledger::fold`), so the applied-ack
//! vouches for plugin state, and a center whose plugin diverged is caught by the quorum
//! finalizer at that very seq. The O(state) `state_hash` of a plugin is computed only when a
//! checkpoint is written and read (and checked there), never per entry.
//!
//! **Ownership.** Effects are executed by one center, the plugin's *owner*: DC1 at first, then
//! whichever center the latest accepted [`SetOwner`] entry names. Because the owner is plugin
//! state decided by journal entries, every center agrees on it at every seq. A `SetOwner` must
//! carry the next term (`term + 1`), so two centers proposing a takeover at once cannot both
//! win: the sequencer dedupes their common `bmi` ([`SetOwner::bmi`]) and the host refuses any
//! stale term.
//!
//! **No effect is lost.** A plugin keeps every effect pending in its own state until its result
//! re-enters the journal ([`Plugin::pending_effects`](crate::plugin::Plugin::pending_effects)).
//! A center that becomes the owner (`SetOwner` naming it) queues them all for execution, and so
//! does an owner that restarts, once it has replayed the journal ([`PluginHost::set_live`]):
//! whatever the previous owner executed or not, everything pending is executed again.
//! Re-execution is harmless by the adapters' contract (same effect id ⇒ the same signed
//! transaction, the same nonce; the result's `bmi` derives from the effect id, so the sequencer
//! dedupes it; and a plugin ignores a result for an effect it no longer awaits).
//!
//! **Replay never talks to the world.** Until [`PluginHost::set_live`], a host applies entries
//! but queues no effects: a center catching up re-derives state, it does not redo the past.

use crate::entry::{Bmi, CenterId, Entry, InputError, Payload, PluginCommand, PluginKind};
use crate::hash::{bytes64, fold, mix64};
use crate::ledger::Ledger;
use crate::limits::CENTER_COUNT_MAX;
use crate::plugin::{Effect, HostedPlugin, IntentRecord, Step};

/// Plugin command ops from here up are the host's, never handed to the plugin.
pub const HOST_OP_FIRST: u16 = 0xFF00;
/// Moves a plugin's ownership: body = `term u32 LE | center u8`.
pub const HOST_OP_SET_OWNER: u16 = 0xFF01;

/// Who owns every plugin before the first `SetOwner`.
pub const OWNER_INITIAL: CenterId = CenterId(1);

const CHECKPOINT_VERSION: u8 = 1;
const TICK_SEED: u64 = 0x7 << 56;

/// The host command that moves ownership of one plugin's effects.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct SetOwner {
    /// Must be the current term + 1.
    pub term: u32,
    pub owner: CenterId,
}

impl SetOwner {
    pub fn to_command(self, plugin: PluginKind) -> Result<PluginCommand, InputError> {
        let mut body = self.term.to_le_bytes().to_vec();
        body.push(self.owner.0);
        PluginCommand::new(plugin, HOST_OP_SET_OWNER, body)
    }

    /// The idempotency key: one per plugin and term, whoever proposes it.
    pub fn bmi(plugin: PluginKind, term: u32) -> Result<Bmi, InputError> {
        Bmi::numbered(&format!("OWNER-{}-", plugin as u8), u64::from(term))
    }

    fn decode(body: &[u8]) -> Option<SetOwner> {
        match body {
            [a, b, c, d, center] => {
                let owner = CenterId(*center);
                (1..=CENTER_COUNT_MAX as u8)
                    .contains(center)
                    .then_some(SetOwner { term: u32::from_le_bytes([*a, *b, *c, *d]), owner })
            }
            _ => None,
        }
    }
}

/// One plugin's part of a host checkpoint (a row of `plugin_state` in PostgreSQL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginCheckpoint {
    pub kind: PluginKind,
    pub owner: CenterId,
    pub term: u32,
    pub host_ops_refused: u64,
    /// The plugin's whole-state hash, checked again after decoding.
    pub state_hash: u64,
    pub state: Vec<u8>,
}

/// A host checkpoint that does not read back.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("plugin host checkpoint: {0}")]
pub struct HostDecodeError(pub &'static str);

/// Two plugins of one kind.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("plugin {0:?} is enabled twice")]
pub struct DuplicatePlugin(pub PluginKind);

struct Slot {
    plugin: Box<dyn HostedPlugin>,
    owner: CenterId,
    term: u32,
    /// `SetOwner` commands refused (stale term, malformed, unknown op).
    host_ops_refused: u64,
}

/// A center's plugins (see the module docs).
pub struct PluginHost {
    me: CenterId,
    live: bool,
    slots: Vec<Slot>,
    /// Effects this center must execute, in emission order.
    outbox: Vec<Effect>,
    scratch: Vec<Effect>,
    /// The intents of the step being applied, with their answers (the digest folds them).
    intents_log: Vec<IntentRecord>,
    /// The intents applied at the last entry a plugin took, by plugin (statements read them).
    intents_applied: Vec<(PluginKind, IntentRecord)>,
}

impl PluginHost {
    /// A host for center `me`, not live yet; plugins must be of distinct kinds.
    pub fn new(me: CenterId, plugins: Vec<Box<dyn HostedPlugin>>) -> Result<Self, DuplicatePlugin> {
        let mut slots: Vec<Slot> = Vec::with_capacity(plugins.len());
        for plugin in plugins {
            if slots.iter().any(|s| s.plugin.kind() == plugin.kind()) {
                return Err(DuplicatePlugin(plugin.kind()));
            }
            slots.push(Slot { plugin, owner: OWNER_INITIAL, term: 0, host_ops_refused: 0 });
        }
        let mut host = Self::empty(me);
        host.slots = slots;
        Ok(host)
    }

    /// A host with no plugins: `apply` returns `None` for everything.
    pub fn empty(me: CenterId) -> Self {
        PluginHost {
            me,
            live: false,
            slots: Vec::new(),
            outbox: Vec::new(),
            scratch: Vec::new(),
            intents_log: Vec::new(),
            intents_applied: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn center(&self) -> CenterId {
        self.me
    }

    pub fn kinds(&self) -> impl Iterator<Item = PluginKind> + '_ {
        self.slots.iter().map(|s| s.plugin.kind())
    }

    pub fn plugin(&self, kind: PluginKind) -> Option<&dyn HostedPlugin> {
        self.slot(kind).map(|s| s.plugin.as_ref())
    }

    /// The owner of a plugin's effects and its term.
    pub fn owner(&self, kind: PluginKind) -> Option<(CenterId, u32)> {
        self.slot(kind).map(|s| (s.owner, s.term))
    }

    pub fn is_live(&self) -> bool {
        self.live
    }

    /// The center has caught up with the journal: from now on it executes the effects of the
    /// plugins it owns, starting with everything they hold pending (an owner that restarted
    /// cannot know which of them it executed before).
    pub fn set_live(&mut self) {
        if self.live {
            return;
        }
        self.live = true;
        for s in &self.slots {
            if s.owner == self.me {
                s.plugin.pending_effects(&mut self.outbox);
            }
        }
    }

    /// Back to replay mode (a driver that knows it is behind again).
    pub fn set_replaying(&mut self) {
        self.live = false;
        self.outbox.clear();
    }

    /// Applies one entry (after the ledger applied it, in seq order; the plugins' ledger intents
    /// go to `ledger` in this same seq). Returns the step digest to fold into the state hash if a
    /// plugin (or the host) took the entry, `None` otherwise.
    pub fn apply(&mut self, entry: &Entry, ledger: &mut Ledger) -> Option<u64> {
        match &entry.payload {
            Payload::Tick if !self.slots.is_empty() => {
                self.intents_applied.clear();
                let mut digest = mix64(entry.seq ^ TICK_SEED);
                for i in 0..self.slots.len() {
                    digest = fold(digest, self.step(i, entry, ledger));
                }
                Some(digest)
            }
            Payload::Plugin(c) => {
                let i = self.slots.iter().position(|s| s.plugin.kind() == c.plugin)?;
                self.intents_applied.clear();
                Some(if c.op >= HOST_OP_FIRST { self.host_op(i, c) } else { self.step(i, entry, ledger) })
            }
            _ => None,
        }
    }

    /// The intents applied at the last entry a plugin took, by plugin (statements read them).
    pub fn intents_applied(&self) -> &[(PluginKind, IntentRecord)] {
        &self.intents_applied
    }

    /// Moves the effects this center must execute into `out`.
    pub fn take_effects(&mut self, out: &mut Vec<Effect>) {
        out.append(&mut self.outbox);
    }

    pub fn has_effects(&self) -> bool {
        !self.outbox.is_empty()
    }

    fn slot(&self, kind: PluginKind) -> Option<&Slot> {
        self.slots.iter().find(|s| s.plugin.kind() == kind)
    }

    fn step(&mut self, i: usize, entry: &Entry, ledger: &mut Ledger) -> u64 {
        let slot = &mut self.slots[i];
        let kind = slot.plugin.kind();
        self.scratch.clear();
        self.intents_log.clear();
        let mut step = Step::new(entry.seq, kind, &mut self.scratch, ledger, &mut self.intents_log);
        slot.plugin.apply(entry, &mut step);
        let mut digest = mix64(u64::from(kind as u8) ^ slot.plugin.digest());
        for e in &self.scratch {
            digest = fold(digest, e.effect_id ^ (u64::from(e.op) << 48));
            digest = fold(digest, bytes64(u64::from(e.op), &e.body));
        }
        for r in &self.intents_log {
            for w in r.intent.digest_words() {
                digest = fold(digest, w);
            }
            digest = fold(digest, u64::from(r.applied));
            if r.applied {
                self.intents_applied.push((kind, *r));
            }
        }
        if self.live && slot.owner == self.me {
            self.outbox.append(&mut self.scratch);
        }
        digest
    }

    fn host_op(&mut self, i: usize, c: &PluginCommand) -> u64 {
        let me = self.me;
        let live = self.live;
        let slot = &mut self.slots[i];
        let set = (c.op == HOST_OP_SET_OWNER).then(|| SetOwner::decode(&c.body)).flatten();
        match set {
            Some(s) if s.term == slot.term.wrapping_add(1) => {
                let was = slot.owner;
                slot.owner = s.owner;
                slot.term = s.term;
                if live && s.owner == me && was != me {
                    slot.plugin.pending_effects(&mut self.outbox);
                }
            }
            _ => slot.host_ops_refused += 1,
        }
        let mut digest = mix64(u64::from(slot.plugin.kind() as u8) ^ 0xB0_57);
        digest = fold(digest, u64::from(slot.term) << 8 | u64::from(slot.owner.0));
        fold(digest, slot.host_ops_refused)
    }

    /// Figures of every plugin, plus the host's own (owner, term), prefixed by nothing: plugins
    /// name their figures uniquely.
    pub fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        for s in &self.slots {
            out.push(("owner_center", u64::from(s.owner.0)));
            out.push(("owner_term", u64::from(s.term)));
            s.plugin.figures(out);
        }
    }

    /// Every plugin's open alerts (see [`crate::plugin::PluginAlert`]).
    pub fn alerts_open(&self, out: &mut Vec<crate::plugin::PluginAlert>) {
        for s in &self.slots {
            s.plugin.alerts_open(out);
        }
    }

    /// Every hosted plugin's alert kinds: `(plugin, kind)`.
    pub fn alert_kinds(&self) -> impl Iterator<Item = (PluginKind, &'static str)> + '_ {
        self.slots.iter().flat_map(|s| s.plugin.alert_kinds().iter().map(move |k| (s.plugin.kind(), *k)))
    }

    /// Hash of the whole host state (O(state): checkpoints and audits only).
    pub fn state_hash(&self) -> u64 {
        Self::hash_of(&self.checkpoints())
    }

    fn hash_of(cps: &[PluginCheckpoint]) -> u64 {
        let mut h = mix64(cps.len() as u64);
        for cp in cps {
            let head = u64::from(cp.kind as u8) << 56
                ^ u64::from(cp.owner.0) << 48
                ^ u64::from(cp.term) << 8
                ^ mix64(cp.host_ops_refused);
            h = fold(h, head);
            h = fold(h, cp.state_hash);
        }
        h
    }

    /// [`PluginHost::encode`] and [`PluginHost::state_hash`] in one pass over the state.
    pub fn encode_with_hash(&self, out: &mut Vec<u8>) -> u64 {
        let cps = self.checkpoints();
        Self::write(&cps, out);
        Self::hash_of(&cps)
    }

    /// Checkpoint: `version u8 | count u8 | per plugin: kind u8, owner u8, term u32,
    /// host_ops_refused u64, state_hash u64, len u64, state`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        Self::write(&self.checkpoints(), out);
    }

    fn write(cps: &[PluginCheckpoint], out: &mut Vec<u8>) {
        out.push(CHECKPOINT_VERSION);
        out.push(cps.len() as u8);
        for cp in cps {
            out.push(cp.kind as u8);
            out.push(cp.owner.0);
            out.extend_from_slice(&cp.term.to_le_bytes());
            out.extend_from_slice(&cp.host_ops_refused.to_le_bytes());
            out.extend_from_slice(&cp.state_hash.to_le_bytes());
            out.extend_from_slice(&(cp.state.len() as u64).to_le_bytes());
            out.extend_from_slice(&cp.state);
        }
    }

    /// Every plugin's checkpoint, in the host's order.
    pub fn checkpoints(&self) -> Vec<PluginCheckpoint> {
        self.slots
            .iter()
            .map(|s| {
                let mut state = Vec::new();
                s.plugin.encode(&mut state);
                PluginCheckpoint {
                    kind: s.plugin.kind(),
                    owner: s.owner,
                    term: s.term,
                    host_ops_refused: s.host_ops_refused,
                    state_hash: s.plugin.state_hash(),
                    state,
                }
            })
            .collect()
    }

    /// Restores from per-plugin checkpoints: exactly one for every plugin of this host (any
    /// order); each state's hash is checked after decoding. The host goes back to not live.
    pub fn restore_checkpoints(&mut self, cps: &[PluginCheckpoint]) -> Result<(), HostDecodeError> {
        if cps.len() != self.slots.len() {
            return Err(HostDecodeError("the checkpoint holds another set of plugins"));
        }
        for s in &mut self.slots {
            let kind = s.plugin.kind();
            let cp = cps
                .iter()
                .find(|c| c.kind == kind)
                .ok_or(HostDecodeError("the checkpoint holds another set of plugins"))?;
            Self::restore_slot(s, cp)?;
        }
        self.set_replaying();
        Ok(())
    }

    fn restore_slot(s: &mut Slot, cp: &PluginCheckpoint) -> Result<(), HostDecodeError> {
        if !(1..=CENTER_COUNT_MAX as u8).contains(&cp.owner.0) {
            return Err(HostDecodeError("owner out of range"));
        }
        s.plugin.restore(&cp.state).map_err(|_| HostDecodeError("a plugin state is malformed"))?;
        if s.plugin.state_hash() != cp.state_hash {
            return Err(HostDecodeError("a plugin state does not match its hash"));
        }
        s.owner = cp.owner;
        s.term = cp.term;
        s.host_ops_refused = cp.host_ops_refused;
        Ok(())
    }

    /// The plugin kinds a checkpoint written by [`PluginHost::encode`] holds, in order (`None`
    /// if it does not read as one): an audit rebuilds the same set from it.
    pub fn kinds_in(buf: &[u8]) -> Option<Vec<PluginKind>> {
        let mut r = Reader { buf, at: 0 };
        if r.take(1).ok()?[0] != CHECKPOINT_VERSION {
            return None;
        }
        let n = r.take(1).ok()?[0];
        let mut kinds = Vec::new();
        for _ in 0..n {
            kinds.push(PluginKind::from_u8(r.take(1).ok()?[0])?);
            r.take(1 + 4 + 8 + 8).ok()?;
            let len = usize::try_from(r.u64().ok()?).ok()?;
            r.take(len).ok()?;
        }
        Some(kinds)
    }

    /// Restores the state written by [`PluginHost::encode`] into this host's plugins, which must
    /// be the same kinds in the same order; each plugin's state hash is checked after decoding.
    /// Returns the bytes used. The host stays (or goes back to) not live.
    pub fn restore(&mut self, buf: &[u8]) -> Result<usize, HostDecodeError> {
        let mut r = Reader { buf, at: 0 };
        if r.take(1)?[0] != CHECKPOINT_VERSION {
            return Err(HostDecodeError("unknown version"));
        }
        if usize::from(r.take(1)?[0]) != self.slots.len() {
            return Err(HostDecodeError("the checkpoint holds another set of plugins"));
        }
        for s in &mut self.slots {
            let kind = s.plugin.kind();
            if r.take(1)?[0] != kind as u8 {
                return Err(HostDecodeError("the checkpoint holds another set of plugins"));
            }
            let owner = CenterId(r.take(1)?[0]);
            let (term, host_ops_refused, state_hash) = (r.u32()?, r.u64()?, r.u64()?);
            let len = usize::try_from(r.u64()?).map_err(|_| HostDecodeError("length"))?;
            let state = r.take(len)?.to_vec();
            let cp = PluginCheckpoint { kind, owner, term, host_ops_refused, state_hash, state };
            Self::restore_slot(s, &cp)?;
        }
        self.set_replaying();
        Ok(r.at)
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], HostDecodeError> {
        let end =
            self.at.checked_add(n).filter(|e| *e <= self.buf.len()).ok_or(HostDecodeError("truncated"))?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, HostDecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, HostDecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

#[cfg(test)]
mod tests;
