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
//! **Money moves only through ledger intents** (mission.md §3.4): a plugin's step gets a
//! [`Step`], through which it emits effects and applies [`LedgerIntent`] groups — all of a group
//! or none, answered at once with the ISO reason of a refusal — in the seq of the entry it
//! applies. It never holds the ledger; the host folds every intent applied into the step digest,
//! so the state hash covers them.
//!
//! **Effect ids are deterministic** (`seq << 16 | index within the entry`): an effect executed
//! again after a failover carries the same id, and its result re-enters with a `bmi` derived from
//! it, so the sequencer's dedupe (or the plugin itself) drops the second result. Adapters must
//! make re-execution harmless (same signed transaction, same nonce).

use crate::entry::{AccountId, Bmi, Currency, Entry, PluginCommand, PluginKind, Seq};
use crate::ledger::{Hold, HoldKey, IntentRejected, Ledger, LedgerIntent};

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

/// What a plugin's step may do besides changing its own state (see the module docs).
pub struct Step<'a> {
    seq: Seq,
    plugin: PluginKind,
    effects: &'a mut Vec<Effect>,
    ledger: &'a mut Ledger,
    /// Every intent offered, with the hold it names as it was before (releases and settles)
    /// and its group's answer (the host folds them into the step digest).
    log: &'a mut Vec<IntentRecord>,
}

/// One intent a plugin step offered, as the host records it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct IntentRecord {
    pub intent: LedgerIntent,
    /// For a release or a settle: the hold it names, as it was before (statements show it).
    pub hold: Option<Hold>,
    /// Its group applied (all of it) or not (none of it).
    pub applied: bool,
}

impl<'a> Step<'a> {
    /// A step of `plugin` at `seq` over `ledger` (the plugin host makes these; tests may too).
    pub fn new(
        seq: Seq,
        plugin: PluginKind,
        effects: &'a mut Vec<Effect>,
        ledger: &'a mut Ledger,
        log: &'a mut Vec<IntentRecord>,
    ) -> Self {
        Step { seq, plugin, effects, ledger, log }
    }

    pub fn seq(&self) -> Seq {
        self.seq
    }

    /// The effects emitted so far in this step (append to emit).
    pub fn effects(&mut self) -> &mut Vec<Effect> {
        self.effects
    }

    /// Applies a group of intents, all or none; on refusal nothing of the group moved.
    pub fn apply_intents(&mut self, intents: &[LedgerIntent]) -> Result<(), IntentRejected> {
        let first = self.log.len();
        for intent in intents {
            let hold = match *intent {
                LedgerIntent::Release { id } | LedgerIntent::Settle { id, .. } => self.hold(id),
                _ => None,
            };
            self.log.push(IntentRecord { intent: *intent, hold, applied: false });
        }
        let result = self.ledger.apply_intents(self.plugin, intents);
        for r in &mut self.log[first..] {
            r.applied = result.is_ok();
        }
        result
    }

    /// An account's available balance (`None`: unknown or closed).
    pub fn available_minor(&self, account: AccountId) -> Option<u64> {
        self.ledger.account(account).filter(|a| !a.closed).map(|a| a.balance_minor)
    }

    /// An open account's currency (`None`: unknown or closed). A plugin that pairs accounts —
    /// a hold on one settled to another — checks here that they can pair before it holds
    /// anything, instead of learning it from a refused settle later.
    pub fn account_currency(&self, account: AccountId) -> Option<Currency> {
        self.ledger.account(account).filter(|a| !a.closed).map(|a| a.currency)
    }

    /// One of this plugin's live holds.
    pub fn hold(&self, id: u64) -> Option<Hold> {
        self.ledger.hold(HoldKey { plugin: self.plugin, id }).copied()
    }
}

/// A checkpoint that does not decode.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("plugin checkpoint is malformed")]
pub struct PluginDecodeError;

/// An operator alert a plugin holds open in its state: raised when its condition starts, closed
/// when it ends, so every center holds the same open alerts and a failover loses none. Whoever
/// reads them (a node's `/metrics` and status) delivers them, at least once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginAlert {
    pub plugin: PluginKind,
    /// Stable while it is open, the same on every center.
    pub id: u64,
    /// One of the plugin's [`Plugin::ALERT_KINDS`].
    pub kind: &'static str,
    /// What it is about, e.g. `batch:17`.
    pub subject: String,
    /// Journal time it opened.
    pub since_us: u64,
}

