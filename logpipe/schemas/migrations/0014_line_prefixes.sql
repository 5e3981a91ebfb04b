-- 0014: the outer prefix of record lines that no known wrapper explains, found by
-- SGLang's own signature anywhere in the line (docker compose, syslog/journald, a host
-- logger's stamp before SGLang's, a progress bar glued by \r, a pasted quote or label).
-- outer_ts is the outer stamp (UTC when it named its zone: outer_ts_utc), so that the
-- offset between the host logger's clock and SGLang's can be learned.
CREATE TABLE line_prefixes (
    run_id        VARCHAR,
    source_path   VARCHAR,
    line_no       BIGINT,
    prefix        VARCHAR,
    outer_ts      TIMESTAMP,
    outer_ts_utc  BOOLEAN,
    service       VARCHAR,
    pid           BIGINT
);
