-- The outbox frames are compact binary (varints would not shrink much further) and written at
-- up to ~7 MB/s: do not spend the server's CPU trying to pglz-compress each batch. EXTERNAL keeps
-- large values out of line (TOAST) but uncompressed. Applies to rows written from now on.
ALTER TABLE journal_outbox ALTER COLUMN frames SET STORAGE EXTERNAL;
