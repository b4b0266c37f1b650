//! Plugins in the production engine (`--collection`): the plugin set of this node, its stored
//! state, and the adapters that execute the owner's effects.
//!
//! * **Host**: the plugin host is the `Center`'s (applied with the ledger, its step digests in
//!   the state hash, live once caught up, its owner's effects in `Outputs::effects`, the owner
//!   failure detector's proposals in `Outputs::commands`). Here only its I/O: the [`Router`]
//!   restores it from the `plugin_state` rows (and refuses to start if they are not at the
//!   ledger's watermark, or if plugins and stored rows disagree), says what to store with each
//!   commit (a snapshot when a plugin took one of its entries — taken when the commit is polled,
//!   so it is the state at the commit's last seq — otherwise only the rows' seq moves), and
//!   routes effects to the adapter task of their plugin.
//! * **Adapters** ([`Adapter`], one task per plugin): execute effects with the plugin's
//!   `EffectAdapter` and submit its results to the inbound topic (origin this center). Only the
//!   live owner talks to the outside world: the center task tells each adapter whether this
//!   center is its plugin's live owner (a `watch`, from the host's state — never from a status
//!   figure). A new or restarted owner re-executes every pending effect: harmless, the results'
//!   `bmi`s derive from the effect ids and the sequencer dedupes them.
//!
//! **Each process has its own chain simulator.** The simulator stands in for a chain RPC, and
//! here every `rtgs node` builds its own (same seed, same deposits), whereas a real deployment
//! points every center at the same chain. After a failover the new owner's simulated chain has
//! not seen what the old owner broadcast: the plugin state stays identical across centers (it is
//! decided by the journal), but "no sweep broadcast twice" cannot be shown across processes. That
//! proof stays with the embedded engine and the simulator (`rtgs sim --collection`), whose
//! centers share one chain simulator.

use crate::broker::{submit, Broker};
use crate::error::{EngineError, Invariant};
use crate::limits::{
    ADAPTER_FIGURES_INTERVAL, ADAPTER_POLL_INTERVAL, EFFECT_OUTBOX_BATCHES_MAX, EFFECT_QUEUE_BATCHES,
};
use crate::pg::PgRetry;
use crate::status::{lock, PluginStatus};
use rdkafka::producer::FutureProducer;
use rtgs_core::entry::{CenterId, Command, Payload, PluginKind, Seq};
use rtgs_core::plugin::{Effect, EffectAdapter};
use rtgs_core::plugin_host::{PluginCheckpoint, PluginHost};
use rtgs_pg::center_store::{CenterStore, PluginSave};
use rtgs_plugins::PluginsConfig;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, watch};

/// What a commit stores of the plugin state (owned; `PluginSave` borrows it).
pub enum StoredPlugins {
    /// No plugins.
    None,
    /// No plugin took an entry of the commit: the stored rows move to its last seq.
    Advance,
    /// The state changed: these checkpoints, taken when the commit was polled.
    Snapshot(Vec<PluginCheckpoint>),
}

impl StoredPlugins {
    /// `self` then `next` as one commit: the later snapshot wins, and a snapshot followed by
    /// commits no plugin looked at is still the state at the end.
    pub fn merge(&mut self, next: StoredPlugins) {
        match next {
            StoredPlugins::None => {}
            StoredPlugins::Advance => {
                if let StoredPlugins::None = self {
                    *self = StoredPlugins::Advance;
                }
            }
            snapshot @ StoredPlugins::Snapshot(_) => *self = snapshot,
        }
    }

    pub fn as_save(&self) -> PluginSave<'_> {
        match self {
            StoredPlugins::None => PluginSave::None,
            StoredPlugins::Advance => PluginSave::Advance,
            StoredPlugins::Snapshot(cps) => PluginSave::Snapshot(cps),
        }
    }
}

/// The center task's side of the plugins (see the module docs).
pub struct Router {
    name: String,
    me: CenterId,
    host: Option<PluginHost>,
    routes: Vec<Route>,
    /// Nothing is stored yet (a fresh center): the first commit stores a whole snapshot.
    unstored: bool,
    status: Arc<PluginStatus>,
}

struct Route {
    kind: PluginKind,
    effects: mpsc::Sender<Vec<Effect>>,
    live_owner: watch::Sender<bool>,
    /// Effect batches that did not fit the adapter's queue yet.
    outbox: VecDeque<Vec<Effect>>,
}

