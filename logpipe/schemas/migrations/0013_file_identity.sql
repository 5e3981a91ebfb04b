-- 0013: file identity as logrotate-aware tailers keep it: (device, inode) next to the
-- head hash.  A file that shrank under the same identity was truncated (copytruncate,
-- `> server.log`): its rows are kept and reading restarts at its new content, line
-- numbers continuing.  `generations` counts those restarts; source_generations keeps
-- what each earlier generation held, so that its rotated copy is recognised.
ALTER TABLE sources ADD COLUMN device BIGINT;
ALTER TABLE sources ADD COLUMN inode BIGINT;
ALTER TABLE sources ADD COLUMN generations INTEGER DEFAULT 0;
CREATE TABLE source_generations (
    path            VARCHAR NOT NULL,
    generation      INTEGER NOT NULL,
    head_sha256     VARCHAR,
    tail_sha256     VARCHAR,
    bytes_ingested  BIGINT,
    lines           BIGINT,
    ended_at        TIMESTAMP
);
