-- 0006: per-request metrics exported by SGLang's --export-metrics-to-file (0.5.6+),
-- linked to the server run like benchmark results.  Prompt and output text are not stored.
CREATE TABLE request_metrics (
    source_path         VARCHAR NOT NULL,
    line_no             BIGINT NOT NULL,
    run_id              VARCHAR,
    link_method         VARCHAR,
    rid                 VARCHAR,
    finish_reason       VARCHAR,
    prompt_tokens       BIGINT,
    completion_tokens   BIGINT,
    cached_tokens       BIGINT,
    e2e_latency_s       DOUBLE,
    spec_verify_ct      BIGINT,
    spec_accept_length  DOUBLE,
    request_parameters  JSON,      -- sampling parameters, text fields removed
    extra               JSON       -- every other meta_info key
);