/// The router and the adapter tasks of `config`'s plugins for center `me` (`None` without
/// plugins).
pub fn links(
    name: &str,
    me: CenterId,
    config: &PluginsConfig,
    broker: &Broker,
    status: Option<Arc<PluginStatus>>,
) -> Result<Option<(Router, Vec<Adapter>)>, EngineError> {
    let Some(status) = status.filter(|_| !config.is_empty()) else { return Ok(None) };
    let (mut plugins, mut routes, mut adapters) = (Vec::new(), Vec::new(), Vec::new());
    for (plugin, adapter) in config.with_adapters() {
        let kind = plugin.kind();
        let (effects_tx, effects_rx) = mpsc::channel(EFFECT_QUEUE_BATCHES);
        let (live_tx, live_rx) = watch::channel(false);
        routes.push(Route { kind, effects: effects_tx, live_owner: live_tx, outbox: VecDeque::new() });
        adapters.push(Adapter {
            name: name.to_string(),
            me,
            kind,
            adapter,
            effects: effects_rx,
            live_owner: live_rx,
            producer: broker.producer(&format!("{name}-plugins-{}", kind.name()))?,
            broker: broker.clone(),
            status: Arc::clone(&status),
        });
        plugins.push(plugin);
    }
    let host = PluginHost::new(me, plugins).map_err(|e| EngineError::Config(e.to_string()))?;
    let router = Router { name: name.to_string(), me, host: Some(host), routes, unstored: true, status };
    Ok(Some((router, adapters)))
}

/// Without plugins: an empty host, after checking that none is stored (a center that hosted
/// plugins cannot drop them: their digests are in its state hash).
pub async fn refuse_stored(
    name: &str,
    me: CenterId,
    store: &CenterStore,
    retry: &PgRetry,
) -> Result<PluginHost, EngineError> {
    let stored = retry.get("load plugin state", || store.plugin_checkpoints()).await?;
    if stored.is_some() {
        return Err(EngineError::Config(format!(
            "{name}: plugin state is stored in this center's database but plugins are not enabled; start \
             with the same plugin flags (--collection, --matching) as the other centers"
        )));
    }
    Ok(PluginHost::empty(me))
}

impl Router {
    /// The host restored from the `plugin_state` rows, checked against the ledger's watermark.
    pub async fn restore(
        &mut self,
        store: &CenterStore,
        retry: &PgRetry,
        seq_applied: Seq,
    ) -> Result<PluginHost, EngineError> {
        let mut host = self.host.take().ok_or_else(|| Invariant("plugin host restored twice".into()))?;
        let rows = retry.get("load plugin state", || store.plugin_checkpoints()).await?;
        if let Some((_, cps)) = &rows {
            rtgs_pg::plugin_store::restore(&mut host, cps)
                .map_err(|e| EngineError::store("the stored plugin state does not load", e))?;
        }
        let stored = rows.map(|(seq, _)| seq);
        let name = &self.name;
        match stored {
            Some(at) if at != seq_applied => {
                return Err(Invariant(format!(
                    "{name}: the stored plugin state is at seq {at} but the ledger at seq {seq_applied}; they are \
                     committed together, so the database was changed outside the node"
                ))
                .into())
            }
            None if seq_applied > 0 => {
                return Err(EngineError::Config(format!(
                    "{name}: plugins are enabled but this center applied {seq_applied} entries without them \
                     (no plugin state is stored); its state hash would diverge from centers that host them"
                )))
            }
            _ => {}
        }
        tracing::info!(
            center = %name,
            "plugins {:?} resume at seq {seq_applied} ({})",
            host.kinds().collect::<Vec<_>>(),
            if stored.is_some() { "stored state" } else { "fresh" }
        );
        self.unstored = stored.is_none();
        self.show_snapshot(&host, &host.checkpoints(), seq_applied);
        self.observe(&host);
        Ok(host)
    }

    /// What to store with a commit ending at `seq`: the checkpoints if the state changed (O(state):
    /// encode and whole-state hash) or nothing is stored yet, otherwise only the rows' seq moves.
    pub fn save(&mut self, host: &PluginHost, seq: Seq, changed: bool) -> StoredPlugins {
        if !changed && !self.unstored {
            return StoredPlugins::Advance;
        }
        self.unstored = false;
        let cps = host.checkpoints();
        self.show_snapshot(host, &cps, seq);
        lock(&self.status.host).snapshots += 1;
        StoredPlugins::Snapshot(cps)
    }

    /// Hands effects to the adapters of their plugins; what does not fit waits here (a slow
    /// adapter does not stall the journal) up to a bound, beyond which this waits.
    pub async fn route(&mut self, effects: Vec<Effect>) -> Result<(), EngineError> {
        lock(&self.status.host).effects_handed += effects.len() as u64;
        for route in &mut self.routes {
            let mine: Vec<Effect> = effects.iter().filter(|e| e.plugin == route.kind).cloned().collect();
            if !mine.is_empty() {
                route.outbox.push_back(mine);
            }
        }
        if let Some(e) = effects.iter().find(|e| !self.routes.iter().any(|r| r.kind == e.plugin)) {
            return Err(Invariant(format!("an effect of {:?}, which has no adapter", e.plugin)).into());
        }
        for route in &mut self.routes {
            while route.outbox.len() > EFFECT_OUTBOX_BATCHES_MAX {
                let batch = route.outbox.pop_front().unwrap_or_default();
                route.effects.send(batch).await.map_err(|_| EngineError::TaskGone("plugin adapter"))?;
            }
            flush(route)?;
        }
        Ok(())
    }

