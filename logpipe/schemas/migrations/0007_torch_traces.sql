-- 0007: PyTorch profiler (Kineto) Chrome traces.  One row per trace file in `traces`;
-- its duration events split three ways: device activities (`trace_kernels`), user
-- annotations such as record_function ranges and ProfilerStep#N (`trace_annotations`),
-- and every other duration or instant event: CPU ops, CUDA runtime and driver calls,
-- Python functions (`trace_ops`).  `event_no` is the event's position in traceEvents
-- (0-based): with source_path it traces every row back to its event.
CREATE TABLE traces (
    source_path         VARCHAR NOT NULL PRIMARY KEY,
    run_id              VARCHAR,
    link_method         VARCHAR,
    profile_id          VARCHAR,   -- from the file name: [prefix-]{profile_id}-TP-{r}...
    tp_rank             INTEGER,
    dp_rank             INTEGER,
    pp_rank             INTEGER,
    ep_rank             INTEGER,
    stage               VARCHAR,   -- EXTEND / DECODE with profile_by_stage
    merged              BOOLEAN,   -- merged-{profile_id}.trace.json.gz
    started_at          TIMESTAMP, -- first event, wall clock (baseTimeNanoseconds + ts)
    ended_at            TIMESTAMP,
    schema_version      INTEGER,
    device_properties   JSON,      -- deviceProperties, as written
    distributed_info    JSON,
    metadata            JSON,      -- every other top-level key
    events              BIGINT,    -- traceEvents read
    kernels             BIGINT,
    annotations         BIGINT,
    ops                 BIGINT,
    skipped             BIGINT     -- metadata (ph M) and flow (ph s/f/t) events, counted only
);

CREATE TABLE trace_kernels (
    source_path     VARCHAR NOT NULL,
    event_no        BIGINT NOT NULL,
    ts              TIMESTAMP,
    ts_us           DOUBLE,        -- as written (trace clock, microseconds)
    dur_us          DOUBLE,
    category        VARCHAR,       -- kernel / gpu_memcpy / gpu_memset
    name            VARCHAR,
    kernel_class    VARCHAR,       -- gemm / attention / communication / memory / other
    device          INTEGER,
    stream          BIGINT,
    correlation     BIGINT,
    external_id     BIGINT,
    grid            VARCHAR,
    block           VARCHAR,
    registers       INTEGER,
    shared_memory   BIGINT,
    bytes           BIGINT,
    annotation      VARCHAR,       -- innermost user annotation (record_function) around it
    step            VARCHAR,       -- ProfilerStep#N around it
    args            JSON
);

CREATE TABLE trace_annotations (
    source_path     VARCHAR NOT NULL,
    event_no        BIGINT NOT NULL,
    ts              TIMESTAMP,
    ts_us           DOUBLE,
    dur_us          DOUBLE,
    side            VARCHAR,       -- cpu (user_annotation) / gpu (gpu_user_annotation)
    name            VARCHAR,
    pid             VARCHAR,       -- as written (a number or a label)
    tid             VARCHAR,
    external_id     BIGINT,
    args            JSON
);

CREATE TABLE trace_ops (
    source_path     VARCHAR NOT NULL,
    event_no        BIGINT NOT NULL,
    ts              TIMESTAMP,
    ts_us           DOUBLE,
    dur_us          DOUBLE,        -- NULL for instant events
    ph              VARCHAR,
    category        VARCHAR,       -- cpu_op / cuda_runtime / cuda_driver / python_function ...
    name            VARCHAR,
    pid             VARCHAR,       -- as written (a number or a label)
    tid             VARCHAR,
    correlation     BIGINT,
    external_id     BIGINT,
    args            JSON
);
