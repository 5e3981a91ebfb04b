-- 0021: copies are not runs.  A server log whose record lines all repeat, with their
-- timestamps, lines of another file (a driver log that tee'd a server's tail) makes no run;
-- `copy_lines` counts its record lines so taken back and `copy_of` names the file they copy.
ALTER TABLE sources ADD COLUMN copy_lines BIGINT;
ALTER TABLE sources ADD COLUMN copy_of VARCHAR;
