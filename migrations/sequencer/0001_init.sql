-- The sequencer's durable state, in database rtgs_seq, shared by the three sequencer instances
-- (only the leader writes; the epoch fences every other).
--
-- Per batch, ONE transaction:
--   UPDATE sequencer SET last_seq = $hi, inbound_offset = $off, updated_at = now()
--    WHERE id = 1 AND epoch = $epoch AND last_seq = $lo - 1;      -- 0 rows: fenced, step down
--   INSERT INTO journal_outbox (seq_first, seq_last, epoch, frames) VALUES ($lo, $hi, $epoch, $frames);
-- then publish the frames to the journal topic, then UPDATE journal_outbox SET published = true.
-- A new leader first runs  UPDATE sequencer SET epoch = epoch + 1, leader = $me RETURNING ...
-- (fencing the old one), republishes every unpublished outbox row in seq order, and resumes the
-- inbound topic after `inbound_offset`. No SEQUENCE/nextval: seqs are assigned by the leader and
-- made durable by the conditional update, so none is ever burnt.

CREATE TABLE IF NOT EXISTS sequencer (
    id             smallint    PRIMARY KEY CHECK (id = 1),
    epoch          bigint      NOT NULL CHECK (epoch >= 0),
    last_seq       bigint      NOT NULL CHECK (last_seq >= 0),
    -- Last inbound-topic offset whose commands are in the outbox (we keep our own progress:
    -- the broker's OffsetCommit is not fenced by group generation).
    inbound_offset bigint      NOT NULL DEFAULT -1,
    leader         text,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
INSERT INTO sequencer (id, epoch, last_seq) VALUES (1, 0, 0) ON CONFLICT (id) DO NOTHING;

-- One row per sequencer batch: its encoded journal frames (rtgs-core codec, CRC-checked).
CREATE TABLE IF NOT EXISTS journal_outbox (
    seq_first   bigint      PRIMARY KEY CHECK (seq_first >= 1),
    seq_last    bigint      NOT NULL,
    epoch       bigint      NOT NULL,
    frames      bytea       NOT NULL,
    published   boolean     NOT NULL DEFAULT false,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CHECK (seq_last >= seq_first)
);
CREATE INDEX IF NOT EXISTS journal_outbox_unpublished ON journal_outbox (seq_first) WHERE NOT published;
