-- The entries a commit applied, as ONE row of arrays (issue 10): the commit's first and last
-- seq, then one array per column of the former `applied_entry` table, element i holding seq
-- `seq_first + i - 1` (a commit applies consecutive seqs: every seq, ticks and rejections
-- included). A row per entry cost a busy center more than anything else it wrote — measured in
-- psql, 11,000 entries: 22–23 ms as rows against ≈ 1 ms as one row of arrays (bench/README.md).
--
-- Reading one seq is one index probe: the batch with the greatest `seq_first` at or below it,
-- then the element `seq - seq_first + 1` (NULL past `seq_last`). The view `applied_entry` keeps
-- the former table's name and columns for ad-hoc queries (it unnests every batch: do not use it
-- on a hot path).
CREATE TABLE IF NOT EXISTS applied_batch (
    seq_first     bigint     PRIMARY KEY CHECK (seq_first >= 1),
    seq_last      bigint     NOT NULL,
    epochs        bigint[]   NOT NULL,
    timestamps_us bigint[]   NOT NULL,
    origins       smallint[] NOT NULL,
    bmis          text[]     NOT NULL,
    -- 1 transfer, 2 account open, 3 fund, 4 close, 5 tick, 6 plugin command
    kinds         smallint[] NOT NULL,
    debtors       bigint[]   NOT NULL,
    creditors     bigint[]   NOT NULL,
    amounts_minor bigint[]   NOT NULL,
    currencies    text[]     NOT NULL,
    -- 0 accepted (ACCC once final), else rtgs_core::entry::RejectReason as u16 (RJCT)
    outcomes      smallint[] NOT NULL,
    state_hashes  bigint[]   NOT NULL,
    CHECK (seq_last >= seq_first),
    CHECK (cardinality(epochs) = seq_last - seq_first + 1
       AND cardinality(timestamps_us) = cardinality(epochs) AND cardinality(origins) = cardinality(epochs)
       AND cardinality(bmis) = cardinality(epochs) AND cardinality(kinds) = cardinality(epochs)
       AND cardinality(debtors) = cardinality(epochs) AND cardinality(creditors) = cardinality(epochs)
       AND cardinality(amounts_minor) = cardinality(epochs) AND cardinality(currencies) = cardinality(epochs)
       AND cardinality(outcomes) = cardinality(epochs) AND cardinality(state_hashes) = cardinality(epochs))
);
-- Do not spend the server's CPU trying to compress them.
ALTER TABLE applied_batch ALTER COLUMN epochs SET STORAGE EXTERNAL,
    ALTER COLUMN timestamps_us SET STORAGE EXTERNAL, ALTER COLUMN origins SET STORAGE EXTERNAL,
    ALTER COLUMN bmis SET STORAGE EXTERNAL, ALTER COLUMN kinds SET STORAGE EXTERNAL,
    ALTER COLUMN debtors SET STORAGE EXTERNAL, ALTER COLUMN creditors SET STORAGE EXTERNAL,
    ALTER COLUMN amounts_minor SET STORAGE EXTERNAL, ALTER COLUMN currencies SET STORAGE EXTERNAL,
    ALTER COLUMN outcomes SET STORAGE EXTERNAL, ALTER COLUMN state_hashes SET STORAGE EXTERNAL;

-- What was applied before this migration: runs of consecutive seqs, at most 8,192 a row.
INSERT INTO applied_batch
SELECT min(seq), max(seq), array_agg(epoch ORDER BY seq), array_agg(timestamp_us ORDER BY seq),
       array_agg(origin ORDER BY seq), array_agg(bmi ORDER BY seq), array_agg(kind ORDER BY seq),
       array_agg(debtor ORDER BY seq), array_agg(creditor ORDER BY seq),
       array_agg(amount_minor ORDER BY seq), array_agg(currency::text ORDER BY seq),
       array_agg(outcome ORDER BY seq), array_agg(state_hash ORDER BY seq)
  FROM (SELECT e.*, seq - row_number() OVER (ORDER BY seq) AS run FROM applied_entry e) e
 GROUP BY run, (seq - 1) / 8192;
DROP TABLE applied_entry;

CREATE OR REPLACE VIEW applied_entry AS
SELECT b.seq_first + u.i - 1 AS seq, u.epoch, u.timestamp_us, u.origin, u.bmi, u.kind, u.debtor,
       u.creditor, u.amount_minor, u.currency, u.outcome, u.state_hash
  FROM applied_batch b,
       unnest(b.epochs, b.timestamps_us, b.origins, b.bmis, b.kinds, b.debtors, b.creditors,
              b.amounts_minor, b.currencies, b.outcomes, b.state_hashes)
       WITH ORDINALITY AS u(epoch, timestamp_us, origin, bmi, kind, debtor, creditor, amount_minor,
                            currency, outcome, state_hash, i);
