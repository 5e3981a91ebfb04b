-- 0027: a run's environment (`env`, ~50 KB of JSON for a real launch, and its
-- `env_fingerprint`) in a table of its own, `logpipe_internal.run_envs`, one row per run
-- whose environment was computed; the `runs` view shows both columns where they were
-- (`env` '{}' and `env_fingerprint` NULL for a run without a row, as the defaults were).
-- Ingest writes every run's environment after its row: set in `runs` itself, it was the
-- row written again whole (an UPDATE of a wide value stays in memory DuckDB cannot spill
-- until the commit), ~1 ms a launch; here it is a row of its own, deleted and inserted.
CREATE TABLE logpipe_internal.run_envs (
    run_id           VARCHAR NOT NULL,
    env              JSON NOT NULL,
    env_fingerprint  VARCHAR
);
INSERT INTO logpipe_internal.run_envs
SELECT run_id, coalesce(env, '{}'), env_fingerprint FROM logpipe_internal.runs
WHERE env_fingerprint IS NOT NULL OR coalesce(env::VARCHAR, '{}') <> '{}';
ALTER TABLE logpipe_internal.runs DROP COLUMN env;
ALTER TABLE logpipe_internal.runs DROP COLUMN env_fingerprint;
