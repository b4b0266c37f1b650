//! The plugin contract: deterministic state machines over the ordered journal (mission.md §3).
//!
//! A plugin sees every journal entry in seq order, with the entry's timestamp as its only "now"
//! (a `Tick` when nothing else happens). From an entry it updates its state and may emit
//! [`Effect`]s — requests to the outside world (read a balance, broadcast a transaction, look up
//! receipts, raise an alert). Effects are executed by adapters in the node on exactly one center
//! (the owner); their results come back as new journal entries (`Payload::Plugin` commands with
//! a result op code), so every center holds identical plugin state and a plugin rebuilds from the
//! journal alone.
//!
//! **Effect ids are deterministic** (`seq << 16 | index within the entry`): an effect executed
//! again after a failover carries the same id, and its result re-enters with a `bmi` derived from
//! it, so the sequencer's dedupe (or the plugin itself) drops the second result. Adapters must
//! make re-execution harmless (same signed transaction, same nonce).

use crate::entry::{Bmi, Entry, PluginCommand, PluginKind, Seq};

/// A request to the outside world, in the plugin's own encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Effect {
    pub plugin: PluginKind,
    /// `seq << 16 | index`: unique, and the same on every center and after any replay.
    pub effect_id: u64,
    /// The plugin's own effect code.
    pub op: u16,
    pub body: Vec<u8>,
}

impl Effect {
    pub fn id_for(seq: Seq, index: u16) -> u64 {
        (seq << 16) | u64::from(index)
    }
}

/// A checkpoint that does not decode.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("plugin checkpoint is malformed")]
pub struct PluginDecodeError;

/// What every plugin implements. No I/O, no clock: everything arrives in `apply`.
pub trait Plugin: Sized + Send + 'static {
    const KIND: PluginKind;

    /// Applies one journal entry (all entries are offered: the plugin's own commands, ticks,
    /// and anything else it chooses to watch), appending effects to `effects`. Malformed plugin
    /// commands are recorded as rejected by the plugin, never a panic.
    fn apply(&mut self, entry: &Entry, effects: &mut Vec<Effect>);

    /// Hash of the whole plugin state, O(state): checked when a checkpoint is written and read
    /// and compared across centers by audits, never computed on the hot path.
    fn state_hash(&self) -> u64;

    /// An O(1) summary of the state (sizes, counters, watermarks), folded into the center's
    /// state hash after every entry the plugin is given, together with the effects it emitted
    /// (see `plugin_host`). Cheap by contract: it runs once per plugin entry and `Tick`.
    fn digest(&self) -> u64;

    /// Every effect whose result the plugin still waits for, exactly as first emitted (same
    /// id, same body). A new owner (or an owner restarting) executes them again: no effect is
    /// lost across a failover. Fire-and-forget effects (alerts) are not pending.
    fn pending_effects(&self, out: &mut Vec<Effect>);

    /// Named figures for reports (counts; computing them may be O(state)).
    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        let _ = out;
    }

    /// Checkpoint of the whole state, read back by [`Plugin::decode`].
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(buf: &[u8]) -> Result<Self, PluginDecodeError>;
}

/// A [`Plugin`] behind a pointer: what the host holds (the plugin set is closed, but the core
/// cannot name plugin crates, which depend on it).
pub trait HostedPlugin: Send {
    fn kind(&self) -> PluginKind;
    fn apply(&mut self, entry: &Entry, effects: &mut Vec<Effect>);
    fn digest(&self) -> u64;
    fn state_hash(&self) -> u64;
    fn pending_effects(&self, out: &mut Vec<Effect>);
    fn figures(&self, out: &mut Vec<(&'static str, u64)>);
    fn encode(&self, out: &mut Vec<u8>);
    /// Replaces the state with a decoded checkpoint.
    fn restore(&mut self, buf: &[u8]) -> Result<(), PluginDecodeError>;
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<T: Plugin> HostedPlugin for T {
    fn kind(&self) -> PluginKind {
        T::KIND
    }
    fn apply(&mut self, entry: &Entry, effects: &mut Vec<Effect>) {
        Plugin::apply(self, entry, effects)
    }
    fn digest(&self) -> u64 {
        Plugin::digest(self)
    }
    fn state_hash(&self) -> u64 {
        Plugin::state_hash(self)
    }
    fn pending_effects(&self, out: &mut Vec<Effect>) {
        Plugin::pending_effects(self, out)
    }
    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        Plugin::figures(self, out)
    }
    fn encode(&self, out: &mut Vec<u8>) {
        Plugin::encode(self, out)
    }
    fn restore(&mut self, buf: &[u8]) -> Result<(), PluginDecodeError> {
        *self = T::decode(buf)?;
        Ok(())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A plugin's outside world as the node drives it: the chain client, the LP client — or their
/// simulators. Sans-IO like the plugins: a real client does its I/O between `execute` and
/// `poll`; the node runs it on the owner center's adapter thread, the simulator in its step loop.
pub trait EffectAdapter: Send {
    /// Starts executing one effect. Executing the same effect again (same id) must be harmless:
    /// the same signed transaction, the same answer.
    fn execute(&mut self, effect: &Effect, now_us: u64);

    /// Results due by `now_us`, as commands for the journal: each with a `bmi` derived from what
    /// it answers (the effect id, the transaction hash), so that a result sent twice — by an old
    /// and a new owner — is deduplicated by the sequencer.
    fn poll(&mut self, now_us: u64, out: &mut Vec<(Bmi, PluginCommand)>);

    /// Named figures for reports.
    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        let _ = out;
    }
}
