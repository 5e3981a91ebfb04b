-- 0019: texts that repeat on nearly every row are stored once.  A batch line's `kind`,
-- `rank_tag` and `graph_label` and an access line's `method`, `protocol` and
-- `status_text` take a few distinct values per file, yet DuckDB analysed and compressed
-- them again for every row it stored (a quarter of the load of a server log's rows).  The
-- stored tables now carry an integer `<column>_code`, the row of that text in
-- `logpipe_internal.labels`; the public views `batches` and `http_requests` show the text
-- under its documented name, in its documented place, as before.
CREATE TABLE logpipe_internal.labels (
    label_id               INTEGER PRIMARY KEY,
    label                  VARCHAR NOT NULL UNIQUE
);
INSERT INTO logpipe_internal.labels
SELECT CAST(row_number() OVER (ORDER BY label) AS INTEGER), label FROM (
    SELECT kind AS label FROM logpipe_internal.batches
    UNION SELECT rank_tag FROM logpipe_internal.batches
    UNION SELECT graph_label FROM logpipe_internal.batches
    UNION SELECT method FROM logpipe_internal.http_requests
    UNION SELECT protocol FROM logpipe_internal.http_requests
    UNION SELECT status_text FROM logpipe_internal.http_requests
) WHERE label IS NOT NULL;

CREATE TABLE logpipe_internal.batches_coded (
    run_id                 VARCHAR NOT NULL,
    source_id              INTEGER NOT NULL,
    line_no                BIGINT NOT NULL,
    ts                     TIMESTAMP,
    ts_raw                 VARCHAR,
    kind_code              INTEGER NOT NULL,
    dp_rank                INTEGER,
    tp_rank                INTEGER,
    pp_rank                INTEGER,
    ep_rank                INTEGER,
    rank_tag_code          INTEGER,
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
    graph_label_code       INTEGER,
    gen_throughput         DOUBLE,
    input_throughput       DOUBLE,
    accept_len             DOUBLE,
    accept_rate            DOUBLE,
    extra                  JSON
);
INSERT INTO logpipe_internal.batches_coded
SELECT t.run_id, t.source_id, t.line_no, t.ts, t.ts_raw, k.label_id, t.dp_rank, t.tp_rank, t.pp_rank, t.ep_rank, r.label_id, t.forward_iter, t.mixed_chunk, t.new_seq, t.new_token, t.cached_token, t.running_req, t.queue_req, t.num_token, t.token_usage, t.cuda_graph, g.label_id, t.gen_throughput, t.input_throughput, t.accept_len, t.accept_rate, t.extra
FROM logpipe_internal.batches t
JOIN logpipe_internal.labels k ON k.label = t.kind
LEFT JOIN logpipe_internal.labels r ON r.label = t.rank_tag
LEFT JOIN logpipe_internal.labels g ON g.label = t.graph_label;
DROP TABLE logpipe_internal.batches;
ALTER TABLE logpipe_internal.batches_coded RENAME TO batches;

CREATE TABLE logpipe_internal.http_requests_coded (
    run_id                 VARCHAR NOT NULL,
    source_id              INTEGER NOT NULL,
    line_no                BIGINT NOT NULL,
    ts                     TIMESTAMP,
    client                 VARCHAR,
    method_code            INTEGER,
    path                   VARCHAR,
    protocol_code          INTEGER,
    status                 INTEGER,
    status_text_code       INTEGER
);
INSERT INTO logpipe_internal.http_requests_coded
SELECT t.run_id, t.source_id, t.line_no, t.ts, t.client, m.label_id, t.path, p.label_id, t.status, s.label_id
FROM logpipe_internal.http_requests t
LEFT JOIN logpipe_internal.labels m ON m.label = t.method
LEFT JOIN logpipe_internal.labels p ON p.label = t.protocol
LEFT JOIN logpipe_internal.labels s ON s.label = t.status_text;
DROP TABLE logpipe_internal.http_requests;
ALTER TABLE logpipe_internal.http_requests_coded RENAME TO http_requests;
