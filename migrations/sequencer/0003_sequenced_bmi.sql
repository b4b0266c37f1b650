-- Every bmi ever sequenced, for the life of the ledger (mission.md §3.4: a bmi is paid at most
-- once, ever). Rows are written in the batch's own transaction (the fenced update of
-- `sequencer` and the outbox insert), so a bmi is known exactly when its entry is durable. The
-- leader looks a batch's bmis up here before it sequences the batch: a known bmi with the same
-- content is a retry (answered with the original seq), with other content a conflict (DUPL).
-- The primary key is the unique index that guarantees it: a second row for a bmi fails the
-- whole batch instead of journaling the bmi twice.
CREATE TABLE IF NOT EXISTS sequenced_bmi (
    bmi     bytea  PRIMARY KEY CHECK (octet_length(bmi) BETWEEN 1 AND 35),
    seq     bigint NOT NULL CHECK (seq >= 1),
    -- SHA-256 of the payload's encoding (rtgs_core::sequencer::sha256_of): the content a retry
    -- must match, unforgeable (never a 64-bit mix).
    content bytea  NOT NULL CHECK (octet_length(content) = 32)
);

-- Outbox batches whose bmis are in sequenced_bmi (all of them from this migration on: each
-- batch moves it in its transaction). A database that recorded batches before this migration
-- has them backfilled from the outbox by the next leader's takeover.
ALTER TABLE sequencer ADD COLUMN IF NOT EXISTS bmi_through bigint NOT NULL DEFAULT 0;
