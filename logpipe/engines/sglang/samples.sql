-- SGLang's fragment of run_samples_in(rid, ids) (schemas/views.sql): its batch lines as
-- they are.
SELECT run_id, source_path, line_no, ts, kind, rank_tag, running_req, running_req AS running_now,
       queue_req, gen_throughput, input_throughput, accept_len, accept_rate, token_usage,
       cuda_graph
FROM batches WHERE in_runs(run_id, rid, ids)
