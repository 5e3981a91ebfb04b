-- 0004: benchmark results (bench_serving and friends), linked to the server run measured.
CREATE TABLE bench_results (
    source_path          VARCHAR NOT NULL,
    line_no              BIGINT NOT NULL,      -- JSONL line, or first line of a console table
    run_id               VARCHAR,              -- linked server run (NULL: unlinked)
    link_method          VARCHAR,              -- explicit | same folder | time window
    tool                 VARCHAR NOT NULL,     -- bench_serving | bench_one_batch | ...
    format               VARCHAR NOT NULL,     -- jsonl | console
    backend              VARCHAR,
    dataset_name         VARCHAR,
    request_rate         DOUBLE,
    max_concurrency      BIGINT,
    completed            BIGINT,
    num_prompts          BIGINT,
    duration_s           DOUBLE,
    total_input_tokens   BIGINT,
    total_output_tokens  BIGINT,
    request_throughput   DOUBLE,
    input_throughput     DOUBLE,
    output_throughput    DOUBLE,
    total_throughput     DOUBLE,
    mean_ttft_ms         DOUBLE,
    median_ttft_ms       DOUBLE,
    p99_ttft_ms          DOUBLE,
    mean_tpot_ms         DOUBLE,
    median_tpot_ms       DOUBLE,
    p99_tpot_ms          DOUBLE,
    mean_itl_ms          DOUBLE,
    median_itl_ms        DOUBLE,
    p99_itl_ms           DOUBLE,
    mean_e2e_latency_ms  DOUBLE,
    median_e2e_latency_ms DOUBLE,
    p99_e2e_latency_ms   DOUBLE,
    accept_length        DOUBLE,
    sglang_version       VARCHAR,              -- from server_info (0.5.5+)
    server_info          JSON,
    extra                JSON                  -- every key as printed
);
