-- 0025: what judging reads of a run, kept per run by ingest: its batch lines counted by
-- series, stratum, value and label (`run_judged_counts` in views.sql), so that compare,
-- check and the report read a few thousand rows of a run of a million lines instead of
-- classifying every line again.  Written with the run's statistics (`run_summary_cache`,
-- now computed from these counts), under the same data key; both are recomputed.
CREATE TABLE logpipe_internal.run_judged_cache (
    run_id    VARCHAR NOT NULL,
    data_key  VARCHAR NOT NULL,
    series    VARCHAR NOT NULL,
    stratum   BIGINT,
    value     DOUBLE,
    label     VARCHAR,
    n         BIGINT NOT NULL
);
DELETE FROM logpipe_internal.run_summary_cache;
