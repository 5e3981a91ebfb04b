-- 0024: an engine's Prometheus counters: every sample of a `GET /metrics` snapshot (the
-- ones `logpipe launch` takes before and after each bench, or a user's saved `curl`
-- output), with the engine-neutral name its engine maps the family to.  Linked to the
-- server run like `bench_results`; the `counter_deltas` view takes after minus before.
CREATE TABLE logpipe_internal.metric_snapshots (
    source_id              INTEGER NOT NULL,
    line_no                BIGINT NOT NULL,
    run_id                 VARCHAR,
    link_method            VARCHAR,
    taken_at               TIMESTAMP,       -- UTC, from launch's header line; NULL without
    phase                  VARCHAR,         -- before | after (launch); NULL: a lone snapshot
    level                  DOUBLE,          -- the load level benched (launch --levels)
    level_by               VARCHAR,         -- max_concurrency | request_rate
    engine                 VARCHAR,         -- the engine whose prefix the family has
    family                 VARCHAR,         -- metric family as the parser names it
    type                   VARCHAR,         -- counter | gauge | histogram | summary | unknown
    sample                 VARCHAR,         -- sample name as printed (`..._total`, `_bucket`)
    labels                 JSON,            -- every label but a bucket's `le`, sorted
    le                     DOUBLE,          -- a histogram bucket's upper bound (+Inf: inf)
    value                  DOUBLE,
    metric                 VARCHAR          -- engine-neutral name; NULL for the others
);
