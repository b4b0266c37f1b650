//! Automatic reconciliation of the center databases (seed 003 §10), also of a live cluster.
//!
//! [`read_consistent`] reads every center as one state of its database: one `REPEATABLE READ,
//! READ ONLY` transaction per center holds its watermark, balances, holds, funded totals and the
//! state hash it recorded at the *common seq* (the highest seq every center has committed), so a
//! batch committed meanwhile is either wholly in a reading or not at all. [`compare`] (pure) then
//! lists every difference between centers: the state hash at the common seq (the hash is chained
//! over every outcome, so equal hashes mean equal transfer statuses up to there; on a mismatch
//! [`first_divergent_seq`] finds the first seq whose outcome or hash differs), balances and
//! closed flags of centers read at the same seq, and each center's money total (Σ balances + Σ
//! plugin holds must equal Σ funded: a held amount left its account's balance, not the ledger).
//!
//! **Lag is not a difference.** A center behind the others on a live cluster (an idle tick
//! applied at one center and not yet at another) stands at another seq; [`Lag`] reports how far,
//! apart from the differences. Applied entries are never rewritten below a center's watermark,
//! so the hash at the common seq can be read at any moment.

use crate::StoreError;
use deadpool_postgres::Pool;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio_postgres::IsolationLevel;

/// What one center holds, for comparison.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CenterSnapshot {
    pub center: String,
    pub seq_applied: u64,
    pub state_hash: u64,
    pub seq_unfinal_first: u64,
    /// account id → (balance, closed)
    pub balances: BTreeMap<u64, (u64, bool)>,
    pub balance_total_minor: i128,
    /// Σ of the plugins' holds (the `hold` table).
    pub held_total_minor: i128,
    pub funded_total_minor: i128,
}

/// One difference found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Difference {
    StateHash {
        seq: u64,
        center: String,
        state_hash: u64,
        reference: String,
        reference_hash: u64,
    },
    Balance {
        account: u64,
        center: String,
        value: Option<(u64, bool)>,
        reference: String,
        reference_value: Option<(u64, bool)>,
    },
    MoneyNotConserved {
        center: String,
        balance_total_minor: i128,
        held_total_minor: i128,
        funded_total_minor: i128,
    },
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::StateHash { seq, center, state_hash, reference, reference_hash } => write!(
                f,
                "state hash at seq {seq}: {center} has {state_hash:016x}, {reference} has {reference_hash:016x}"
            ),
            Difference::Balance { account, center, value, reference, reference_value } => {
                write!(f, "account {account}: {center} has {value:?}, {reference} has {reference_value:?}")
            }
            Difference::MoneyNotConserved { center, balance_total_minor, held_total_minor, funded_total_minor } => {
                write!(
                    f,
                    "{center}: balances add up to {balance_total_minor} and holds to {held_total_minor} but \
                     {funded_total_minor} was funded"
                )
            }
        }
    }
}

/// Reads one center's watermark, balances and totals (one transaction: one state).
pub async fn snapshot(pool: &Pool, center: &str) -> Result<CenterSnapshot, StoreError> {
    let reading = read_consistent(&[(center.to_string(), pool.clone())], 1, Duration::ZERO).await?;
    reading.snapshots.into_iter().next().ok_or_else(|| StoreError::Corrupt("no snapshot read".into()))
}

/// Every center read at one moment of its own database (see the module doc).
#[derive(Clone, Debug)]
pub struct Reading {
    pub snapshots: Vec<CenterSnapshot>,
    /// The highest seq every center has committed.
    pub common_seq: u64,
    /// Each center's recorded state hash at `common_seq` (same order as `snapshots`).
    pub hash_at_common: Vec<Option<u64>>,
    /// Rounds read (the last one is the reading).
    pub attempts: u32,
}

/// How far one center stands from the others (reported apart from the differences).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lag {
    pub center: String,
    /// The seq this center's database holds (its committed seq).
    pub seq_committed: u64,
    /// Entries behind the most advanced center.
    pub lag_entries: u64,
    /// Entries this center holds beyond the common seq.
    pub entries_past_common: u64,
}

