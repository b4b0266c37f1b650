-- The origin center's notices are at-least-once: a restart re-sends, from this seq on, the
-- notices of this center's own entries that were not confirmed by the broker before the crash.
-- (seq_unfinal_first is not enough: a seq can become final — by the other two centers — before
-- this center has even applied it, let alone notified its participant.)
ALTER TABLE watermark ADD COLUMN IF NOT EXISTS seq_notice_from bigint NOT NULL DEFAULT 1;
