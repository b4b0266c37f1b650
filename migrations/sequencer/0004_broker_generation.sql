-- The broker's generation: raised by `rtgs rebuild-journal` when the broker lost its topics (a
-- broker on memory storage restarted, a wiped topic) and the journal was published again from
-- the outbox. Every topic offset recorded elsewhere (the centers' journal and ack offsets, this
-- row's inbound_offset) refers to one generation; a center whose generation is older reads the
-- new topics from their start (ARCHITECTURE.md "When the broker loses its data").
ALTER TABLE sequencer ADD COLUMN IF NOT EXISTS broker_generation bigint NOT NULL DEFAULT 0;
