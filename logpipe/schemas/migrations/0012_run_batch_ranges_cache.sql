-- 0012: run_batch_ranges kept per run by ingest, so that `logpipe check` does not read
-- every batch line of the database to find what changed.  Ingest folds each file's new
-- lines in (counts and hash sums add up, minima and maxima combine), so the table equals
-- the run_batch_ranges view; check uses it when its line counts match the batches table,
-- and otherwise (a database changed by hand, or ingested before this table existed)
-- refills the runs that differ from the view.  Internal.
CREATE TABLE run_batch_ranges_cache (
    run_id                VARCHAR NOT NULL,
    batch_lines           BIGINT,
    lines_hash            HUGEINT,
    min_token_usage       DOUBLE,
    max_token_usage       DOUBLE,
    min_accept_len        DOUBLE,
    max_accept_len        DOUBLE,
    min_gen_throughput    DOUBLE,
    min_input_throughput  DOUBLE
);
