-- 0005: speculative-decoding phase timings (schemas/phase_timings.md), one row per cycle
-- and phase, linked to the server run like benchmark results.
CREATE TABLE phase_timings (
    source_path      VARCHAR NOT NULL,
    line_no          BIGINT NOT NULL,
    run_id           VARCHAR,
    link_method      VARCHAR,
    ts               TIMESTAMP,
    rank             INTEGER,
    batch_size       BIGINT,
    accepted_tokens  BIGINT,
    synchronized     BOOLEAN,
    phase            VARCHAR NOT NULL,
    ms               DOUBLE,
    cycle_ms         DOUBLE,           -- sum of the cycle's phases
    extra            JSON
);
