-- 0023: an engine brings its own tables (`Engine.tables`) through its own migrations
-- folder (`Engine.migrations`), applied after the core's; each applied file is one row
-- here, numbered per engine.
CREATE TABLE logpipe_internal.engine_migrations (
    engine      VARCHAR NOT NULL,
    version     INTEGER NOT NULL,
    name        VARCHAR,
    applied_at  TIMESTAMP,
    PRIMARY KEY (engine, version)
);
