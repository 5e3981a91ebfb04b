-- 0017: one integer per file.  The data tables carry `source_id` (the file's row in
-- `sources`) instead of its absolute path on every row: a moved or rotated file is one
-- row's update, deletes prune by an integer, rows are leaner.  The stored tables move to
-- the schema `logpipe_internal` with the caches and bookkeeping; `main` keeps the public
-- contract: `sources`, `run_env`, and a view of each data table under its old name, with
-- `source_path` in its old place (created by logpipe from these tables), so user SQL
-- keeps working and `SHOW TABLES` lists what is documented.
CREATE SCHEMA IF NOT EXISTS logpipe_internal;

-- every path a row names has its sources row (rows of a file whose row was lost keep
-- their path)
INSERT INTO sources (path, kind)
SELECT DISTINCT p, 'unknown' FROM (
    SELECT source_path AS p FROM runs UNION SELECT source_path FROM batches
    UNION SELECT source_path FROM events UNION SELECT source_path FROM http_requests
    UNION SELECT source_path FROM rejects UNION SELECT source_path FROM bench_results
    UNION SELECT source_path FROM phase_timings UNION SELECT source_path FROM request_metrics
    UNION SELECT source_path FROM traces UNION SELECT source_path FROM trace_kernels
    UNION SELECT source_path FROM trace_annotations UNION SELECT source_path FROM trace_ops
    UNION SELECT source_path FROM line_prefixes
) WHERE p IS NOT NULL AND p NOT IN (SELECT path FROM sources);
ALTER TABLE sources ADD COLUMN source_id INTEGER;
UPDATE sources SET source_id = n.id
FROM (SELECT path, CAST(row_number() OVER (ORDER BY path) AS INTEGER) AS id FROM sources) n
WHERE sources.path = n.path;

CREATE TABLE logpipe_internal.runs (
    run_id                 VARCHAR PRIMARY KEY,
    name                   VARCHAR NOT NULL UNIQUE,
    source_id              INTEGER NOT NULL,
    run_seq                INTEGER NOT NULL,
    first_line             BIGINT,
    started_at             TIMESTAMP,
    ended_at               TIMESTAMP,
    engine                 VARCHAR,
    engine_version         VARCHAR,
    format_era             VARCHAR,
    era_mask               BIGINT,
    model                  VARCHAR,
    tp_size                INTEGER,
    dp_size                INTEGER,
    ep_size                INTEGER,
    pp_size                INTEGER,
    spec_algorithm         VARCHAR,
    spec_num_steps         INTEGER,
    spec_eagle_topk        INTEGER,
    spec_num_draft_tokens  INTEGER,
    role                   VARCHAR,
    env_fingerprint        VARCHAR,
    env_complete           BOOLEAN,
    profiled               BOOLEAN,
    server_args            JSON,
    server_args_raw        VARCHAR,
    env                    JSON,
    tags                   JSON,
    utc_offset_s           INTEGER,
    clock_source           VARCHAR
);
INSERT INTO logpipe_internal.runs
SELECT t.run_id, t.name, s.source_id, t.run_seq, t.first_line, t.started_at, t.ended_at, t.engine, t.engine_version, t.format_era, t.era_mask, t.model, t.tp_size, t.dp_size, t.ep_size, t.pp_size, t.spec_algorithm, t.spec_num_steps, t.spec_eagle_topk, t.spec_num_draft_tokens, t.role, t.env_fingerprint, t.env_complete, t.profiled, t.server_args, t.server_args_raw, t.env, t.tags, t.utc_offset_s, t.clock_source
FROM main.runs t JOIN sources s ON s.path = t.source_path;
DROP TABLE main.runs;

