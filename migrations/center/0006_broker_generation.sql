-- The broker generation this center's journal_offset and ack_offset refer to (see the
-- sequencer database's migration 0004).
ALTER TABLE watermark ADD COLUMN IF NOT EXISTS broker_generation bigint NOT NULL DEFAULT 0;
