//! The plugin host's state in a center database (`plugin_state`, migration 0004): one row per
//! plugin with its checkpoint bytes, whole-state hash, owner and term, and the seq it was taken
//! at.
//!
//! [`save_in`] writes inside a transaction the caller owns — the center's per-batch transaction,
//! so ledger and plugins move to a watermark together — and [`save`] in its own. Every row is
//! upserted (a plugin's state is replaced, never appended). [`load`] reads the rows back into a
//! host: each state is decoded and its hash checked ([`PluginHost::restore_checkpoints`]), all
//! rows must be at one seq, and the set of plugins must be the host's. Check before write, check
//! after read: the hash is computed from the live plugin when saving and again from the decoded
//! bytes when loading.

use crate::StoreError;
use deadpool_postgres::GenericClient;
use deadpool_postgres::Pool;
use rtgs_core::entry::{CenterId, PluginKind, Seq};
use rtgs_core::plugin_host::{PluginCheckpoint, PluginHost};

const UPSERT: &str = "INSERT INTO plugin_state
        (kind, seq_applied, owner, owner_term, host_ops_refused, state, state_hash, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, now())
    ON CONFLICT (kind) DO UPDATE SET
        seq_applied = EXCLUDED.seq_applied, owner = EXCLUDED.owner, owner_term = EXCLUDED.owner_term,
        host_ops_refused = EXCLUDED.host_ops_refused, state = EXCLUDED.state,
        state_hash = EXCLUDED.state_hash, updated_at = now()";

fn bigint(v: u64) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::Corrupt(format!("{v} does not fit a bigint")))
}

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("plugin_state: {what}"))
}

/// Saves every plugin of `host` at `seq_applied` through `client` — the `Transaction` of the
/// center's batch, committed by the caller with the rest of it, or a pooled client (each row
/// then commits alone: prefer [`save`]).
pub async fn save_in(
    client: &impl GenericClient,
    seq_applied: Seq,
    host: &PluginHost,
) -> Result<(), StoreError> {
    save_checkpoints_in(client, seq_applied, &host.checkpoints()).await
}

/// [`save_in`] from checkpoints taken earlier ([`PluginHost::checkpoints`]): the production
/// node takes them on its journal reader, at the seq of the batch they are committed with, and
/// writes them on its committer task.
pub async fn save_checkpoints_in(
    client: &impl GenericClient,
    seq_applied: Seq,
    checkpoints: &[PluginCheckpoint],
) -> Result<(), StoreError> {
    let seq = bigint(seq_applied)?;
    let stmt = client.prepare(UPSERT).await?;
    for cp in checkpoints {
        let owner = i16::from(cp.owner.0);
        let (term, refused) = (i64::from(cp.term), bigint(cp.host_ops_refused)?);
        // The hash is a u64 stored bit for bit in a bigint.
        let hash = cp.state_hash as i64;
        client.execute(&stmt, &[&cp.kind.name(), &seq, &owner, &term, &refused, &cp.state, &hash]).await?;
    }
    Ok(())
}

/// Moves every stored plugin row to `$1` (the seq) without rewriting its state: the batch being
/// committed gave no entry to any plugin, so the state stored is still the state at that seq.
/// Moving no row means nothing was stored yet — the caller must save a whole state first
/// (`center_store` runs it in its commit's pipeline).
pub const ADVANCE: &str = "UPDATE plugin_state SET seq_applied = $1, updated_at = now()";

/// [`save_in`] in a transaction of its own.
pub async fn save(pool: &Pool, seq_applied: Seq, host: &PluginHost) -> Result<(), StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    save_in(&tx, seq_applied, host).await?;
    tx.commit().await?;
    Ok(())
}

/// Restores `host` from the stored rows; returns the seq they were saved at, or `None` if
/// nothing is stored (a fresh center). Any row that does not decode, does not match its hash,
/// names a plugin the host does not run, or is at another seq than the others is an error; the
/// host is left untouched then.
pub async fn load(client: &impl GenericClient, host: &mut PluginHost) -> Result<Option<Seq>, StoreError> {
    let Some((seq, cps)) = checkpoints(client).await? else { return Ok(None) };
    restore(host, &cps)?;
    Ok(Some(seq))
}

/// The stored rows as checkpoints and the seq they are all at (`None`: nothing stored). Rows at
/// different seqs or of an unknown plugin are an error; states are decoded only by [`restore`].
pub async fn checkpoints(
    client: &impl GenericClient,
) -> Result<Option<(Seq, Vec<PluginCheckpoint>)>, StoreError> {
    let rows = client
        .query(
            "SELECT kind, seq_applied, owner, owner_term, host_ops_refused, state, state_hash
             FROM plugin_state ORDER BY kind",
            &[],
        )
        .await?;
    let mut seq: Option<Seq> = None;
    let mut cps = Vec::with_capacity(rows.len());
    for row in &rows {
        let name: String = row.try_get(0)?;
        let kind = PluginKind::from_name(&name).ok_or_else(|| corrupt(format!("unknown plugin {name:?}")))?;
        let at = u64::try_from(row.try_get::<_, i64>(1)?).map_err(|_| corrupt("negative seq"))?;
        if seq.is_some_and(|s| s != at) {
            return Err(corrupt(format!("plugins saved at different seqs ({seq:?} and {at})")));
        }
        seq = Some(at);
        let owner = u8::try_from(row.try_get::<_, i16>(2)?).map_err(|_| corrupt("owner out of range"))?;
        let term = u32::try_from(row.try_get::<_, i64>(3)?).map_err(|_| corrupt("term out of range"))?;
        let refused = u64::try_from(row.try_get::<_, i64>(4)?).map_err(|_| corrupt("negative count"))?;
        cps.push(PluginCheckpoint {
            kind,
            owner: CenterId(owner),
            term,
            host_ops_refused: refused,
            state: row.try_get(5)?,
            state_hash: row.try_get::<_, i64>(6)? as u64,
        });
    }
    Ok(seq.map(|seq| (seq, cps)))
}

/// Restores `host` from stored checkpoints (each decoded and its hash checked); a bad one leaves
/// `host` as it was.
pub fn restore(host: &mut PluginHost, cps: &[PluginCheckpoint]) -> Result<(), StoreError> {
    // A bad row must not leave `host` half restored: on failure, put back what was there (it
    // restores: it came from this very host).
    let before = host.checkpoints();
    if let Err(e) = host.restore_checkpoints(cps) {
        host.restore_checkpoints(&before).map_err(|e2| corrupt(format!("{e}; and restoring back: {e2}")))?;
        return Err(corrupt(e));
    }
    Ok(())
}
