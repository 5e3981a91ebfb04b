-- 0009: the SHA-256 of the views.sql the views were last created from (one row).  Views
-- are recreated when a database is opened for writing; a command that only reads (check)
-- compares this with its own views.sql to know whether the database needs bringing up
-- to date first.  Internal.
CREATE TABLE schema_views (sha256 VARCHAR NOT NULL);
