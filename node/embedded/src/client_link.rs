//! The embedded engine as its client (the HTTP API) sees it: the engine-neutral seam of
//! `rtgs_core::client` — a submission path ([`EngineSubmit`] for [`Submitter`]), the client
//! events, and the journal's entries for a read model ([`JournalFeed`] tails the journal files)
//! with the highest seq known final.

use crate::cluster::{BmiQueries, Cluster, Submitter};
use crate::journal::JournalReader;
use crossbeam_channel::Receiver;
use rtgs_core::client::{ClientEvent, EngineSubmit, EntryFeed, Fed};
use rtgs_core::entry::{Command, Entry, Seq};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What a client needs of the embedded engine (see the module docs).
pub struct ClientLink {
    pub submit: Submitter,
    pub events: Receiver<ClientEvent>,
    pub feed: JournalFeed,
    /// The highest seq known final (or durable in the journal when the cluster started).
    pub final_through: Arc<dyn Fn() -> Seq + Send + Sync>,
    /// What was sequenced under a `bmi` (a status query for an entry the client did not submit,
    /// or submitted before a restart).
    pub bmi_queries: BmiQueries,
}

impl Cluster {
    /// The cluster's client seam; the client must be the only consumer of its events.
    pub fn client_link(&self) -> ClientLink {
        ClientLink {
            submit: self.submitter(),
            events: self.events().clone(),
            feed: JournalFeed::new(self.journal_dir(), 1),
            final_through: self.final_through(),
            bmi_queries: self.bmi_queries(),
        }
    }
}

impl EngineSubmit for Submitter {
    fn try_submit(&self, commands: Vec<Command>) -> Result<(), Option<Vec<Command>>> {
        Submitter::try_submit(self, commands)
    }
    fn submit(&self, commands: Vec<Command>) -> bool {
        Submitter::submit(self, commands).is_ok()
    }
}

/// The journal's entries from a seq on, read from the files as they are written.
pub struct JournalFeed {
    dir: PathBuf,
    reader: Option<JournalReader>,
    seq_next: Seq,
}

impl JournalFeed {
    pub fn new(dir: PathBuf, seq_from: Seq) -> Self {
        JournalFeed { dir, reader: None, seq_next: seq_from.max(1) }
    }
}

impl EntryFeed for JournalFeed {
    fn next_batch(&mut self, out: &mut Vec<Entry>, wait: Duration) -> Result<Fed, String> {
        let before = out.len();
        let reader = match self.reader.as_mut() {
            Some(r) => r,
            None => {
                self.reader.insert(JournalReader::open(&self.dir, self.seq_next).map_err(|e| e.to_string())?)
            }
        };
        if reader.next_batch(out).map_err(|e| e.to_string())? {
            if let Some(last) = out.last() {
                self.seq_next = last.seq + 1;
            }
            return Ok(if out.len() > before { Fed::Entries } else { Fed::Idle });
        }
        // The end of the segments the reader knew when it was opened: reopen next time (a new
        // segment may have begun), after the wait.
        self.reader = None;
        std::thread::sleep(wait);
        Ok(Fed::Idle)
    }
}
