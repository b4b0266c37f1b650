//! Automatic reconciliation of the center databases (seed 003 §10).
//!
//! [`snapshot`] reads what one center holds; [`compare`] (pure) lists every difference between
//! centers: watermarks, the state hash at the highest seq all of them applied (the hash is chained
//! over every outcome, so equal hashes mean equal transfer statuses up to there; on a mismatch
//! [`first_divergent_seq`] finds the first seq whose outcome or hash differs), balances and closed
//! flags when the centers stand at the same seq, and each center's money total (Σ balances + Σ
//! plugin holds must equal Σ funded: a held amount left its account's balance, not the ledger).

use crate::StoreError;
use deadpool_postgres::Pool;
use std::collections::BTreeMap;

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
    Watermark {
        center: String,
        seq_applied: u64,
        highest: u64,
    },
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
            Difference::Watermark { center, seq_applied, highest } => {
                write!(f, "{center} applied up to seq {seq_applied}, {} behind the highest ({highest})", highest - seq_applied)
            }
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

/// Reads one center's watermark, balances and totals.
pub async fn snapshot(pool: &Pool, center: &str) -> Result<CenterSnapshot, StoreError> {
    let c = pool.get().await?;
    let w = c
        .query_one("SELECT seq_applied, state_hash, seq_unfinal_first FROM watermark WHERE id = 1", &[])
        .await?;
    let mut balances = BTreeMap::new();
    let mut balance_total_minor = 0i128;
    for r in c.query("SELECT id, balance_minor, closed FROM account", &[]).await? {
        let balance = r.get::<_, i64>(1);
        balance_total_minor += i128::from(balance);
        balances.insert(r.get::<_, i64>(0) as u64, (balance as u64, r.get::<_, bool>(2)));
    }
    let funded: i64 =
        c.query_one("SELECT COALESCE(sum(funded_minor), 0)::bigint FROM funded", &[]).await?.get(0);
    let held: i64 = c.query_one("SELECT COALESCE(sum(amount_minor), 0)::bigint FROM hold", &[]).await?.get(0);
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

/// The state hash a center recorded for `seq` (`None` if it has not applied it).
pub async fn state_hash_at(pool: &Pool, seq: u64) -> Result<Option<(u64, i16)>, StoreError> {
    let c = pool.get().await?;
    let row =
        c.query_opt("SELECT state_hash, outcome FROM applied_entry WHERE seq = $1", &[&(seq as i64)]).await?;
    Ok(row.map(|r| (r.get::<_, i64>(0) as u64, r.get::<_, i16>(1))))
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
/// the highest seq all of them applied (same order as `snapshots`).
pub fn compare(snapshots: &[CenterSnapshot], hash_at_common: &[(u64, Option<u64>)]) -> Vec<Difference> {
    let mut out = Vec::new();
    let Some(reference) = snapshots.first() else { return out };
    let highest = snapshots.iter().map(|s| s.seq_applied).max().unwrap_or(0);
    for s in snapshots {
        if s.seq_applied < highest {
            out.push(Difference::Watermark { center: s.center.clone(), seq_applied: s.seq_applied, highest });
        }
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
    // Balances are comparable only between centers standing at the same seq.
    for s in snapshots.iter().skip(1).filter(|s| s.seq_applied == reference.seq_applied) {
        let ids: std::collections::BTreeSet<u64> =
            s.balances.keys().chain(reference.balances.keys()).copied().collect();
        for id in ids {
            let (mine, theirs) = (s.balances.get(&id).copied(), reference.balances.get(&id).copied());
            if mine != theirs {
                out.push(Difference::Balance {
                    account: id,
                    center: s.center.clone(),
                    value: mine,
                    reference: reference.center.clone(),
                    reference_value: theirs,
                });
            }
        }
    }
    out
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
        assert!(d.contains(&Difference::Watermark { center: "DC3".into(), seq_applied: 7, highest: 9 }));
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
        assert_eq!(d.len(), 4, "{d:?}");
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
