-- 0026: `run_env` without its primary-key index.  Its rows are written a run at a time,
-- the run's old rows deleted first, from a map of keys (one row per run and key by
-- construction); the index cost more than the rows (a file of 1,500 launches writes
-- ~900,000 entries: 1.65 s with the index, 0.65 s without) and no query looks a row up
-- by it.  Columns, types and rows are unchanged.
ALTER TABLE run_env RENAME TO run_env_indexed;
CREATE TABLE run_env (
    run_id    VARCHAR NOT NULL,
    key       VARCHAR NOT NULL,
    value     VARCHAR,              -- text as given; non-strings as JSON
    tier      VARCHAR NOT NULL,     -- identity | treatment | annotation
    source    VARCHAR NOT NULL,     -- manifest path, 'server_args', 'command line', ...
    conflict  VARCHAR               -- what another source said, when they disagree
);
INSERT INTO run_env SELECT run_id, key, value, tier, source, conflict FROM run_env_indexed;
DROP TABLE run_env_indexed;
