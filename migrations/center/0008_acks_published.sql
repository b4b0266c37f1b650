-- How far the broker confirmed this center's own acks (the push path, ARCHITECTURE.md "The push
-- path"): every seq up to here has this center's ack in the applied-acks topic. Acks are also
-- pushed to the other centers the moment they are made, so a seq can be final before this
-- center's ack of it is in the topic; a restart publishes again every ack after this seq (read
-- back from applied_entry), so that a center reading the topic — one that missed the pushes —
-- finds every ack it needs. NULL: not known (a database from before this migration, whose node
-- did not push acks: its first unfinal seq is where its acks were in the topic up to).
ALTER TABLE watermark ADD COLUMN IF NOT EXISTS acks_published_through bigint
    CHECK (acks_published_through >= 0);
-- A center that applied nothing has published nothing.
UPDATE watermark SET acks_published_through = 0 WHERE seq_applied = 0 AND acks_published_through IS NULL;
