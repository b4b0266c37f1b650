//! The seeded workload and the clients that submit it.
//!
//! Each workload command has its own `bmi`. A client submits it, waits for the sequencer's
//! [`Admission`], and submits the very same command again if no answer came within
//! [`RETRY_TIMEOUT_US`] (the sequencer crashed before the command was durable, or before it
//! answered). Clients also probe the dedupe: a resubmission of an admitted command must be
//! answered `Duplicate(original seq)`, and a reuse of its `bmi` with other content
//! `Conflict(original seq)` — and must never be journaled.

use rtgs_core::entry::{AccountId, Bmi, CenterId, Command, Currency, Entry, Payload, Seq, Transfer};
use rtgs_core::prng::Prng;
use rtgs_core::sequencer::Admission;
use std::collections::BTreeMap;

/// How long a client waits for an admission before it submits the same command again.
pub const RETRY_TIMEOUT_US: u64 = 40_000;

/// Keeps the workload stream apart from the scheduling stream: the same seed gives the same
/// workload at every fault level.
const WORKLOAD_SALT: u64 = 0x0057_0A4C_10AD;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum ItemState {
    Unsent,
    Waiting { since_us: u64 },
    Admitted(Seq),
}

struct Item {
    bmi: Bmi,
    payload: Payload,
    state: ItemState,
}

/// Why a client sends a command.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Intent {
    /// The command itself: a first try or a retry after a timeout.
    Original,
    /// Same `bmi`, same content as an admitted command: must be `Duplicate(its seq)`.
    DuplicateProbe,
    /// Same `bmi` as an admitted command, other content: must be `Conflict(its seq)`.
    ConflictProbe,
}

/// One command on its way to the sequencer.
#[derive(Clone, Debug)]
pub struct Submission {
    pub item: usize,
    pub intent: Intent,
    pub command: Command,
}

pub struct Clients {
    items: Vec<Item>,
    by_bmi: BTreeMap<Vec<u8>, usize>,
    unsent_next: usize,
    probing: bool,
}

impl Clients {
    /// The workload of `seed`: open `accounts` accounts (one may be USD), fund each, then
    /// `commands` transfers and closes.
    pub fn generate(seed: u64, accounts: usize, commands: usize) -> Result<Self, String> {
        let mut prng = Prng::new(seed ^ WORKLOAD_SALT);
        let eur = Currency::new(b"EUR").map_err(|e| e.to_string())?;
        let usd = Currency::new(b"USD").map_err(|e| e.to_string())?;
        let accounts = accounts as u64;
        let usd_account = (accounts >= 4 && prng.chance(1, 2)).then_some(accounts);
        let currency_of = |id: u64| if Some(id) == usd_account { usd } else { eur };
        let mut payloads = Vec::new();
        for id in 1..=accounts {
            payloads.push(Payload::AccountOpen { account: AccountId(id), currency: currency_of(id) });
        }
        for id in 1..=accounts {
            payloads.push(Payload::AccountFund {
                account: AccountId(id),
                amount_minor: prng.range(1_000, 100_000),
            });
        }
        for _ in 0..commands {
            payloads.push(random_command(&mut prng, accounts, currency_of));
        }
        let mut items = Vec::with_capacity(payloads.len());
        let mut by_bmi = BTreeMap::new();
        for (i, payload) in payloads.into_iter().enumerate() {
            let bmi = Bmi::numbered("SIM-", i as u64).map_err(|e| e.to_string())?;
            by_bmi.insert(bmi.as_bytes().to_vec(), i);
            items.push(Item { bmi, payload, state: ItemState::Unsent });
        }
        Ok(Clients { items, by_bmi, unsent_next: 0, probing: true })
    }