CREATE TABLE logpipe_internal.batches (
    run_id                 VARCHAR NOT NULL,
    source_id              INTEGER NOT NULL,
    line_no                BIGINT NOT NULL,
    ts                     TIMESTAMP,
    ts_raw                 VARCHAR,
    kind                   VARCHAR NOT NULL,
    dp_rank                INTEGER,
    tp_rank                INTEGER,
    pp_rank                INTEGER,
    ep_rank                INTEGER,
    rank_tag               VARCHAR,
    forward_iter           BIGINT,
    mixed_chunk            BOOLEAN,
    new_seq                BIGINT,
    new_token              BIGINT,
    cached_token           BIGINT,
    running_req            BIGINT,
    queue_req              BIGINT,
    num_token              BIGINT,
    token_usage            DOUBLE,
    cuda_graph             BOOLEAN,
    graph_label            VARCHAR,
    gen_throughput         DOUBLE,
    input_throughput       DOUBLE,
    accept_len             DOUBLE,
    accept_rate            DOUBLE,
    extra                  JSON
);
INSERT INTO logpipe_internal.batches
SELECT t.run_id, s.source_id, t.line_no, t.ts, t.ts_raw, t.kind, t.dp_rank, t.tp_rank, t.pp_rank, t.ep_rank, t.rank_tag, t.forward_iter, t.mixed_chunk, t.new_seq, t.new_token, t.cached_token, t.running_req, t.queue_req, t.num_token, t.token_usage, t.cuda_graph, t.graph_label, t.gen_throughput, t.input_throughput, t.accept_len, t.accept_rate, t.extra
FROM main.batches t JOIN sources s ON s.path = t.source_path;
DROP TABLE main.batches;

CREATE TABLE logpipe_internal.events (
    run_id                 VARCHAR NOT NULL,
    source_id              INTEGER NOT NULL,
    line_no                BIGINT NOT NULL,
    ts                     TIMESTAMP,
    kind                   VARCHAR NOT NULL,
    message                VARCHAR,
    attrs                  JSON
);
INSERT INTO logpipe_internal.events
SELECT t.run_id, s.source_id, t.line_no, t.ts, t.kind, t.message, t.attrs
FROM main.events t JOIN sources s ON s.path = t.source_path;
DROP TABLE main.events;

CREATE TABLE logpipe_internal.http_requests (
    run_id                 VARCHAR NOT NULL,
    source_id              INTEGER NOT NULL,
    line_no                BIGINT NOT NULL,
    ts                     TIMESTAMP,
    client                 VARCHAR,
    method                 VARCHAR,
    path                   VARCHAR,
    protocol               VARCHAR,
    status                 INTEGER,
    status_text            VARCHAR
);
INSERT INTO logpipe_internal.http_requests
SELECT t.run_id, s.source_id, t.line_no, t.ts, t.client, t.method, t.path, t.protocol, t.status, t.status_text
FROM main.http_requests t JOIN sources s ON s.path = t.source_path;
DROP TABLE main.http_requests;

CREATE TABLE logpipe_internal.rejects (
    source_id              INTEGER NOT NULL,
    line_no                BIGINT NOT NULL,
    run_id                 VARCHAR,
    reason                 VARCHAR NOT NULL,
    raw                    VARCHAR
);
INSERT INTO logpipe_internal.rejects
SELECT s.source_id, t.line_no, t.run_id, t.reason, t.raw
FROM main.rejects t JOIN sources s ON s.path = t.source_path;
DROP TABLE main.rejects;

CREATE TABLE logpipe_internal.bench_results (
    source_id              INTEGER NOT NULL,
    line_no                BIGINT NOT NULL,
    run_id                 VARCHAR,
    link_method            VARCHAR,
    tool                   VARCHAR NOT NULL,
    format                 VARCHAR NOT NULL,
    backend                VARCHAR,
    dataset_name           VARCHAR,
    request_rate           DOUBLE,
    max_concurrency        BIGINT,
    completed              BIGINT,
    num_prompts            BIGINT,
    duration_s             DOUBLE,
    total_input_tokens     BIGINT,
    total_output_tokens    BIGINT,
    request_throughput     DOUBLE,
    input_throughput       DOUBLE,
    output_throughput      DOUBLE,
    total_throughput       DOUBLE,
    mean_ttft_ms           DOUBLE,
    median_ttft_ms         DOUBLE,
    p99_ttft_ms            DOUBLE,
    mean_tpot_ms           DOUBLE,
    median_tpot_ms         DOUBLE,
    p99_tpot_ms            DOUBLE,
    mean_itl_ms            DOUBLE,
    median_itl_ms          DOUBLE,
    p99_itl_ms             DOUBLE,
    mean_e2e_latency_ms    DOUBLE,
    median_e2e_latency_ms  DOUBLE,
    p99_e2e_latency_ms     DOUBLE,
    accept_length          DOUBLE,
    sglang_version         VARCHAR,
    server_info            JSON,
    extra                  JSON,
    duplicate_of           VARCHAR
);
INSERT INTO logpipe_internal.bench_results
SELECT s.source_id, t.line_no, t.run_id, t.link_method, t.tool, t.format, t.backend, t.dataset_name, t.request_rate, t.max_concurrency, t.completed, t.num_prompts, t.duration_s, t.total_input_tokens, t.total_output_tokens, t.request_throughput, t.input_throughput, t.output_throughput, t.total_throughput, t.mean_ttft_ms, t.median_ttft_ms, t.p99_ttft_ms, t.mean_tpot_ms, t.median_tpot_ms, t.p99_tpot_ms, t.mean_itl_ms, t.median_itl_ms, t.p99_itl_ms, t.mean_e2e_latency_ms, t.median_e2e_latency_ms, t.p99_e2e_latency_ms, t.accept_length, t.sglang_version, t.server_info, t.extra, t.duplicate_of
FROM main.bench_results t JOIN sources s ON s.path = t.source_path;
DROP TABLE main.bench_results;