/// What every plugin implements. No I/O, no clock: everything arrives in `apply`.
pub trait Plugin: Sized + Send + Sync + 'static {
    const KIND: PluginKind;
    /// The kinds of alert [`Plugin::alerts_open`] may list (series exist for each, at 0 when none
    /// is open).
    const ALERT_KINDS: &'static [&'static str] = &[];

    /// Applies one journal entry (its own commands and ticks are offered), emitting effects and
    /// ledger intents through `step`. Malformed plugin commands are recorded as rejected by the
    /// plugin, never a panic.
    fn apply(&mut self, entry: &Entry, step: &mut Step<'_>);

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

    /// The alerts open in the state ([`PluginAlert`]); O(open alerts).
    fn alerts_open(&self, out: &mut Vec<PluginAlert>) {
        let _ = out;
    }

    /// Checkpoint of the whole state, read back by [`Plugin::decode`].
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(buf: &[u8]) -> Result<Self, PluginDecodeError>;
}

/// A [`Plugin`] behind a pointer: what the host holds (the plugin set is closed, but the core
/// cannot name plugin crates, which depend on it).
pub trait HostedPlugin: Send + Sync {
    fn kind(&self) -> PluginKind;
    fn apply(&mut self, entry: &Entry, step: &mut Step<'_>);
    fn digest(&self) -> u64;
    fn state_hash(&self) -> u64;
    fn pending_effects(&self, out: &mut Vec<Effect>);
    fn figures(&self, out: &mut Vec<(&'static str, u64)>);
    fn alert_kinds(&self) -> &'static [&'static str];
    fn alerts_open(&self, out: &mut Vec<PluginAlert>);
    fn encode(&self, out: &mut Vec<u8>);
    /// Replaces the state with a decoded checkpoint.
    fn restore(&mut self, buf: &[u8]) -> Result<(), PluginDecodeError>;
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<T: Plugin> HostedPlugin for T {
    fn kind(&self) -> PluginKind {
        T::KIND
    }
    fn apply(&mut self, entry: &Entry, step: &mut Step<'_>) {
        Plugin::apply(self, entry, step)
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
    fn alert_kinds(&self) -> &'static [&'static str] {
        T::ALERT_KINDS
    }
    fn alerts_open(&self, out: &mut Vec<PluginAlert>) {
        Plugin::alerts_open(self, out)
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

    /// The plugins' open alerts ([`PluginAlert`]) as an operator reads them on a node's status
    /// — at least once: the same alert, by id, again while it stays open. An adapter that plays
    /// the people around its plugin (a simulated operator console) answers them; a real one
    /// ignores them (Prometheus and Alertmanager deliver them). Drivers call it with a center's
    /// view, not necessarily the owner's.
    fn alerts_seen(&mut self, alerts: &[PluginAlert], now_us: u64) {
        let _ = (alerts, now_us);
    }

    /// Named figures for reports.
    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        let _ = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{CenterId, Payload};

    #[test]
    fn a_step_reads_an_open_accounts_currency_and_balance_only() {
        let eur = Currency::new(b"EUR").unwrap_or_else(|e| panic!("{e}"));
        let mut ledger = Ledger::new();
        let mut seq = 0;
        let mut apply = |ledger: &mut Ledger, payload| {
            seq += 1;
            ledger.apply(&Entry {
                seq,
                epoch: 1,
                timestamp_us: seq,
                origin: CenterId(1),
                bmi: Bmi::NONE,
                payload,
            });
        };
        apply(&mut ledger, Payload::AccountOpen { account: AccountId(1), currency: eur });
        apply(&mut ledger, Payload::AccountFund { account: AccountId(1), amount_minor: 7 });
        apply(&mut ledger, Payload::AccountOpen { account: AccountId(2), currency: eur });
        apply(&mut ledger, Payload::AccountClose { account: AccountId(2) });
        let (mut effects, mut log) = (Vec::new(), Vec::new());
        let step = Step::new(9, PluginKind::Matching, &mut effects, &mut ledger, &mut log);
        assert_eq!(step.account_currency(AccountId(1)), Some(eur));
        assert_eq!(step.available_minor(AccountId(1)), Some(7));
        assert_eq!(step.account_currency(AccountId(2)), None, "closed");
        assert_eq!(step.account_currency(AccountId(3)), None, "unknown");
    }
}
