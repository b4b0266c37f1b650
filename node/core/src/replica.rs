//! A replica of the state machine: the ledger and the plugin host, applied together.
//!
//! Every place that turns journal entries into state — a center, the API's read model, the
//! audit (`rtgs verify`), the simulator — applies through [`Replica::apply`]: the ledger applies
//! the entry, the plugin host hands it to the plugins (whose ledger intents go to the same
//! ledger, in the same seq), and the host's step digest is folded into the chained state hash.
//! One apply path, so a replica built anywhere agrees with every center at every seq.

use crate::entry::Entry;
use crate::ledger::{Applied, Ledger};
use crate::plugin_host::PluginHost;

pub struct Replica {
    ledger: Ledger,
    host: PluginHost,
}

impl Replica {
    pub fn new(ledger: Ledger, host: PluginHost) -> Self {
        Replica { ledger, host }
    }

    /// Applies the next entry; `true` with it when a plugin (or the host) took the entry.
    #[inline]
    pub fn apply(&mut self, entry: &Entry) -> (Applied, bool) {
        let mut applied = self.ledger.apply(entry);
        match self.host.apply(entry, &mut self.ledger) {
            Some(digest) => {
                applied.state_hash = self.ledger.fold(digest);
                (applied, true)
            }
            None => (applied, false),
        }
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }
    pub fn ledger_mut(&mut self) -> &mut Ledger {
        &mut self.ledger
    }
    pub fn host(&self) -> &PluginHost {
        &self.host
    }
    pub fn host_mut(&mut self) -> &mut PluginHost {
        &mut self.host
    }
    pub fn into_parts(self) -> (Ledger, PluginHost) {
        (self.ledger, self.host)
    }
}