CREATE TABLE logpipe_internal.phase_timings (
    source_id              INTEGER NOT NULL,
    line_no                BIGINT NOT NULL,
    run_id                 VARCHAR,
    link_method            VARCHAR,
    ts                     TIMESTAMP,
    rank                   INTEGER,
    batch_size             BIGINT,
    accepted_tokens        BIGINT,
    synchronized           BOOLEAN,
    phase                  VARCHAR NOT NULL,
    ms                     DOUBLE,
    cycle_ms               DOUBLE,
    extra                  JSON
);
INSERT INTO logpipe_internal.phase_timings
SELECT s.source_id, t.line_no, t.run_id, t.link_method, t.ts, t.rank, t.batch_size, t.accepted_tokens, t.synchronized, t.phase, t.ms, t.cycle_ms, t.extra
FROM main.phase_timings t JOIN sources s ON s.path = t.source_path;
DROP TABLE main.phase_timings;

CREATE TABLE logpipe_internal.request_metrics (
    source_id              INTEGER NOT NULL,
    line_no                BIGINT NOT NULL,
    run_id                 VARCHAR,
    link_method            VARCHAR,
    rid                    VARCHAR,
    finish_reason          VARCHAR,
    prompt_tokens          BIGINT,
    completion_tokens      BIGINT,
    cached_tokens          BIGINT,
    e2e_latency_s          DOUBLE,
    spec_verify_ct         BIGINT,
    spec_accept_length     DOUBLE,
    request_parameters     JSON,
    extra                  JSON
);
INSERT INTO logpipe_internal.request_metrics
SELECT s.source_id, t.line_no, t.run_id, t.link_method, t.rid, t.finish_reason, t.prompt_tokens, t.completion_tokens, t.cached_tokens, t.e2e_latency_s, t.spec_verify_ct, t.spec_accept_length, t.request_parameters, t.extra
FROM main.request_metrics t JOIN sources s ON s.path = t.source_path;
DROP TABLE main.request_metrics;

CREATE TABLE logpipe_internal.traces (
    source_id              INTEGER NOT NULL PRIMARY KEY,
    run_id                 VARCHAR,
    link_method            VARCHAR,
    profile_id             VARCHAR,
    tp_rank                INTEGER,
    dp_rank                INTEGER,
    pp_rank                INTEGER,
    ep_rank                INTEGER,
    stage                  VARCHAR,
    merged                 BOOLEAN,
    started_at             TIMESTAMP,
    ended_at               TIMESTAMP,
    schema_version         INTEGER,
    device_properties      JSON,
    distributed_info       JSON,
    metadata               JSON,
    events                 BIGINT,
    kernels                BIGINT,
    annotations            BIGINT,
    ops                    BIGINT,
    skipped                BIGINT
);
INSERT INTO logpipe_internal.traces
SELECT s.source_id, t.run_id, t.link_method, t.profile_id, t.tp_rank, t.dp_rank, t.pp_rank, t.ep_rank, t.stage, t.merged, t.started_at, t.ended_at, t.schema_version, t.device_properties, t.distributed_info, t.metadata, t.events, t.kernels, t.annotations, t.ops, t.skipped
FROM main.traces t JOIN sources s ON s.path = t.source_path;
DROP TABLE main.traces;

