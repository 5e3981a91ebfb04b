-- 0008: the steady-state statistics of run_summary, kept per run by ingest (and by check
-- when it finds them missing or out of date), so that checks on a database of many runs
-- and tens of millions of batch rows do not classify every batch line again.
-- data_key: what the statistics were computed from (see the run_data_keys view); a row
-- whose key no longer matches is recomputed.  Internal: query run_summary instead.
CREATE TABLE run_summary_cache (
    run_id                 VARCHAR NOT NULL,
    data_key               VARCHAR NOT NULL,
    decode_lines           BIGINT,
    steady_decode_lines    BIGINT,
    steady_gen_throughput  DOUBLE,
    steady_accept_len      DOUBLE,
    graph_coverage         DOUBLE,
    strata                 BIGINT[]
);
