-- 0015: one benchmark, one result.  bench_serving prints its summary to the console and
-- writes the same measurement to its --output-file JSONL; a run folder holding both gave
-- two rows.  The console row of such a pair names the JSONL record it repeats
-- (path:line) in duplicate_of; readers and views keep the JSONL row (more precise,
-- more keys) and skip the duplicate.
ALTER TABLE bench_results ADD COLUMN duplicate_of VARCHAR;
