-- 0001: the tables of an SGLang server-log ingest.  Append-only: never edit a migration
-- that has shipped; add a new numbered file instead.  Documented in schemas/README.md.

CREATE TABLE sources (
    path            VARCHAR PRIMARY KEY,   -- absolute path of the ingested file
    kind            VARCHAR NOT NULL,      -- detected source kind (registry name)
    size_bytes      BIGINT,                -- size on disk when last ingested
    sha256          VARCHAR,               -- of the (decompressed) bytes ingested so far
    bytes_ingested  BIGINT,                -- complete lines only; a partial last line waits
    lines           BIGINT,                -- lines ingested so far
    rejected        BIGINT,                -- lines that went to rejects
    noise_lines     BIGINT,                -- progress bars, warnings, NCCL INFO, ...
    ingested_at     TIMESTAMP,
    parser_version  VARCHAR,
    head_sha256     VARCHAR,               -- of the first 4 KiB: finds moved/rotated files
    mtime           TIMESTAMP,
    state           JSON                   -- parser state to resume an appended file
);

CREATE TABLE runs (
    run_id                VARCHAR PRIMARY KEY,
    name                  VARCHAR NOT NULL UNIQUE,
    source_path           VARCHAR NOT NULL,
    run_seq               INTEGER NOT NULL,  -- 0-based launch number within the file
    first_line            BIGINT,
    started_at            TIMESTAMP,
    ended_at              TIMESTAMP,
    engine                VARCHAR,
    engine_version        VARCHAR,
    format_era            VARCHAR,
    era_mask              BIGINT,
    model                 VARCHAR,
    tp_size               INTEGER,
    dp_size               INTEGER,
    ep_size               INTEGER,
    pp_size               INTEGER,
    spec_algorithm        VARCHAR,
    spec_num_steps        INTEGER,
    spec_eagle_topk       INTEGER,
    spec_num_draft_tokens INTEGER,
    role                  VARCHAR,
    env_fingerprint       VARCHAR,
    env_complete          BOOLEAN,
    profiled              BOOLEAN,
    server_args           JSON,
    server_args_raw       VARCHAR,
    env                   JSON,
    tags                  JSON
);

CREATE TABLE batches (
    run_id           VARCHAR NOT NULL,
    source_path      VARCHAR NOT NULL,
    line_no          BIGINT NOT NULL,
    ts               TIMESTAMP,
    ts_raw           VARCHAR,
    kind             VARCHAR NOT NULL,
    dp_rank          INTEGER,
    tp_rank          INTEGER,
    pp_rank          INTEGER,
    ep_rank          INTEGER,
    rank_tag         VARCHAR,
    forward_iter     BIGINT,
    mixed_chunk      BOOLEAN,
    new_seq          BIGINT,
    new_token        BIGINT,
    cached_token     BIGINT,
    running_req      BIGINT,
    queue_req        BIGINT,
    num_token        BIGINT,
    token_usage      DOUBLE,
    cuda_graph       BOOLEAN,
    graph_label      VARCHAR,
    gen_throughput   DOUBLE,
    input_throughput DOUBLE,
    accept_len       DOUBLE,
    accept_rate      DOUBLE,
    extra            JSON
);

CREATE TABLE events (
    run_id       VARCHAR NOT NULL,
    source_path  VARCHAR NOT NULL,
    line_no      BIGINT NOT NULL,
    ts           TIMESTAMP,
    kind         VARCHAR NOT NULL,
    message      VARCHAR,
    attrs        JSON
);

CREATE TABLE http_requests (
    run_id       VARCHAR NOT NULL,
    source_path  VARCHAR NOT NULL,
    line_no      BIGINT NOT NULL,
    ts           TIMESTAMP,
    client       VARCHAR,
    method       VARCHAR,
    path         VARCHAR,
    protocol     VARCHAR,
    status       INTEGER,
    status_text  VARCHAR
);

CREATE TABLE rejects (
    source_path  VARCHAR NOT NULL,
    line_no      BIGINT NOT NULL,
    run_id       VARCHAR,
    reason       VARCHAR NOT NULL,
    raw          VARCHAR
);