/// Each center's lag (same order as `snapshots`).
pub fn lags(snapshots: &[CenterSnapshot]) -> Vec<Lag> {
    let highest = snapshots.iter().map(|s| s.seq_applied).max().unwrap_or(0);
    let common = snapshots.iter().map(|s| s.seq_applied).min().unwrap_or(0);
    snapshots
        .iter()
        .map(|s| Lag {
            center: s.center.clone(),
            seq_committed: s.seq_applied,
            lag_entries: highest - s.seq_applied,
            entries_past_common: s.seq_applied - common,
        })
        .collect()
}

/// Reads every center consistently: in up to `attempts` rounds, one `REPEATABLE READ, READ ONLY`
/// transaction per center; a round whose watermarks are not all one seq is dropped (rolled back)
/// and read again after `pause`, so that on an idle cluster the balances of every center can be
/// compared at one seq. The last round is the reading whatever its seqs (under load centers
/// rarely stand still together; then only the state hash at the common seq compares them all).
pub async fn read_consistent(
    centers: &[(String, Pool)],
    attempts: u32,
    pause: Duration,
) -> Result<Reading, StoreError> {
    let mut clients = Vec::with_capacity(centers.len());
    for (_, pool) in centers {
        clients.push(pool.get().await?);
    }
    let attempts = attempts.max(1);
    for attempt in 1..=attempts {
        let mut txs = Vec::with_capacity(clients.len());
        let mut seqs = Vec::with_capacity(clients.len());
        for client in clients.iter_mut() {
            let tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await?;
            // The first query fixes the transaction's snapshot: everything after is this state.
            let w = tx
                .query_one(
                    "SELECT seq_applied, state_hash, seq_unfinal_first FROM watermark WHERE id = 1",
                    &[],
                )
                .await?;
            seqs.push(w.get::<_, i64>(0) as u64);
            txs.push((tx, w));
        }
        if attempt < attempts && seqs.iter().any(|s| *s != seqs[0]) {
            drop(txs);
            tokio::time::sleep(pause).await;
            continue;
        }
        let common_seq = seqs.iter().copied().min().unwrap_or(0);
        let mut snapshots = Vec::with_capacity(txs.len());
        let mut hash_at_common = Vec::with_capacity(txs.len());
        for ((tx, w), (center, _)) in txs.into_iter().zip(centers) {
            snapshots.push(read_state(&tx, center, &w).await?);
            hash_at_common.push(hash_at(&*tx, common_seq).await?.map(|(h, _)| h));
            tx.commit().await?;
        }
        return Ok(Reading { snapshots, common_seq, hash_at_common, attempts: attempt });
    }
    unreachable!("the last attempt always returns")
}

/// Balances and totals in the transaction that read the watermark row `w`.
async fn read_state(
    tx: &deadpool_postgres::Transaction<'_>,
    center: &str,
    w: &tokio_postgres::Row,
) -> Result<CenterSnapshot, StoreError> {
    let mut balances = BTreeMap::new();
    let mut balance_total_minor = 0i128;
    for r in tx.query("SELECT id, balance_minor, closed FROM account_now", &[]).await? {
        let balance = r.get::<_, i64>(1);
        balance_total_minor += i128::from(balance);
        balances.insert(r.get::<_, i64>(0) as u64, (balance as u64, r.get::<_, bool>(2)));
    }
    let funded: i64 =
        tx.query_one("SELECT COALESCE(sum(funded_minor), 0)::bigint FROM funded", &[]).await?.get(0);
    let held: i64 =
        tx.query_one("SELECT COALESCE(sum(amount_minor), 0)::bigint FROM hold", &[]).await?.get(0);
    Ok(CenterSnapshot {
        center: center.to_string(),
        seq_applied: w.get::<_, i64>(0) as u64,
        state_hash: w.get::<_, i64>(1) as u64,
        seq_unfinal_first: w.get::<_, i64>(2) as u64,
        balances,
        balance_total_minor,
        held_total_minor: i128::from(held),
        funded_total_minor: i128::from(funded),
    })
}

