-- 0022: vLLM, the second engine.  Its periodic stats line is a window average over the
-- logging interval (not a batch): one row per stats line in `vllm_stats`; its
-- speculative-decoding line in `vllm_spec_metrics`, with the stats line it follows.
-- Both feed the neutral `server_samples` view (views.sql) beside SGLang's batches.
CREATE TABLE logpipe_internal.vllm_stats (
    run_id                 VARCHAR NOT NULL,
    source_id              INTEGER NOT NULL,
    line_no                BIGINT NOT NULL,
    ts                     TIMESTAMP,
    ts_raw                 VARCHAR,         -- the stamp as printed (`%m-%d %H:%M:%S`)
    year_from              VARCHAR,         -- where ts got its year: wrapper, start, mtime
    engine_index           INTEGER,         -- `Engine 001:` (DP rank); NULL when unprinted
    engines_aggregated     INTEGER,         -- `N Engines Aggregated:`
    prompt_tps             DOUBLE,
    gen_tps                DOUBLE,
    running                BIGINT,
    waiting                BIGINT,          -- V1 Waiting, V0 Pending
    swapped                BIGINT,          -- V0 only
    deferred               BIGINT,
    preemptions            BIGINT,
    corrupted              BIGINT,
    kv_device              VARCHAR,         -- GPU, CPU, XPU, NPU ...
    kv_usage               DOUBLE,          -- fraction 0-1
    cpu_kv_usage           DOUBLE,          -- V0's swap space, fraction
    prefix_hit_rate        DOUBLE,          -- fraction; V0's separate GPU line too
    external_prefix_hit_rate DOUBLE,
    mm_hit_rate            DOUBLE,
    kv_fetch               VARCHAR,         -- `KV fetch: ...` as printed
    engine_version         VARCHAR          -- V0 or V1, from the line's shape
);

CREATE TABLE logpipe_internal.vllm_spec_metrics (
    run_id                 VARCHAR NOT NULL,
    source_id              INTEGER NOT NULL,
    line_no                BIGINT NOT NULL,
    ts                     TIMESTAMP,
    stats_line_no          BIGINT,          -- the stats line of the same interval, if any
    engine_index           INTEGER,
    form                   VARCHAR,         -- v0, v1-0.8.0, v1-0.8.3, v1-0.8.5, v1-0.11
    cumulative             BOOLEAN,         -- V0 counts since server start; V1 per interval
    accepted_tokens        BIGINT,
    drafted_tokens         BIGINT,
    emitted_tokens         BIGINT,
    spec_tokens            BIGINT,          -- V0 `Number of speculative tokens`
    acceptance_rate        DOUBLE,          -- fraction 0-1
    mean_acceptance_length DOUBLE,          -- includes the bonus token
    system_efficiency      DOUBLE,
    accepted_tps           DOUBLE,
    drafted_tps            DOUBLE,
    per_position           DOUBLE[]
);
