-- The toy engine's stats lines: one row per line.
CREATE TABLE logpipe_internal.toy_stats (
    run_id     VARCHAR NOT NULL,
    source_id  INTEGER NOT NULL,
    line_no    BIGINT NOT NULL,
    ts         TIMESTAMP,
    kind       VARCHAR,
    running    BIGINT,
    waiting    BIGINT,
    gen_tps    DOUBLE
);
