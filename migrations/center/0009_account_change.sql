-- The balances a commit changed, as one row of arrays (the commit's last seq, then the changed
-- accounts' columns), instead of one upsert per changed account: an RTGS ledger has few, hot
-- accounts, and a busy center changed most of them in every commit (8,700 of 10,000 per commit
-- of 11,000 transfers in bench/cluster.sh). Every so many commits (or rows) the commit also
-- folds the pending rows into `account` — each account's latest values once — and deletes them
-- (rtgs_pg::center_store: FOLD_COMMITS, FOLD_ROWS). Measured in psql, 8,700 changed accounts of
-- 10,000: 33 ms for the upsert per commit against 0.65 ms for the row plus 10.5 ms per commit
-- for a fold every 16 (bench/README.md). Folding is in the commit's own transaction, so
-- `account` and `account_change` together are always exactly the state at the watermark.
--
-- Read balances only through `account_now` (the latest of both); `account` alone lags.
CREATE TABLE IF NOT EXISTS account_change (
    seq        bigint    PRIMARY KEY CHECK (seq >= 1),
    ids        bigint[]  NOT NULL,
    currencies text[]    NOT NULL,
    balances   bigint[]  NOT NULL,
    closed     boolean[] NOT NULL,
    CHECK (cardinality(ids) = cardinality(currencies) AND cardinality(ids) = cardinality(balances)
           AND cardinality(ids) = cardinality(closed))
);
-- Binary-ish arrays of integers: do not spend the server's CPU trying to compress them.
ALTER TABLE account_change ALTER COLUMN ids SET STORAGE EXTERNAL,
    ALTER COLUMN currencies SET STORAGE EXTERNAL, ALTER COLUMN balances SET STORAGE EXTERNAL,
    ALTER COLUMN closed SET STORAGE EXTERNAL;

-- Each account's latest pending values (the newest row holding it): what a fold writes.
CREATE OR REPLACE VIEW account_pending AS
SELECT DISTINCT ON (u.id) u.id, u.currency, u.balance_minor, u.closed
  FROM account_change c,
       unnest(c.ids, c.currencies, c.balances, c.closed) AS u(id, currency, balance_minor, closed)
 ORDER BY u.id, c.seq DESC;

-- Every account as of the watermark: its pending values, else the folded row.
CREATE OR REPLACE VIEW account_now AS
SELECT DISTINCT ON (id) id, currency, balance_minor, closed
  FROM (SELECT id, currency::text, balance_minor, closed, false AS pending FROM account
        UNION ALL
        SELECT id, currency, balance_minor, closed, true FROM account_pending) a
 ORDER BY id, pending DESC;
