-- 0028: the files whose runs' kept ranges and statistics are those of their rows: each
-- source's `sha256` as the end of the last ingest found it.  A source whose hash differs
-- (or that is missing here) had rows written since: by the ingest under way, or by one
-- stopped between a file's commit and its last transaction.  That last transaction folds
-- the ranges of every such file, brings the statistics of the runs whose ranges changed
-- up to date, and writes this table anew; an ingest that changed nothing reads no line
-- (it read every batch line of the database, ~1 s for 27 M lines).  Empty here: the
-- first ingest after this migration settles every file once.
CREATE TABLE logpipe_internal.settled_sources (
    path    VARCHAR NOT NULL,
    sha256  VARCHAR
);
