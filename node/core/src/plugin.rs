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

use crate::entry::{Entry, PluginKind, Seq};

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
pub trait Plugin: Sized {
    const KIND: PluginKind;

    /// Applies one journal entry (all entries are offered: the plugin's own commands, ticks,
    /// and anything else it chooses to watch), appending effects to `effects`. Malformed plugin
    /// commands are recorded as rejected by the plugin, never a panic.
    fn apply(&mut self, entry: &Entry, effects: &mut Vec<Effect>);

    /// Hash of the whole plugin state; folded into the center's state hash.
    fn state_hash(&self) -> u64;

    /// Checkpoint of the whole state, read back by [`Plugin::decode`].
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(buf: &[u8]) -> Result<Self, PluginDecodeError>;
}
