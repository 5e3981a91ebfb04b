-- 0020: one steady throughput per launch.  A run's `steady_gen_throughput` is now the
-- median of its steady decode lines at its steady stratum (the running-request level with
-- the most steady decode lines), the value `compare`, `check`, `ab`, `sweep`, the report and
-- `bench_vs_log` all use, and the stratum is kept beside it.  The cached statistics are
-- recomputed (their rules key changed with views.sql).
ALTER TABLE logpipe_internal.run_summary_cache ADD COLUMN steady_stratum INTEGER;
DELETE FROM logpipe_internal.run_summary_cache;
