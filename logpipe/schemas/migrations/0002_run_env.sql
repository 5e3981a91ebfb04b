-- 0002: the environment of each run as rows, so `WHERE key LIKE 'NCCL_%'` works.
CREATE TABLE run_env (
    run_id    VARCHAR NOT NULL,
    key       VARCHAR NOT NULL,
    value     VARCHAR,              -- text as given; non-strings as JSON
    tier      VARCHAR NOT NULL,     -- identity | treatment | annotation
    source    VARCHAR NOT NULL,     -- manifest path, 'server_args', 'command line', ...
    conflict  VARCHAR,              -- what another source said, when they disagree
    PRIMARY KEY (run_id, key)
);