    /// After every round of the center task: the adapters learn whether this center is their
    /// plugin's live owner, queued effects move on, and the status shows the host.
    pub fn observe(&mut self, host: &PluginHost) {
        let mut view = lock(&self.status.host);
        if host.is_live() && !view.live {
            tracing::info!(center = %self.name, "plugins live (caught up with the journal)");
        }
        view.live = host.is_live();
        for route in &mut self.routes {
            let owner = host.owner(route.kind);
            let live_owner = host.is_live() && owner.is_some_and(|(o, _)| o == self.me);
            route.live_owner.send_if_modified(|v| std::mem::replace(v, live_owner) != live_owner);
            if let Some((owner, term)) = owner {
                (view.owner, view.term) = (u64::from(owner.0), u64::from(term));
            }
            let _ = flush(route);
        }
    }

    fn show_snapshot(&self, host: &PluginHost, cps: &[PluginCheckpoint], seq: Seq) {
        let mut view = lock(&self.status.host);
        if let Some(cp) = cps.first() {
            view.state_hash = cp.state_hash;
            (view.owner, view.term) = (u64::from(cp.owner.0), u64::from(cp.term));
        }
        view.seq_snapshot = seq;
        view.figures.clear();
        host.figures(&mut view.figures);
        view.alerts.clear();
        host.alerts_open(&mut view.alerts);
        view.alert_kinds.clear();
        view.alert_kinds.extend(host.alert_kinds());
    }
}

/// Moves queued effect batches into the adapter's queue while it has room.
fn flush(route: &mut Route) -> Result<(), EngineError> {
    while let Some(batch) = route.outbox.pop_front() {
        match route.effects.try_send(batch) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(batch)) => {
                route.outbox.push_front(batch);
                break;
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(EngineError::TaskGone("plugin adapter")),
        }
    }
    Ok(())
}

/// One plugin's adapter task (see the module docs).
pub struct Adapter {
    name: String,
    me: CenterId,
    kind: PluginKind,
    adapter: Box<dyn EffectAdapter>,
    effects: mpsc::Receiver<Vec<Effect>>,
    live_owner: watch::Receiver<bool>,
    producer: FutureProducer,
    broker: Broker,
    status: Arc<PluginStatus>,
}

impl Adapter {
    pub async fn run(mut self) -> Result<(), EngineError> {
        let who = format!("{}: {} adapter", self.name, self.kind.name());
        let mut results = Vec::new();
        let mut figures_at = Instant::now();
        loop {
            match tokio::time::timeout(ADAPTER_POLL_INTERVAL, self.effects.recv()).await {
                Ok(Some(effects)) => {
                    let now = crate::clock::wall_us();
                    for e in &effects {
                        self.adapter.execute(e, now);
                    }
                }
                Ok(None) => return Err(EngineError::TaskGone("center task")),
                Err(_) => {}
            }
            // Only the live owner talks to the outside world: the others' results would be
            // duplicates.
            if *self.live_owner.borrow() {
                // The open alerts of the last snapshot, as the status shows them: an adapter that
                // plays operators (the demo's withdrawal world) answers them.
                let alerts = lock(&self.status.host).alerts.clone();
                self.adapter.alerts_seen(&alerts, crate::clock::wall_us());
                results.clear();
                self.adapter.poll(crate::clock::wall_us(), &mut results);
                let commands: Vec<Command> = results
                    .drain(..)
                    .map(|(bmi, c)| Command { origin: self.me, bmi, payload: Payload::Plugin(c) })
                    .collect();
                if !commands.is_empty() {
                    submit(&self.producer, &self.broker.topics.inbound, self.me, &commands, &who).await;
                    self.status.results_submitted.fetch_add(commands.len() as u64, Ordering::Relaxed);
                }
            }
            if figures_at.elapsed() >= ADAPTER_FIGURES_INTERVAL {
                figures_at = Instant::now();
                let mut figures = Vec::new();
                self.adapter.figures(&mut figures);
                *lock(&self.status.adapter_figures) = figures;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(s: &StoredPlugins) -> &'static str {
        match s {
            StoredPlugins::None => "none",
            StoredPlugins::Advance => "advance",
            StoredPlugins::Snapshot(_) => "snapshot",
        }
    }

    /// Merged commits store what the last of them would: the latest snapshot (a snapshot then
    /// commits no plugin looked at is still the state at the end), else an advance.
    #[test]
    fn merged_commits_store_the_latest_plugin_state() {
        let merge = |a: StoredPlugins, b: StoredPlugins| {
            let mut a = a;
            a.merge(b);
            kind(&a)
        };
        let snap = || StoredPlugins::Snapshot(Vec::new());
        assert_eq!(merge(StoredPlugins::None, StoredPlugins::Advance), "advance");
        assert_eq!(merge(StoredPlugins::Advance, StoredPlugins::None), "advance");
        assert_eq!(merge(snap(), StoredPlugins::Advance), "snapshot");
        assert_eq!(merge(StoredPlugins::Advance, snap()), "snapshot");
        assert_eq!(merge(StoredPlugins::None, StoredPlugins::None), "none");
    }
}
