-- 0010: run_summary gains min_ts_step_s (the smallest step between consecutive timestamps
-- of one rank's batch lines; negative when the clock went back), kept in the per-run cache
-- like the other statistics so that the data-quality check does not sort every batch row.
-- Cached rows were computed without it: they are dropped and recomputed by the next check.
ALTER TABLE run_summary_cache ADD COLUMN min_ts_step_s DOUBLE;
DELETE FROM run_summary_cache;
