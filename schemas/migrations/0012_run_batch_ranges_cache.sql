-- 0012: run_batch_ranges kept per run by ingest, so that `logpipe check` does not read
-- every batch line of the database to find what changed.  Ingest folds each file's new
-- lines in (counts and hash sums add up, minima and maxima combine), so the table equals
-- the run_batch_ranges view; check uses it when its line counts match the batches table
-- (a database changed by hand falls back to the view).  Internal.  The aggregate is that
-- of run_batch_ranges_of in views.sql, spelled out: migrations run before views exist.
CREATE TABLE run_batch_ranges_cache AS
SELECT run_id, count(*) AS batch_lines,
       sum(hash(line_no, ts, kind, rank_tag, running_req, cuda_graph, gen_throughput,
                input_throughput, accept_len, accept_rate, token_usage)) AS lines_hash,
       min(token_usage) AS min_token_usage, max(token_usage) AS max_token_usage,
       min(accept_len) AS min_accept_len, max(accept_len) AS max_accept_len,
       min(gen_throughput) AS min_gen_throughput,
       min(input_throughput) AS min_input_throughput
FROM batches GROUP BY run_id;
