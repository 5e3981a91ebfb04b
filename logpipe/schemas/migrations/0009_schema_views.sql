-- 0009: the SHA-256 of the views.sql the views were last created from (one row).  Opening
-- a database for writing recreates the views when it differs (or a migration ran); a
-- command that only reads (check) compares it with its own views.sql to know whether the
-- database needs bringing up to date first.  Internal.
CREATE TABLE schema_views (sha256 VARCHAR NOT NULL);