    /// No more duplicate and conflict probes (the end phase).
    pub fn stop_probing(&mut self) {
        self.probing = false;
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn all_admitted(&self) -> bool {
        self.items.iter().all(|i| matches!(i.state, ItemState::Admitted(_)))
    }

    pub fn unadmitted_count(&self) -> usize {
        self.items.iter().filter(|i| !matches!(i.state, ItemState::Admitted(_))).count()
    }

    /// The original content of a workload `bmi`, if it is one.
    pub fn original(&self, bmi: &Bmi) -> Option<&Payload> {
        let &i = self.by_bmi.get(bmi.as_bytes())?;
        self.items.get(i).map(|item| &item.payload)
    }

    /// Every workload `bmi` with the seq its client was told (None: never admitted).
    pub fn admitted(&self) -> impl Iterator<Item = (&Bmi, Option<Seq>)> {
        self.items.iter().map(|i| match i.state {
            ItemState::Admitted(seq) => (&i.bmi, Some(seq)),
            _ => (&i.bmi, None),
        })
    }

    /// What the clients send now: retries that timed out, maybe new commands, maybe probes.
    /// The world fills in each command's origin center.
    pub fn poll(&mut self, prng: &mut Prng, now_us: u64, out: &mut Vec<Submission>) {
        for (i, item) in self.items.iter_mut().enumerate() {
            if let ItemState::Waiting { since_us } = item.state {
                if now_us >= since_us + RETRY_TIMEOUT_US {
                    item.state = ItemState::Waiting { since_us: now_us };
                    out.push(submission(i, Intent::Original, item.bmi, item.payload.clone()));
                }
            }
        }
        if prng.chance(1, 2) {
            for _ in 0..prng.range(1, 2) {
                let i = self.unsent_next;
                let Some(item) = self.items.get_mut(i) else {
                    break;
                };
                item.state = ItemState::Waiting { since_us: now_us };
                out.push(submission(i, Intent::Original, item.bmi, item.payload.clone()));
                self.unsent_next += 1;
            }
        }
        if prng.chance(1, 6) {
            self.probe(prng, Intent::DuplicateProbe, out);
        }
        if prng.chance(1, 12) {
            self.probe(prng, Intent::ConflictProbe, out);
        }
    }

    fn probe(&self, prng: &mut Prng, intent: Intent, out: &mut Vec<Submission>) {
        if self.items.is_empty() || !self.probing {
            return;
        }
        let i = prng.below(self.items.len() as u64) as usize;
        let item = &self.items[i];
        if !matches!(item.state, ItemState::Admitted(_)) {
            return;
        }
        let payload = match intent {
            // No workload command closes this account, so the content always differs.
            Intent::ConflictProbe => Payload::AccountClose { account: AccountId(u64::MAX) },
            _ => item.payload.clone(),
        };
        out.push(submission(i, intent, item.bmi, payload));
    }

    /// Checks the sequencer's answer to `sub` against what the client knows and the journal.
    pub fn on_admission(
        &mut self,
        sub: &Submission,
        admission: Admission,
        journal: &[Entry],
    ) -> Result<(), String> {
        let Some(item) = self.items.get_mut(sub.item) else {
            return Err(format!("admission for unknown workload item {}", sub.item));
        };
        let known = match item.state {
            ItemState::Admitted(seq) => Some(seq),
            _ => None,
        };
        match (sub.intent, admission) {
            (Intent::Original, Admission::Sequenced(seq) | Admission::Duplicate(seq)) => {
                if let Some(first) = known.filter(|&s| s != seq) {
                    return Err(format!("bmi {} sequenced twice: seq {first} and seq {seq}", item.bmi));
                }
                in_journal(journal, seq, &item.bmi, &item.payload)?;
                item.state = ItemState::Admitted(seq);
                Ok(())
            }
            (Intent::DuplicateProbe, Admission::Duplicate(seq))
            | (Intent::ConflictProbe, Admission::Conflict(seq))
                if known == Some(seq) =>
            {
                Ok(())
            }
            (intent, admission) => {
                Err(format!("bmi {} (admitted at {known:?}): {intent:?} answered {admission:?}", item.bmi))
            }
        }
    }
}

fn submission(item: usize, intent: Intent, bmi: Bmi, payload: Payload) -> Submission {
    Submission { item, intent, command: Command { origin: CenterId(1), bmi, payload } }
}

/// The admission says `bmi` is at `seq`: the durable journal must agree, content included.
fn in_journal(journal: &[Entry], seq: Seq, bmi: &Bmi, payload: &Payload) -> Result<(), String> {
    let entry = seq.checked_sub(1).and_then(|i| journal.get(usize::try_from(i).ok()?));
    match entry {
        Some(e) if e.bmi == *bmi && e.payload == *payload => Ok(()),
        Some(e) => {
            Err(format!("admission puts bmi {bmi} at seq {seq}, but the journal holds bmi {} there", e.bmi))
        }
        None => Err(format!(
            "admission puts bmi {bmi} at seq {seq}, beyond the durable journal ({} entries)",
            journal.len()
        )),
    }
}

/// One transfer or close; about 1 in 6 is meant to be rejected (AC01, AM04, AM01, AG01, RT02).
fn random_command(prng: &mut Prng, accounts: u64, currency_of: impl Fn(u64) -> Currency) -> Payload {
    let known = |prng: &mut Prng| 1 + prng.below(accounts.max(1));
    let roll = prng.below(100);
    if roll < 3 {
        return Payload::AccountClose { account: AccountId(known(prng)) };
    }
    let debtor = known(prng);
    let mut creditor = known(prng);
    let mut amount_minor = prng.range(1, 20_000);
    match roll {
        // AC01: an account that was never opened.
        3..=7 => creditor = accounts + 1 + prng.below(4),
        // AM04: more than any single funding.
        8..=14 => amount_minor = prng.range(200_000, 10_000_000),
        // AM01.
        15..=16 => amount_minor = 0,
        _ => {}
    }
    Payload::Transfer(Transfer {
        debtor: AccountId(debtor),
        creditor: AccountId(creditor),
        amount_minor,
        currency: currency_of(debtor),
    })
}
