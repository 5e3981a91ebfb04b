-- 0003: verify an appended or moved file without re-reading all of it: the hash of the
-- last ingested bytes (up to 1 MiB) next to the hash of the first 4 KiB (head_sha256).
ALTER TABLE sources ADD COLUMN tail_sha256 VARCHAR;