CREATE TABLE logpipe_internal.trace_kernels (
    source_id              INTEGER NOT NULL,
    event_no               BIGINT NOT NULL,
    ts                     TIMESTAMP,
    ts_us                  DOUBLE,
    dur_us                 DOUBLE,
    category               VARCHAR,
    name                   VARCHAR,
    kernel_class           VARCHAR,
    device                 INTEGER,
    stream                 BIGINT,
    correlation            BIGINT,
    external_id            BIGINT,
    grid                   VARCHAR,
    block                  VARCHAR,
    registers              INTEGER,
    shared_memory          BIGINT,
    bytes                  BIGINT,
    annotation             VARCHAR,
    step                   VARCHAR,
    args                   JSON
);
INSERT INTO logpipe_internal.trace_kernels
SELECT s.source_id, t.event_no, t.ts, t.ts_us, t.dur_us, t.category, t.name, t.kernel_class, t.device, t.stream, t.correlation, t.external_id, t.grid, t.block, t.registers, t.shared_memory, t.bytes, t.annotation, t.step, t.args
FROM main.trace_kernels t JOIN sources s ON s.path = t.source_path;
DROP TABLE main.trace_kernels;

CREATE TABLE logpipe_internal.trace_annotations (
    source_id              INTEGER NOT NULL,
    event_no               BIGINT NOT NULL,
    ts                     TIMESTAMP,
    ts_us                  DOUBLE,
    dur_us                 DOUBLE,
    side                   VARCHAR,
    name                   VARCHAR,
    pid                    VARCHAR,
    tid                    VARCHAR,
    external_id            BIGINT,
    args                   JSON
);
INSERT INTO logpipe_internal.trace_annotations
SELECT s.source_id, t.event_no, t.ts, t.ts_us, t.dur_us, t.side, t.name, t.pid, t.tid, t.external_id, t.args
FROM main.trace_annotations t JOIN sources s ON s.path = t.source_path;
DROP TABLE main.trace_annotations;

CREATE TABLE logpipe_internal.trace_ops (
    source_id              INTEGER NOT NULL,
    event_no               BIGINT NOT NULL,
    ts                     TIMESTAMP,
    ts_us                  DOUBLE,
    dur_us                 DOUBLE,
    ph                     VARCHAR,
    category               VARCHAR,
    name                   VARCHAR,
    pid                    VARCHAR,
    tid                    VARCHAR,
    correlation            BIGINT,
    external_id            BIGINT,
    args                   JSON
);
INSERT INTO logpipe_internal.trace_ops
SELECT s.source_id, t.event_no, t.ts, t.ts_us, t.dur_us, t.ph, t.category, t.name, t.pid, t.tid, t.correlation, t.external_id, t.args
FROM main.trace_ops t JOIN sources s ON s.path = t.source_path;
DROP TABLE main.trace_ops;

CREATE TABLE logpipe_internal.line_prefixes (
    run_id                 VARCHAR,
    source_id              INTEGER,
    line_no                BIGINT,
    prefix                 VARCHAR,
    outer_ts               TIMESTAMP,
    outer_ts_utc           BOOLEAN,
    service                VARCHAR,
    pid                    BIGINT
);
INSERT INTO logpipe_internal.line_prefixes
SELECT t.run_id, s.source_id, t.line_no, t.prefix, t.outer_ts, t.outer_ts_utc, t.service, t.pid
FROM main.line_prefixes t JOIN sources s ON s.path = t.source_path;
DROP TABLE main.line_prefixes;

-- caches and bookkeeping: internal
CREATE TABLE logpipe_internal.run_summary_cache AS SELECT * FROM main.run_summary_cache;
DROP TABLE main.run_summary_cache;
CREATE TABLE logpipe_internal.pair_verdict_cache AS SELECT * FROM main.pair_verdict_cache;
DROP TABLE main.pair_verdict_cache;
CREATE TABLE logpipe_internal.run_batch_ranges_cache AS
SELECT * FROM main.run_batch_ranges_cache;
DROP TABLE main.run_batch_ranges_cache;
CREATE TABLE logpipe_internal.source_generations AS SELECT * FROM main.source_generations;
DROP TABLE main.source_generations;
CREATE TABLE logpipe_internal.schema_views (sha256 VARCHAR NOT NULL);
DROP TABLE main.schema_views;
CREATE TABLE logpipe_internal.schema_migrations (
    version INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMP);
INSERT INTO logpipe_internal.schema_migrations SELECT * FROM main.schema_migrations;
DROP TABLE main.schema_migrations;