async fn hash_at(c: &impl tokio_postgres::GenericClient, seq: u64) -> Result<Option<(u64, i16)>, StoreError> {
    let row = c
        .query_opt(
            format!(
                "SELECT {}, {}",
                crate::center_store::applied_at("state_hashes", "$1::bigint"),
                crate::center_store::applied_at("outcomes", "$1::bigint")
            )
            .as_str(),
            &[&(seq as i64)],
        )
        .await?;
    // Not applied (past the last batch's end, or no batch at all): both elements are NULL.
    Ok(row.and_then(|r| Some((r.get::<_, Option<i64>>(0)? as u64, r.get::<_, Option<i16>>(1)?))))
}

/// The state hash a center recorded for `seq` (`None` if it has not applied it).
pub async fn state_hash_at(pool: &Pool, seq: u64) -> Result<Option<(u64, i16)>, StoreError> {
    let c = pool.get().await?;
    hash_at(&**c, seq).await
}

/// The first seq at or below `upto` where two centers' recorded (hash, outcome) differ, by
/// bisection over the chained hash (equal at seq n ⇒ equal at every seq before n).
pub async fn first_divergent_seq(a: &Pool, b: &Pool, upto: u64) -> Result<Option<u64>, StoreError> {
    if upto == 0 || state_hash_at(a, upto).await? == state_hash_at(b, upto).await? {
        return Ok(None);
    }
    let (mut lo, mut hi) = (1u64, upto); // the answer is in lo..=hi
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if state_hash_at(a, mid).await? == state_hash_at(b, mid).await? {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(Some(lo))
}

/// Every difference between the snapshots; `hash_at_common` gives each center's state hash at
/// the highest seq all of them committed (same order as `snapshots`). Centers at different seqs
/// are not a difference ([`lags`] says how far apart they are): their balances are compared
/// only with a center read at the same seq.
pub fn compare(snapshots: &[CenterSnapshot], hash_at_common: &[(u64, Option<u64>)]) -> Vec<Difference> {
    let mut out = Vec::new();
    let Some(reference) = snapshots.first() else { return out };
    for s in snapshots {
        if s.balance_total_minor + s.held_total_minor != s.funded_total_minor {
            out.push(Difference::MoneyNotConserved {
                center: s.center.clone(),
                balance_total_minor: s.balance_total_minor,
                held_total_minor: s.held_total_minor,
                funded_total_minor: s.funded_total_minor,
            });
        }
    }
    if let Some(&(seq, ref_hash)) = hash_at_common.first() {
        for (s, &(_, h)) in snapshots.iter().zip(hash_at_common).skip(1) {
            if h != ref_hash {
                out.push(Difference::StateHash {
                    seq,
                    center: s.center.clone(),
                    state_hash: h.unwrap_or(0),
                    reference: reference.center.clone(),
                    reference_hash: ref_hash.unwrap_or(0),
                });
            }
        }
    }
    // Balances are comparable only between centers standing at the same seq: each center with
    // the first one read at its seq.
    for (i, s) in snapshots.iter().enumerate() {
        let Some(first) = snapshots[..i].iter().find(|r| r.seq_applied == s.seq_applied) else { continue };
        let ids: std::collections::BTreeSet<u64> =
            s.balances.keys().chain(first.balances.keys()).copied().collect();
        for id in ids {
            let (mine, theirs) = (s.balances.get(&id).copied(), first.balances.get(&id).copied());
            if mine != theirs {
                out.push(Difference::Balance {
                    account: id,
                    center: s.center.clone(),
                    value: mine,
                    reference: first.center.clone(),
                    reference_value: theirs,
                });
            }
        }
    }
    out
}

/// Whether a center's balances were compared with another's (another center read at its seq).
pub fn balances_compared(snapshots: &[CenterSnapshot], index: usize) -> bool {
    let seq = snapshots[index].seq_applied;
    snapshots.iter().enumerate().any(|(j, s)| j != index && s.seq_applied == seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(center: &str, seq: u64, balances: &[(u64, u64)], funded: i128) -> CenterSnapshot {
        CenterSnapshot {
            center: center.into(),
            seq_applied: seq,
            state_hash: seq * 7,
            seq_unfinal_first: seq,
            balances: balances.iter().map(|&(id, b)| (id, (b, false))).collect(),
            balance_total_minor: balances.iter().map(|&(_, b)| i128::from(b)).sum(),
            held_total_minor: 0,
            funded_total_minor: funded,
        }
    }

    #[test]
    fn equal_centers_have_no_difference() {
        let s = [
            snap("DC1", 9, &[(1, 5), (2, 5)], 10),
            snap("DC2", 9, &[(1, 5), (2, 5)], 10),
            snap("DC3", 9, &[(2, 5), (1, 5)], 10),
        ];
        assert!(compare(&s, &[(9, Some(1)), (9, Some(1)), (9, Some(1))]).is_empty());
    }

    #[test]
    fn every_kind_of_difference_is_reported() {
        let s = [
            snap("DC1", 9, &[(1, 5), (2, 5)], 10),
            snap("DC2", 9, &[(1, 4), (2, 5)], 10),
            snap("DC3", 7, &[(1, 5), (2, 5)], 10),
        ];
        let d = compare(&s, &[(7, Some(1)), (7, Some(2)), (7, Some(1))]);
        assert!(d
            .iter()
            .any(|x| matches!(x, Difference::StateHash { center, seq: 7, .. } if center == "DC2")));
        assert!(d
            .iter()
            .any(|x| matches!(x, Difference::Balance { account: 1, center, .. } if center == "DC2")));
        assert!(d
            .iter()
            .any(|x| matches!(x, Difference::MoneyNotConserved { center, .. } if center == "DC2")));
        assert!(
            !d.iter().any(|x| matches!(x, Difference::Balance { center, .. } if center == "DC3")),
            "DC3 is at another seq"
        );
        assert_eq!(d.len(), 3, "{d:?}");
    }

    /// A live cluster: centers at different seqs with one history are lag, not a difference;
    /// two centers at the same seq are compared with each other, whatever their order.
    #[test]
    fn centers_at_different_seqs_are_lag_and_only_same_seq_balances_compare() {
        let s = [
            snap("DC1", 12, &[(1, 2), (2, 8)], 10),
            snap("DC2", 9, &[(1, 5), (2, 5)], 10),
            snap("DC3", 9, &[(1, 5), (2, 5)], 10),
        ];
        let hashes = [(9, Some(1)), (9, Some(1)), (9, Some(1))];
        assert!(compare(&s, &hashes).is_empty());
        let lag = lags(&s);
        assert_eq!(
            lag.iter().map(|l| (l.seq_committed, l.lag_entries, l.entries_past_common)).collect::<Vec<_>>(),
            [(12, 0, 3), (9, 3, 0), (9, 3, 0)]
        );
        assert_eq!((0..3).map(|i| balances_compared(&s, i)).collect::<Vec<_>>(), [false, true, true]);
        let mut off = s.clone();
        off[2].balances.insert(2, (6, false));
        off[2].balance_total_minor += 1;
        off[2].funded_total_minor += 1;
        let d = compare(&off, &hashes);
        assert_eq!(
            d,
            [Difference::Balance {
                account: 2,
                center: "DC3".into(),
                value: Some((6, false)),
                reference: "DC2".into(),
                reference_value: Some((5, false)),
            }]
        );
    }

    /// A plugin's hold moved money out of a balance, not out of the ledger: balances and holds
    /// together are what was funded.
    #[test]
    fn held_money_is_conserved_money() {
        let mut held = snap("DC1", 9, &[(1, 3), (2, 5)], 10);
        assert!(!compare(std::slice::from_ref(&held), &[(9, Some(1))]).is_empty(), "2 missing");
        held.held_total_minor = 2;
        assert!(compare(&[held], &[(9, Some(1))]).is_empty());
    }
}
